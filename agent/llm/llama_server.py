"""``python -m agent.llm.llama_server ARGS``: llama-cpp-python's OpenAI-compatible server that also reports how many
prompt tokens it served from its prefix cache, as OpenAI does (``usage.prompt_tokens_details.cached_tokens``).

llama.cpp keeps the KV cache of the previous sequence and re-evaluates only the prompt after the longest prefix it
shares with it; llama-cpp-python logs that length but leaves it out of the reply. Here ``Llama.generate`` records it
per thread (the server runs one completion at a time on a worker thread) and ``create_chat_completion`` adds it to
the usage; the reply goes out as a plain JSON response, so the server's response model does not drop the field.
Arguments are the stock server's (``python -m llama_cpp.server --help``).

With ``--cache true`` the server also keeps llama.cpp states across prompts that do not follow each other
(``PrefixStates``): one state per prompt family, so a method's fixed instructions and examples are prefilled once per
process, not once per question, even when another prompt ran in between.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

_reuse = threading.local()


def reused_prefix(cached: Sequence[int], prompt: Sequence[int], evaluated: int) -> int:
    """The prompt tokens llama.cpp will not evaluate again: the prefix ``prompt`` shares with the ``evaluated``
    tokens of the cached sequence, less one when the whole prompt matches (its last token is replayed for logits)."""
    if evaluated <= 0:
        return 0
    shared = shared_prefix(cached[:evaluated], prompt)
    return shared - 1 if shared == len(prompt) and shared > 0 else shared


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    shared = 0
    for x, y in zip(a, b):
        if x != y:
            break
        shared += 1
    return shared


class PrefixStates:
    """llama-cpp-python's prompt cache (``Llama.set_cache``), bounded for real and kept to one state per prompt family.

    Llama looks a prompt up here before decoding and loads the state that shares the longest prefix with it when that
    beats what is in the context now; after each completion it saves the context's state under its tokens. A new state
    replaces the saved one it shares ``family_tokens`` or more leading tokens with (the 20 execute calls of a
    question, or the same instructions a question later, keep one slot), so a different prompt family in between
    (relax before execute, the answer after it) does not push the others out. llama-cpp-python's own ``LlamaRAMCache``
    copies up to ``n_batch`` rows of logits into every state (311 MB with this model's vocabulary) without counting
    them against its capacity; here a state keeps the last row only, which loading never reads (the prompt's last
    token is always decoded again), and every byte is counted."""

    def __init__(self, capacity_bytes: int, family_tokens: int = 64):
        self.capacity_bytes = capacity_bytes
        self.family_tokens = family_tokens
        self.states: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def __bool__(self) -> bool:  # Llama tests `if self.cache:`; an empty cache must still be used
        return True

    @property
    def cache_size(self) -> int:
        return sum(_nbytes(state) for state in self.states.values())

    def _closest(self, key: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        best, length = None, 0
        for saved in self.states:
            shared = shared_prefix(saved, key)
            if shared > length:
                best, length = saved, shared
        return best, length

    def __getitem__(self, key: Sequence[int]) -> Any:
        saved, _ = self._closest(key)
        if saved is None:
            raise KeyError("no saved state shares a prefix with this prompt")
        self.states.move_to_end(saved)
        return self.states[saved]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._closest(key)[0] is not None

    def __setitem__(self, key: Sequence[int], state: Any) -> None:
        key = tuple(key)
        saved, shared = self._closest(key)
        if saved is not None and shared >= self.family_tokens:
            del self.states[saved]
        state.scores = state.scores[-1:].copy()
        self.states[key] = state
        while self.cache_size > self.capacity_bytes and len(self.states) > 1:
            self.states.popitem(last=False)  # the least recently used family


def _nbytes(state: Any) -> int:
    return int(state.llama_state_size) + state.scores.nbytes + state.input_ids.nbytes


def _patch() -> None:
    import llama_cpp
    from starlette.responses import JSONResponse

    generate = llama_cpp.Llama.generate
    complete = llama_cpp.Llama.create_chat_completion

    def counting_generate(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        if kwargs.get("reset", True):
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
    llama_cpp.LlamaRAMCache = PrefixStates  # what `--cache true --cache_type ram` builds


def main() -> None:
    _patch()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
