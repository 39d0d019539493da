"""The one place graphs call an LLM: render a prompt, constrain or parse the reply, retry, account usage.

Retries are bounded (``LLMOptions.retries``); when they run out the caller's documented ``fallback`` is returned
(``Reply.parsed`` is False) or, without one, ``OutputError`` is raised. Transport failures become
``LLMUnavailableError`` with the endpoint in the message, or ``LLMCrashError`` when the embedded server died.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor
from pydantic import BaseModel

from agent.errors import ContextOverflowError, LLMCrashError, LLMError, LLMUnavailableError
from agent.llm.factory import get_chat_model
from agent.llm.formats import accepted_params, json_response_format, refused_format
from agent.llm.parsing import ParseError, reasoning_of
from agent.llm.prompts import PROMPT, load_prompt, render
from agent.llm.usage import call_usage, record
from agent.schemas import NodeUsage

T = TypeVar("T")
R = TypeVar("R")

_NO_FALLBACK: Any = object()


class OutputError(LLMError):
    """The model kept returning output that could not be parsed."""


RETRY_TEMPERATURE = 0.3  # the least a retry samples at: greedy decoding would repeat the refused reply word for word


@dataclass(frozen=True)
class LLMOptions:
    llm: str | None = None
    temperature: float = 0.3
    seed: int | None = 0  # attempt n samples with seed + n - 1: the same prompt gets the same reply, a retry another
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
    truncated: bool = False  # the accepted reply stopped at its max_tokens, not where the model ended it
    prompt: list[BaseMessage] = field(default_factory=list)  # the messages the reply answers

    @property
    def reasoning(self) -> str:
        """A step-by-step reply's reasoning before its answer line (``reasoning_of``); '' for a fallback."""
        return reasoning_of(self.text) if self.parsed else ""

    def with_value(self, value: R) -> Reply[R]:
        """The same reply carrying a value derived from this one's (e.g. parsed pairs made into disambiguations)."""
        return Reply(value, self.text, self.usage, self.attempts, self.parsed, self.truncated, self.prompt)


def _schema_hint(schema: type[BaseModel]) -> str:
    return "Reply with one JSON object that follows this JSON schema:\n" + json.dumps(schema.model_json_schema())


def _response_format(options: LLMOptions, schema: type[BaseModel] | None) -> dict[str, Any] | None:
    return json_response_format(options.llm, schema.model_json_schema()) if schema and options.structured else None


def transcript(
    prompt: str,
    options: LLMOptions,
    reply: str,
    *,
    schema: type[BaseModel] | None = None,
    prefix: str = "",
    **variables: str,
) -> list[BaseMessage]:
    """The messages ``ask`` sent for these arguments, then ``reply``: the ``history`` of a call that continues that
    conversation, so the model's prefix cache serves everything up to the new turn."""
    hint = _schema_hint(schema) if schema and _response_format(options, schema) else ""
    return [*render(prompt, system_suffix=hint, prefix=prefix, history=(), **variables), AIMessage(content=reply)]


def ask(
    prompt: str,
    options: LLMOptions,
    *,
    parse: Callable[[str], T],
    schema: type[BaseModel] | None = None,
    fallback: T = _NO_FALLBACK,
    max_tokens: int | None = None,
    prefix: str = "",
    history: Sequence[BaseMessage] = (),
    **variables: str,
) -> Reply[T]:
    """Call the LLM with ``prompts/<prompt>.txt``; ``parse`` turns the text (plain or JSON) into the value.

    ``prefix`` is the question's shared prefix (``agent.steps.casebook``); ``history`` an earlier call's
    ``transcript``, continued by this call's turn. Replies are capped at ``max_tokens``, else at the prompt file's
    ``max_tokens`` (what its reply needs), never above the run's ``options.max_tokens``."""
    attempts = _attempts(prompt, options, parse, schema, fallback, max_tokens, prefix, history, variables)
    model, messages, config = get_chat_model(options.llm), next(attempts), _call_config(prompt)
    params = attempts.send(None)
    PROMPT.set(prompt)  # ask runs in its caller's context: a later call sets its own
    while True:
        start = time.perf_counter()
        with _llm_errors(prompt, model, params["max_tokens"]):
            try:
                sent = accepted_params(model, params)
                message = model.bind(**sent).invoke(messages, config=config)
            except Exception as exc:
                if refused_format(exc, model, params, sent):
                    continue  # the same attempt with the next response format (agent.llm.formats)
                if (truncated := _truncated_reply(exc)) is None:
                    raise
                message = truncated
        try:
            params = attempts.send((message, time.perf_counter() - start))
        except StopIteration as done:
            record(done.value.usage)
            return done.value


async def aask(
    prompt: str,
    options: LLMOptions,
    *,
    parse: Callable[[str], T],
    schema: type[BaseModel] | None = None,
    fallback: T = _NO_FALLBACK,
    max_tokens: int | None = None,
    prefix: str = "",
    history: Sequence[BaseMessage] = (),
    **variables: str,
) -> Reply[T]:
    """``ask`` awaited: the same prompt, parsing, retries and fallback, with the running event loop's client. What
    may block (reading the prompt file, starting the embedded server) runs on a worker thread."""
    attempts = _attempts(prompt, options, parse, schema, fallback, max_tokens, prefix, history, variables)
    messages = await asyncio.to_thread(next, attempts)
    model = await asyncio.to_thread(get_chat_model, options.llm, loop=asyncio.get_running_loop())
    config = _call_config(prompt)
    params = attempts.send(None)
    PROMPT.set(prompt)
    while True:
        start = time.perf_counter()
        with _llm_errors(prompt, model, params["max_tokens"]):
            try:
                sent = accepted_params(model, params)
                message = await model.bind(**sent).ainvoke(messages, config=config)
            except Exception as exc:
                if refused_format(exc, model, params, sent):
                    continue  # the same attempt with the next response format (agent.llm.formats)
                if (truncated := _truncated_reply(exc)) is None:
                    raise
                message = truncated
        try:
            params = attempts.send((message, time.perf_counter() - start))
        except StopIteration as done:
            record(done.value.usage)
            return done.value


def _attempts(
    prompt: str,
    options: LLMOptions,
    parse: Callable[[str], T],
    schema: type[BaseModel] | None,
    fallback: T,
    max_tokens: int | None,
    prefix: str,
    history: Sequence[BaseMessage],
    variables: dict[str, str],
) -> Generator[Any, Any, Reply[T]]:
    """The retry loop of ``ask`` and ``aask``: yields the messages, then each attempt's model parameters, and is sent
    each reply with its seconds; returns the ``Reply`` (or raises ``OutputError``). Only the calling differs."""
    response_format = _response_format(options, schema)
    hint = _schema_hint(schema) if schema and response_format else ""
    messages = render(prompt, system_suffix=hint, prefix=prefix, history=history, **variables)
    yield messages
    tokens = max_tokens or min(load_prompt(prompt).max_tokens or options.max_tokens, options.max_tokens)
    usage = NodeUsage()
    text = ""
    for attempt in range(1, options.retries + 2):
        temperature = options.temperature if attempt == 1 else max(options.temperature, RETRY_TEMPERATURE)
        params: dict[str, Any] = {"temperature": temperature, "max_tokens": tokens}
        if not load_prompt(prompt).answer:  # streamed only where a listener is attached, and only the answer
            params["stream"] = False
        if options.seed is not None:
            params["seed"] = options.seed + attempt - 1
        if response_format:
            params["response_format"] = response_format
        message, seconds = yield params
        usage = usage + call_usage(message, seconds)
        text = str(message.content)
        truncated = (message.response_metadata or {}).get("finish_reason") == "length"
        try:
            return Reply(parse(text), text, usage, attempt, truncated=truncated, prompt=messages)
        except (ParseError, ValueError):
            if truncated:
                tokens *= 2  # constrained JSON is only valid when finished: give it room
    if fallback is _NO_FALLBACK:
        raise OutputError(
            f"prompt '{prompt}': no usable output after {options.retries + 1} attempts; last: {text[:200]!r}"
        )
    return Reply(fallback, text, usage, options.retries + 1, parsed=False, prompt=messages)


def _truncated_reply(exc: Exception) -> AIMessage | None:
    """The reply inside the OpenAI client's ``LengthFinishReasonError`` (it refuses to parse a constrained reply cut at
    ``max_tokens``) as a message the retry loop handles like any truncated reply; None for every other error."""
    try:
        import openai
    except ImportError:
        return None
    if not isinstance(exc, openai.LengthFinishReasonError):
        return None
    completion = exc.completion
    content = (completion.choices[0].message.content if completion.choices else None) or ""
    usage = completion.usage.model_dump() if completion.usage else {}
    return AIMessage(content=content, response_metadata={"finish_reason": "length", "token_usage": usage})


ANSWER_TAG = "ambigqa:answer"  # on the calls whose reply is the answer a person reads: a stream's client keeps these


def _call_config(prompt: str) -> RunnableConfig:
    tags = [f"prompt:{prompt}", *([ANSWER_TAG] if load_prompt(prompt).answer else [])]
    return {"tags": tags, "run_name": prompt}


@contextmanager
def _llm_errors(prompt: str, model: Any, reply_tokens: int) -> Iterator[None]:
    """A failed call raised as one of our errors: the endpoint down or refusing us, the request refused, or a response
    that is not a chat completion (an ``LLMError``, HTTP 502 on the server)."""
    try:
        yield
    except LLMError:
        raise
    except Exception as exc:
        if _is_transport_error(exc):
            from agent.llm.server_launcher import crash_report

            if crash := crash_report(getattr(model, "openai_api_base", None)):
                raise LLMCrashError(crash) from exc
            raise LLMUnavailableError(f"LLM endpoint unreachable or too slow ({type(exc).__name__}: {exc})") from exc
        rejected = _rejection(exc, prompt, reply_tokens)
        if rejected is not None:
            raise rejected from exc
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise LLMError(
            f"prompt '{prompt}': the LLM's response could not be read ({type(exc).__name__}: {reason})"
        ) from exc


def _rejection(exc: Exception, prompt: str, reply_tokens: int) -> LLMError | None:
    """A 4xx answer as one of our errors: the endpoint refusing us is fatal, one request refused is not; a prompt over
    the model's window is a ``ContextOverflowError`` saying by how much (``agent.nodes`` retries it with fewer worked
    examples)."""
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
    refusal = f"prompt '{prompt}' was rejected by the LLM ({exc.status_code}): {message}"
    excess = overflow(message, body, reply_tokens)
    if excess is None and "context" not in message.lower():
        return LLMError(refusal)
    return ContextOverflowError(
        f"{refusal}; lower AMBIGQA_MAX_PASSAGE_WORDS or top_k, or raise AMBIGQA_LOCAL_CTX", excess
    )


_WINDOW = re.compile(r"(?:maximum context length is|context window of)\s*(\d+)", re.IGNORECASE)
_ASKED = re.compile(r"(?:requested tokens \(|requested |resulted in |request has )(\d+)", re.IGNORECASE)


def overflow(message: str, body: dict[str, Any], reply_tokens: int) -> int | None:
    """The tokens a prompt must lose so that it and a ``reply_tokens`` reply fit the window, read from the endpoint's
    refusal: OpenAI, vLLM and llama-cpp-python say both counts in the message ("maximum context length is 4096 tokens.
    However, you requested 5326 tokens (5026 in the messages, 300 in the completion)"), llama.cpp's server in the body
    (``n_prompt_tokens``, ``n_ctx``). None when neither count is given, or the prompt is not what runs over."""
    if isinstance(body.get("n_prompt_tokens"), int) and isinstance(body.get("n_ctx"), int):
        asked, window, with_reply = body["n_prompt_tokens"], body["n_ctx"], False
    elif (found := _WINDOW.search(message)) and (request := _ASKED.search(message)):
        asked, window = int(request[1]), int(found[1])
        with_reply = "in the completion" in message  # the requested count holds the reply's tokens too
    else:
        return None
    excess = asked + (0 if with_reply else reply_tokens) - window
    return excess if excess > 0 else None


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


async def gather_concurrently(fn: Callable[[T], Awaitable[R]], items: Iterable[T], limit: int = 8) -> list[R]:
    """Await ``fn`` over ``items``, at most ``limit`` at a time, on the running loop; results keep the input order."""
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with gate:
            return await fn(item)

    return list(await asyncio.gather(*(one(item) for item in items)))
