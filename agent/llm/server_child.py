"""``python -m agent.llm.server_child ARGS``: llama-cpp-python's OpenAI-compatible server that also reports how many
prompt tokens it served from its prefix cache, as OpenAI does (``usage.prompt_tokens_details.cached_tokens``), and
keeps the KV state of each prompt family it leaves (``--state_cache_mb``, ``agent.llm.prefix_states``). This module
runs inside the child process that ``agent.llm.server_launcher`` starts.

llama.cpp keeps the KV cache of the previous sequence and re-evaluates only the prompt after the longest prefix it
shares with it; llama-cpp-python logs that length but leaves it out of the reply. Here ``Llama.generate`` records it
per thread (the server runs one completion at a time on a worker thread) and ``create_chat_completion`` adds it to
the usage; the reply goes out as a plain JSON response, so the server's response model does not drop the field.
Arguments are the stock server's (``python -m llama_cpp.server --help``) plus ``--state_cache_mb`` and
``--no_repack`` (load the weights without repacking them: ``agent.llm.server_launcher.repacking`` says when).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from agent.llm.prefix_states import PrefixStates, SavedState, reused_prefix

_reuse = threading.local()
_states: PrefixStates | None = None


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


def _patch() -> None:
    import llama_cpp
    from starlette.responses import JSONResponse

    generate = llama_cpp.Llama.generate
    complete = llama_cpp.Llama.create_chat_completion

    def counting_generate(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        if kwargs.get("reset", True):
            if _states is not None:
                switch_family(self, _states, tokens)
            _reuse.tokens = reused_prefix(list(self._input_ids), tokens, self.n_tokens)
        return generate(self, tokens, *args, **kwargs)

    def reporting_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        _reuse.tokens = 0
        result = complete(self, *args, **kwargs)
        if not isinstance(result, dict):  # a stream: chunks carry no usage
            return result
        usage = result.setdefault("usage", {})
        usage["prompt_tokens_details"] = {"cached_tokens": min(_reuse.tokens, usage.get("prompt_tokens", 0))}
        return JSONResponse(result)

    llama_cpp.Llama.generate = counting_generate
    llama_cpp.Llama.create_chat_completion = reporting_completion


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
    global _states
    faulthandler.enable()  # a fatal signal in llama.cpp leaves its name and the Python frames in the log
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--state_cache_mb", type=int, default=0)
    parser.add_argument("--no_repack", action="store_true")
    ours, sys.argv[1:] = parser.parse_known_args()
    if ours.state_cache_mb > 0:
        _states = PrefixStates(ours.state_cache_mb << 20)
    if ours.no_repack:
        _without_repacking()
    _patch()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
