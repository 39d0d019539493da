"""``python -m agent.llm.llama_server ARGS``: llama-cpp-python's OpenAI-compatible server that also reports how many
prompt tokens it served from its prefix cache, as OpenAI does (``usage.prompt_tokens_details.cached_tokens``), and
keeps the context of each prompt family it leaves (``--state_cache_mb``).

llama.cpp keeps the KV cache of the previous sequence and re-evaluates only the prompt after the longest prefix it
shares with it; llama-cpp-python logs that length but leaves it out of the reply. Here ``Llama.generate`` records it
per thread (the server runs one completion at a time on a worker thread) and ``create_chat_completion`` adds it to
the usage; the reply goes out as a plain JSON response, so the server's response model does not drop the field.
Arguments are the stock server's (``python -m llama_cpp.server --help``) plus ``--state_cache_mb`` and
``--no_repack`` (load the weights without repacking them: ``agent.llm.local_server.repacking`` says when).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_reuse = threading.local()
_states: PrefixStates | None = None


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    shared = 0
    for x, y in zip(a, b):
        if x != y:
            break
        shared += 1
    return shared


def reused_prefix(cached: Sequence[int], prompt: Sequence[int], evaluated: int) -> int:
    """The prompt tokens llama.cpp will not evaluate again: the prefix ``prompt`` shares with the ``evaluated``
    tokens of the cached sequence, less one when the whole prompt matches (its last token is replayed for logits)."""
    if evaluated <= 0:
        return 0
    shared = shared_prefix(cached[:evaluated], prompt)
    return shared - 1 if shared == len(prompt) and shared > 0 else shared


@dataclass(frozen=True)
class SavedContext:
    """A llama.cpp context as ``llama_state_get_data`` wrote it (its KV cache), and the tokens it holds."""

    tokens: tuple[int, ...]
    data: np.ndarray  # uint8

    @property
    def nbytes(self) -> int:
        return self.data.nbytes + 8 * len(self.tokens)


class PrefixStates:
    """Contexts of the prompt families the server left, by their tokens, within ``capacity_bytes``.

    A family is the prompts that share ``family_tokens`` or more leading tokens: a method's calls with one
    instruction and examples (VerDICt's execute calls, the same prompt's calls on the next question). Keeping one
    family's context means a different family in between (relax before execute, the answer after it) no longer costs
    the next question its instruction's prefill. A newer context replaces its family's older one, and the least
    recently used family goes first when the bytes run out."""

    def __init__(self, capacity_bytes: int, family_tokens: int = 64):
        self.capacity_bytes = capacity_bytes
        self.family_tokens = family_tokens
        self.saved: OrderedDict[tuple[int, ...], SavedContext] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(context.nbytes for context in self.saved.values())

    def closest(self, tokens: Sequence[int]) -> tuple[SavedContext | None, int]:
        """The saved context sharing the longest prefix with ``tokens``, and that length (None, 0 if none shares)."""
        best, length = None, 0
        for key, context in self.saved.items():
            shared = shared_prefix(key, tokens)
            if shared > length:
                best, length = context, shared
        if best is not None:
            self.saved.move_to_end(best.tokens)
        return best, length

    def keep(self, context: SavedContext) -> None:
        older, shared = self.closest(context.tokens)
        if older is not None and shared >= self.family_tokens:
            del self.saved[older.tokens]
        self.saved[context.tokens] = context
        while self.nbytes > self.capacity_bytes and self.saved:
            self.saved.popitem(last=False)


def save_context(llama: Any) -> SavedContext:
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llama._ctx.ctx)
    data = np.empty(size, dtype=np.uint8)
    written = llama_cpp.llama_state_get_data(llama._ctx.ctx, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size)
    return SavedContext(tuple(int(t) for t in llama._input_ids), data if written == size else data[:written].copy())


def restore_context(llama: Any, context: SavedContext) -> None:
    """Load ``context`` into ``llama``; its logits are stale, so the next prompt decodes at least its last token again
    (``Llama.generate`` does: ``_requires_eval``)."""
    import llama_cpp

    pointer = context.data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
    if llama_cpp.llama_state_set_data(llama._ctx.ctx, pointer, context.data.nbytes) != context.data.nbytes:
        raise RuntimeError("llama.cpp refused a saved context")
    llama.input_ids[: len(context.tokens)] = context.tokens
    llama.n_tokens = len(context.tokens)
    llama._requires_eval = True


def switch_family(llama: Any, states: PrefixStates, prompt: Sequence[int]) -> None:
    """Before ``llama`` evaluates ``prompt``: when ``prompt`` leaves the family of the context in memory, keep that
    context and load the kept one that shares more of ``prompt``. Within a family (VerDICt's 20 execute calls) the
    context in memory is the family's newest: nothing is saved or searched."""
    live = shared_prefix(llama._input_ids, prompt)
    if live >= states.family_tokens:
        return
    if llama.n_tokens > 0:
        states.keep(save_context(llama))
    context, shared = states.closest(prompt)
    if context is not None and shared > live:
        restore_context(llama, context)


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
