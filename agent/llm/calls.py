"""The one place graphs call an LLM: render a prompt, constrain or parse the reply, retry, account usage.

Retries are bounded (``LLMOptions.retries``); when they run out the caller's documented ``fallback`` is returned
(``Reply.parsed`` is False) or, without one, ``OutputError`` is raised. Transport failures become
``LLMUnavailableError`` with the endpoint in the message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.messages import AIMessage
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.config import get_config
from pydantic import BaseModel

from agent.errors import LLMError, LLMUnavailableError
from agent.llm.factory import get_chat_model, json_response_format
from agent.llm.parsing import ParseError
from agent.llm.prompts import load_prompt, render
from agent.llm.usage import call_usage, node_usage
from agent.schemas import NodeUsage, UsageReport

T = TypeVar("T")
R = TypeVar("R")

_NO_FALLBACK: Any = object()


class OutputError(LLMError):
    """The model kept returning output that could not be parsed."""


@dataclass(frozen=True)
class LLMOptions:
    llm: str | None = None
    temperature: float = 0.3
    max_tokens: int = 300
    structured: bool = True
    retries: int = 2


@dataclass
class Reply(Generic[T]):
    value: T
    text: str
    usage: NodeUsage = field(default_factory=NodeUsage)
    attempts: int = 1
    parsed: bool = True

    def with_value(self, value: R) -> Reply[R]:
        """The same reply carrying a value derived from this one's (e.g. parsed pairs made into disambiguations)."""
        return Reply(value, self.text, self.usage, self.attempts, self.parsed)


def _schema_hint(schema: type[BaseModel]) -> str:
    return "Reply with one JSON object that follows this JSON schema:\n" + json.dumps(schema.model_json_schema())


def ask(
    prompt: str,
    options: LLMOptions,
    *,
    parse: Callable[[str], T],
    schema: type[BaseModel] | None = None,
    fallback: T = _NO_FALLBACK,
    max_tokens: int | None = None,
    context: str = "",
    **variables: str,
) -> Reply[T]:
    """Call the LLM with ``prompts/<prompt>.txt``; ``parse`` turns the text (plain or JSON) into the value.

    ``context`` is the question's shared prefix (``agent.steps.casebook``). Replies are capped at ``max_tokens``, else
    at the prompt file's ``max_tokens`` (what its reply needs), never above the run's ``options.max_tokens``."""
    response_format = (
        json_response_format(options.llm, schema.model_json_schema()) if schema and options.structured else None
    )
    messages = render(
        prompt, system_suffix=_schema_hint(schema) if response_format else "", context=context, **variables
    )
    model = get_chat_model(options.llm)
    tokens = max_tokens or min(load_prompt(prompt).max_tokens or options.max_tokens, options.max_tokens)
    usage = NodeUsage()
    text = ""
    for attempt in range(1, options.retries + 2):
        params: dict[str, Any] = {"temperature": options.temperature, "max_tokens": tokens}
        if response_format:
            params["response_format"] = response_format
        bound = model.bind(**params)
        start = time.perf_counter()
        message = _invoke(bound, messages, prompt)
        usage = usage + call_usage(message, time.perf_counter() - start)
        text = str(message.content)
        try:
            return Reply(parse(text), text, usage, attempt)
        except (ParseError, ValueError):
            if (message.response_metadata or {}).get("finish_reason") == "length":
                tokens *= 2  # truncated (constrained JSON is only valid when finished): give it room
    if fallback is _NO_FALLBACK:
        raise OutputError(
            f"prompt '{prompt}': no usable output after {options.retries + 1} attempts; last: {text[:200]!r}"
        )
    return Reply(fallback, text, usage, options.retries + 1, parsed=False)


def _invoke(model: Any, messages: list, prompt: str) -> AIMessage:
    try:
        return model.invoke(messages, config={"tags": [f"prompt:{prompt}"], "run_name": prompt})
    except LLMError:
        raise
    except Exception as exc:
        if _is_transport_error(exc):
            raise LLMUnavailableError(f"LLM endpoint unreachable or too slow ({type(exc).__name__}: {exc})") from exc
        rejected = _rejection(exc, prompt)
        if rejected is not None:
            raise rejected from exc
        raise


def _rejection(exc: Exception, prompt: str) -> LLMError | None:
    """A 4xx answer as one of our errors: the endpoint refusing us is fatal, one request refused is not."""
    try:
        import openai
    except ImportError:
        return None
    if not isinstance(exc, openai.APIStatusError) or not 400 <= exc.status_code < 500:
        return None
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    if exc.status_code in (401, 403, 404):
        return LLMUnavailableError(f"the LLM endpoint refused the request ({exc.status_code}): {message}")
    hint = (
        "; lower AMBIGQA_MAX_PASSAGE_WORDS or top_k, or raise AMBIGQA_LOCAL_CTX" if "context" in message.lower() else ""
    )
    return LLMError(f"prompt '{prompt}' was rejected by the LLM ({exc.status_code}): {message}{hint}")


def _is_transport_error(exc: Exception) -> bool:
    try:
        import openai
    except ImportError:
        return False
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def run_concurrently(fn: Callable[[T], R], items: Iterable[T], max_workers: int = 8) -> list[R]:
    """Map ``fn`` over ``items`` on threads (LLM calls are I/O bound); results keep the input order."""
    items = list(items)
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ContextThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        return list(pool.map(fn, items))


def usage_update(*replies: Reply[Any]) -> UsageReport:
    """The state update for the current node's LLM calls (the node name comes from LangGraph's config)."""
    try:
        node = get_config().get("metadata", {}).get("langgraph_node", "llm")
    except RuntimeError:
        node = "llm"
    return node_usage(node, *(r.usage for r in replies))
