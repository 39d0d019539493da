"""``python -m agent.llm.llama_server ARGS``: llama-cpp-python's OpenAI-compatible server that also reports how many
prompt tokens it served from its prefix cache, as OpenAI does (``usage.prompt_tokens_details.cached_tokens``).

llama.cpp keeps the KV cache of the previous sequence and re-evaluates only the prompt after the longest prefix it
shares with it; llama-cpp-python logs that length but leaves it out of the reply. Here ``Llama.generate`` records it
per thread (the server runs one completion at a time on a worker thread) and ``create_chat_completion`` adds it to
the usage; the reply goes out as a plain JSON response, so the server's response model does not drop the field.
Arguments are the stock server's (``python -m llama_cpp.server --help``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

_reuse = threading.local()


def reused_prefix(cached: Sequence[int], prompt: Sequence[int], evaluated: int) -> int:
    """The prompt tokens llama.cpp will not evaluate again: the prefix ``prompt`` shares with the ``evaluated``
    tokens of the cached sequence, less one when the whole prompt matches (its last token is replayed for logits)."""
    if evaluated <= 0:
        return 0
    shared = 0
    for a, b in zip(cached[:evaluated], prompt):
        if a != b:
            break
        shared += 1
    return shared - 1 if shared == len(prompt) and shared > 0 else shared


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


def main() -> None:
    _patch()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
