"""``python -m agent.llm.server_child ARGS``: llama-cpp-python's OpenAI-compatible server that also reports how many
prompt tokens it served from its prefix cache, as OpenAI does (``usage.prompt_tokens_details.cached_tokens``), and
keeps the KV state of each prompt family it leaves (``--state_cache_mb``, ``agent.llm.prefix_states``) and the states
of system messages that other content follows on disk (``--disk_states DIR --disk_states_mb N``), so the next process
starts with them evaluated. This module runs inside the child process that ``agent.llm.server_launcher`` starts.

llama.cpp keeps the KV cache of the previous sequence and re-evaluates only the prompt after the longest prefix it
shares with it; llama-cpp-python logs that length but leaves it out of the reply. Here ``Llama.generate`` records it
for the current call (``CallCounts``) and ``create_chat_completion`` adds it to the usage; the reply goes out as a
plain JSON response, so the server's response model does not drop the field. A stream ends with a chunk carrying the
usage, as OpenAI's does with ``include_usage``.
Arguments are the stock server's (``python -m llama_cpp.server --help``) plus ``--state_cache_mb``,
``--disk_states``, ``--disk_states_mb`` and ``--no_repack`` (load the weights without repacking them: ``agent.llm.server_launcher.repacking`` says when).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.llm.prefix_states import DiskStates, PrefixStates, SavedState, reused_prefix, shared_instruction

_states: PrefixStates | None = None
_disk: DiskStates | None = None


def save_state(llama: Any) -> SavedState:
    """The KV state of ``llama`` (its private context and token buffer: llama-cpp-python exposes no public way)."""
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llama._ctx.ctx)
    data = np.empty(size, dtype=np.uint8)
    written = llama_cpp.llama_state_get_data(llama._ctx.ctx, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size)
    return SavedState(tuple(int(t) for t in llama._input_ids), data if written == size else data[:written].copy())


def restore_state(llama: Any, state: SavedState) -> None:
    """Load ``state`` into ``llama``; its logits are stale, so the next prompt decodes at least its last token again
    (``Llama.generate`` does: ``_requires_eval``)."""
    import llama_cpp

    pointer = state.data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
    if llama_cpp.llama_state_set_data(llama._ctx.ctx, pointer, state.data.nbytes) != state.data.nbytes:
        raise RuntimeError("llama.cpp refused a saved state")
    llama.input_ids[: len(state.tokens)] = state.tokens
    llama.n_tokens = len(state.tokens)
    llama._requires_eval = True


def switch_family(llama: Any, states: PrefixStates, prompt: Sequence[int]) -> None:
    """Before ``llama`` evaluates ``prompt``: when ``prompt`` leaves the family of the state in memory, keep that
    state and load the kept one that shares more of ``prompt`` (``PrefixStates.switch_to``). Within a family
    (VerDICt's 20 execute calls) the state in memory is the family's newest: nothing is saved or searched."""
    load = states.switch_to(list(llama._input_ids), prompt, lambda: save_state(llama))
    if load is not None:
        restore_state(llama, load)


def system_end(llama: Any, prompt: Sequence[int]) -> int:
    """Where the prompt's system message ends: just after its first end-of-turn token (ChatML's ``<|im_end|>``,
    else the model's end-of-sequence token; 0: none)."""
    end_of_turn = getattr(llama, "_end_of_turn", None)
    if end_of_turn is None:
        pieces = llama.tokenize(b"<|im_end|>", add_bos=False, special=True)
        end_of_turn = llama._end_of_turn = pieces[0] if len(pieces) == 1 else llama.token_eos()
    for i, token in enumerate(prompt):
        if token == end_of_turn:
            return i + 1
    return 0


def warm_from_disk(llama: Any, disk: DiskStates, prompt: Sequence[int]) -> None:
    """Before ``llama`` evaluates ``prompt``: keep the live system message on disk when this prompt shares it and
    then differs (``shared_instruction``); load the prompt's system message from disk when memory holds less of it."""
    end = system_end(llama, prompt)
    if end == 0:
        return
    live = list(llama._input_ids)
    system = list(prompt[:end])
    if shared_instruction(live, prompt, end) and disk.worth_keeping(system):
        llama._ctx.kv_cache_seq_rm(-1, end, -1)  # the state of the system message alone; the prompt shares it
        llama.n_tokens = end
        disk.save(save_state(llama))
    elif len(live) < end or live[:end] != system:
        state = disk.load(system)
        if state is not None:
            try:
                restore_state(llama, state)
            except RuntimeError:
                disk.forget(system)


class CallCounts:
    """One completion's prompt tokens, those served from the prefix cache, and the tokens generated. The server runs
    one completion at a time (its llama proxy lock spans a whole stream), so the current one is a module variable:
    a stream's chunks are produced on whichever worker thread takes the next one."""

    def __init__(self) -> None:
        self.prompt = self.cached = self.generated = 0

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.generated,
            "total_tokens": self.prompt + self.generated,
            "prompt_tokens_details": {"cached_tokens": min(self.cached, self.prompt)},
        }


_call = CallCounts()


def with_usage(chunks: Iterator[Mapping[str, Any]], counts: CallCounts) -> Iterator[Mapping[str, Any]]:
    """A stream's chunks, then one more with the call's usage and no choices, as OpenAI sends with
    ``stream_options.include_usage`` (llama-cpp-python's stream carries no usage)."""
    last: Mapping[str, Any] = {}
    for chunk in chunks:
        last = chunk
        yield chunk
    yield {key: last[key] for key in ("id", "object", "created", "model") if key in last} | {
        "choices": [],
        "usage": counts.usage(),
    }


def _patch() -> None:
    import llama_cpp
    from starlette.responses import JSONResponse

    generate = llama_cpp.Llama.generate
    complete = llama_cpp.Llama.create_chat_completion

    def counting_generate(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        counts = _call
        if kwargs.get("reset", True):
            if _states is not None:
                switch_family(self, _states, tokens)
            if _disk is not None:
                warm_from_disk(self, _disk, tokens)
            counts.prompt, counts.cached = len(tokens), reused_prefix(list(self._input_ids), tokens, self.n_tokens)
        for token in generate(self, tokens, *args, **kwargs):
            counts.generated += 1
            yield token

    def reporting_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _call
        counts = _call = CallCounts()
        result = complete(self, *args, **kwargs)
        if not isinstance(result, dict):  # a stream
            return with_usage(result, counts)
        usage: dict[str, Any] = result.setdefault("usage", {})  # type: ignore[assignment, typeddict-item]  # llama-cpp's TypedDict lacks the field
        usage["prompt_tokens_details"] = {"cached_tokens": min(counts.cached, usage.get("prompt_tokens", 0))}
        return JSONResponse(result)

    llama_cpp.Llama.generate = counting_generate  # type: ignore[method-assign, assignment]  # patched on purpose
    llama_cpp.Llama.create_chat_completion = reporting_completion  # type: ignore[method-assign]  # patched on purpose


def _without_repacking() -> None:
    """Every model this process loads keeps its weights as stored: ``use_extra_bufts`` off, the only switch llama.cpp
    has for its repacked (CPU_REPACK, AMX) buffer types. ``Llama`` reads the default parameters at each load."""
    import llama_cpp.llama_cpp as bindings

    defaults = bindings.llama_model_default_params

    def no_repack() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = no_repack


def main() -> None:
    global _states, _disk
    faulthandler.enable()  # a fatal signal in llama.cpp leaves its name and the Python frames in the log
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--state_cache_mb", type=int, default=0)
    parser.add_argument("--no_repack", action="store_true")
    parser.add_argument("--disk_states", type=Path, default=None)
    parser.add_argument("--disk_states_mb", type=int, default=0)
    ours, sys.argv[1:] = parser.parse_known_args()
    if ours.state_cache_mb > 0:
        _states = PrefixStates(ours.state_cache_mb << 20)
    if ours.disk_states is not None and ours.disk_states_mb > 0:
        _disk = DiskStates(ours.disk_states, ours.disk_states_mb << 20)
    if ours.no_repack:
        _without_repacking()
    _patch()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
