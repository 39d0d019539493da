"""The server's front door: pure ASGI middleware that checks a request completely before it may run a graph.

In order: the API key (``X-API-Key`` header, or the cookie ``/login`` sets for a browser), then the whole body, read
within ``body_timeout`` and counted as it arrives (chunked uploads too), then its content (JSON, each question, each
per-request option against the operator's allowlist), and only then a graph slot per question (``/batch`` takes one
per item, ``/clarify`` and its resume one each), with a deadline on the run. Every refusal is a JSON
``{"detail": ...}`` with a 4xx/5xx status; the connection stays usable.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, Field

from agent.context import make_context
from agent.errors import AgentError
from agent.registry import load_graph

API_KEY_HEADER = "x-api-key"
KEY_COOKIE = "ambigqa_key"
RUN_ACTIONS = ("invoke", "batch", "stream", "stream_log", "stream_events")
NEVER_FROM_A_REQUEST = frozenset({"llm"})


class Refusal(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


class Policy(BaseModel):
    """What the operator allows; nothing here comes from a request."""

    api_key: str | None = None
    collections: tuple[str, ...] = Field(description="collections a request may name; the first is the default")
    options: frozenset[str] | None = Field(default=None, description="settable context fields; None: all but llm")
    max_body_bytes: int = 64_000
    body_timeout: float = 10.0
    max_concurrent: int = 4
    queue_timeout: float = 30.0
    request_timeout: float = 600.0
    max_question_chars: int = 2000

    def settable(self, method: str) -> list[str]:
        fields = load_graph(method).context_schema.model_fields
        allowed = fields.keys() if self.options is None else self.options & fields.keys()
        return sorted(set(allowed) - NEVER_FROM_A_REQUEST)


class Slots:
    """A counting semaphore that takes ``n`` slots at once (a batch), first come first served."""

    def __init__(self, size: int):
        self.size, self.free = size, size
        self._changed = asyncio.Condition()

    async def take(self, n: int, timeout: float) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.free >= n), timeout)
            self.free -= n

    async def give(self, n: int) -> None:
        async with self._changed:
            self.free += n
            self._changed.notify_all()


def check_question(value: Any, where: str, max_chars: int) -> None:
    if not isinstance(value, str) or not value.strip():
        raise Refusal(422, f"{where}: the question is empty or not text")
    if len(value) > max_chars:
        raise Refusal(422, f"{where}: the question has {len(value):,} characters; the limit is {max_chars:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal(422, f"{where}: the question is not valid Unicode (a lone surrogate)") from None


def check_options(method: str, config: Any, where: str, policy: Policy) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise Refusal(422, f"{where}: config must be an object")
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise Refusal(422, f"{where}: config.configurable must be an object")
    settable = policy.settable(method)
    for name in configurable:
        if name not in settable:
            raise Refusal(422, f"{where}: option '{name}' cannot be set per request; settable: {', '.join(settable)}")
    collection = configurable.get("collection")
    if collection not in (None, "") and collection not in policy.collections:
        raise Refusal(422, f"{where}: collection '{collection}' is not served; served: {', '.join(policy.collections)}")
    try:
        make_context(load_graph(method).context_schema, configurable, strict=True, owner=method)
    except AgentError as exc:
        raise Refusal(422, f"{where}: {exc}") from None


def check_clarify(start: bool, payload: Any, policy: Policy) -> None:
    """Validate a clarify body: to ``start``, a question and router options the policy allows; to resume, picks."""
    if not isinstance(payload, dict):
        raise Refusal(422, "the body must be a JSON object")
    if start:
        check_question(payload.get("question"), "question", policy.max_question_chars)
        options = payload.get("options")
        if options is not None and not isinstance(options, dict):
            raise Refusal(422, "options must be an object")
        check_options("router", {"configurable": options}, "options", policy)
        return
    picks = payload.get("picks", [])
    if not isinstance(picks, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in picks):
        raise Refusal(422, "picks: a list of interpretation numbers is required, e.g. [1, 3]")


def check_payload(method: str, action: str, payload: Any, policy: Policy) -> int:
    """Validate a LangServe request body; return how many graph runs it asks for."""
    if not isinstance(payload, dict):
        raise Refusal(422, "the body must be a JSON object")
    if action == "batch":
        inputs, configs = payload.get("inputs"), payload.get("config")
        if not isinstance(inputs, list) or not inputs:
            raise Refusal(422, "inputs: a non-empty list of {question} objects is required")
        if isinstance(configs, list) and len(configs) != len(inputs):
            raise Refusal(422, f"config: {len(configs)} configs for {len(inputs)} inputs")
        for i, item in enumerate(inputs):
            check_question(
                item.get("question") if isinstance(item, dict) else None, f"inputs[{i}]", policy.max_question_chars
            )
            config = configs[i] if isinstance(configs, list) else configs
            check_options(method, config, f"config[{i}]" if isinstance(configs, list) else "config", policy)
        return len(inputs)
    item = payload.get("input")
    check_question(item.get("question") if isinstance(item, dict) else None, "input", policy.max_question_chars)
    check_options(method, payload.get("config"), "config", policy)
    return 1


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refusal(400, "the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise Refusal(400, f"the body is not JSON ({exc.msg} at character {exc.pos})") from None


async def read_body(receive: Callable[[], Awaitable[dict]], limit: int, timeout: float) -> bytes:
    """The whole body, counted as it arrives (chunked too): 413 past ``limit`` bytes, 408 if it takes too long."""
    chunks, size = [], 0

    async def collect() -> None:
        nonlocal size
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refusal(400, "the client disconnected before sending the body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise Refusal(413, f"request body over {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return

    try:
        await asyncio.wait_for(collect(), timeout)
    except TimeoutError:
        raise Refusal(408, f"the body did not arrive within {timeout:g} s") from None
    return b"".join(chunks)


class Guard:
    """ASGI middleware applying a ``Policy`` (see the module docstring)."""

    def __init__(self, app: Any, *, policy: Policy, health: Callable[[], dict[str, Any]]):
        self.app, self.policy, self.health = app, policy, health
        self.slots = Slots(policy.max_concurrent)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            await self._handle(scope, receive, send)
        except Refusal as refusal:
            await reply(send, refusal.status, refusal.detail, refusal.headers)

    def _authorized(self, headers: dict[str, str]) -> bool:
        key = self.policy.api_key
        if not key:
            return True
        cookies = dict(part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part)
        given = headers.get(API_KEY_HEADER) or cookies.get(KEY_COOKIE) or ""
        return hmac.compare_digest(given.encode("latin-1"), key.encode("latin-1", "replace"))

    async def _handle(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        authorized = self._authorized(headers)
        if path == "/health":
            body = self.health() if authorized and self.policy.api_key else {"status": "ok"}
            return await reply(send, 200, body)
        if path == "/login":
            return await self._login(scope, send)
        if path in ("/docs", "/openapi.json"):
            return await self.app(scope, receive, send)
        if not authorized:
            raise Refusal(401, "missing or wrong X-API-Key header (browsers: open /login?key=KEY once)")
        if scope["method"] != "POST":  # schemas and playground pages run no graph
            return await self.app(scope, receive, send)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.policy.max_body_bytes:
            raise Refusal(413, f"request body over {self.policy.max_body_bytes} bytes")
        body = await read_body(receive, self.policy.max_body_bytes, self.policy.body_timeout)
        runs = self._runs(path, body)
        if runs > self.policy.max_concurrent:
            raise Refusal(413, f"a batch of {runs} questions is over this server's {self.policy.max_concurrent} slots")
        if runs:
            try:
                await self.slots.take(runs, self.policy.queue_timeout)
            except TimeoutError:
                raise Refusal(503, "all graph slots are busy; retry later", {"retry-after": "5"}) from None
        try:
            await self._run(scope, receive, body, send)
        finally:
            if runs:
                await self.slots.give(runs)

    def _runs(self, path: str, body: bytes) -> int:
        """Graph runs the request asks for (0 for routes that run none); invalid content is refused here."""
        parts = path.strip("/").split("/")
        if parts == ["clarify"] or (len(parts) == 3 and parts[0] == "clarify" and parts[2] == "resume"):
            check_clarify(len(parts) == 1, parse_json(body), self.policy)
            return 1
        if len(parts) != 2 or parts[1] not in RUN_ACTIONS:
            return 0
        method, action = parts
        try:
            load_graph(method)
        except AgentError:
            return 0  # not a graph route: the app answers 404
        return check_payload(method, action, parse_json(body), self.policy)

    async def _run(self, scope: dict, receive: Any, body: bytes, send: Any) -> None:
        sent = {"body": False, "started": False}

        async def replay() -> dict:
            if not sent["body"]:
                sent["body"] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # the body was read: what comes next is the client's disconnect

        async def tracked_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                sent["started"] = True
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, replay, tracked_send), self.policy.request_timeout)
        except TimeoutError:
            if not sent["started"]:
                await reply(send, 504, f"the run took longer than {self.policy.request_timeout:g} s and was stopped")

    async def _login(self, scope: dict, send: Any) -> None:
        """``/login?key=KEY[&next=/rag/playground/]``: set the key as an HttpOnly cookie for the browser."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        key = (query.get("key") or [""])[0]
        target = (query.get("next") or ["/rag/playground/"])[0]
        if not target.startswith("/") or target.startswith("//"):
            target = "/rag/playground/"
        if not self.policy.api_key or not hmac.compare_digest(key.encode(), self.policy.api_key.encode()):
            raise Refusal(401, "wrong key")
        cookie = f"{KEY_COOKIE}={key}; HttpOnly; SameSite=Strict; Path=/"
        await reply(send, 303, {"detail": "logged in"}, {"location": target, "set-cookie": cookie})


async def reply(send: Any, status: int, detail: str | dict[str, Any], extra: dict[str, str] | None = None) -> None:
    body = json.dumps(detail if isinstance(detail, dict) else {"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
