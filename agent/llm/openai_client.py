"""OpenAI-compatible chat clients (imported lazily: langchain-openai is slow to import)."""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI


class LlamaCppChat(ChatOpenAI):
    """ChatOpenAI for llama-cpp-python's server, which reads ``max_tokens`` and ignores ``max_completion_tokens``
    (what ChatOpenAI sends): without this, a 300-token limit let one answer run to 758 tokens."""

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload
