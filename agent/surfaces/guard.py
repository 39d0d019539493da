"""The server's front door: pure ASGI middleware that classifies every request before anything of the app runs.

Each request's path and HTTP method are looked up in ``routes``; what no route names is a 404 (a 405 for a known
path's other methods), so nothing of the app is reachable unclassified. Then, in order: the ``Host`` and ``Origin``
headers against the operator's allow-list (loopback by default), the API key (``X-API-Key`` header, or the cookie a
browser gets from the ``/login`` form; compared as UTF-8 bytes in constant time), and for a route that runs work
(``RUN``): a JSON content type, the whole body read within ``body_timeout`` and counted as it arrives (chunked uploads
too), its content (JSON, each question, each per-request option and collection against the operator's allow-lists),
and only then a slot per question (``/batch`` takes one per item), with a deadline on the run. Every refusal is a JSON
``{"detail": ...}`` with a 4xx/5xx status and one line; the connection stays usable.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, Field

from agent.context import make_context
from agent.errors import AgentError
from agent.registry import load_graph
from agent.surfaces.keys import key_matches, login_token

API_KEY_HEADER = b"x-api-key"
KEY_COOKIE = "ambigqa_login"
RUN_ACTIONS = ("invoke", "batch", "stream", "stream_log", "stream_events")
NEVER_FROM_A_REQUEST = frozenset({"llm"})
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
SAFE_NEXT = re.compile(r"/[A-Za-z0-9_\-./]*")  # where /login may send a browser: a path of this server, nothing else
MAX_PASSAGE_IDS = 100


class Refusal(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


class Kind(Enum):
    """What a route does, and so which checks it passes."""

    HEALTH = "health"  # no key: status only; with the key: the details
    LOGIN = "login"  # the form that gives a browser its cookie
    PAGE = "page"  # key; reads only (docs, schemas, the playground): runs no graph
    RUN = "run"  # key, JSON, body, content, slot, deadline


@dataclass(frozen=True)
class Route:
    pattern: re.Pattern[str]
    methods: frozenset[str]
    kind: Kind


def routes(methods: tuple[str, ...]) -> list[Route]:
    """Every route the server answers, by method; LangServe's config-hash routes (``/METHOD/c/HASH/...``) are not
    among them (``create_app`` does not add them either)."""
    names = "|".join(re.escape(m) for m in methods)
    get = frozenset({"GET", "HEAD"})
    return [
        Route(re.compile(r"/health"), get, Kind.HEALTH),
        Route(re.compile(r"/login"), frozenset({"GET", "POST"}), Kind.LOGIN),
        Route(re.compile(r"/docs|/docs/oauth2-redirect|/redoc|/openapi\.json"), get, Kind.PAGE),
        Route(re.compile(rf"/(?:{names})/(?:input_schema|output_schema|config_schema)"), get, Kind.PAGE),
        Route(re.compile(rf"/(?:{names})/playground(?:/.*)?"), get, Kind.PAGE),
        Route(re.compile(rf"/(?:{names})/(?:{'|'.join(RUN_ACTIONS)})"), frozenset({"POST"}), Kind.RUN),
        Route(re.compile(r"/clarify(?:/[^/]+/resume)?"), frozenset({"POST"}), Kind.RUN),
        Route(re.compile(r"/passages"), frozenset({"POST"}), Kind.RUN),
    ]


class Policy(BaseModel):
    """What the operator allows; nothing here comes from a request."""

    api_key: str | None = None
    collections: tuple[str, ...] = Field(description="collections a request may name; the first is the default")
    options: frozenset[str] | None = Field(default=None, description="settable context fields; None: all but llm")
    allowed_hosts: tuple[str, ...] = Field(default=LOOPBACK_HOSTS, description="Host/Origin names served; '*': any")
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

    def check_collection(self, collection: Any, where: str) -> None:
        if collection not in (None, "") and collection not in self.collections:
            shown = collection if isinstance(collection, str) else json.dumps(collection)
            raise Refusal(422, f"{where}: collection {shown!r} is not served; served: {', '.join(self.collections)}")


class Slots:
    """A counting semaphore that takes ``n`` slots at once (a batch), first come first served."""

    def __init__(self, size: int):
        self.size, self.free = size, size
        self._changed = asyncio.Condition()

    async def take(self, n: int, timeout: float) -> None:
        """Take ``n`` slots, waiting at most ``timeout`` seconds (0: only if free now); else ``TimeoutError``."""
        async with self._changed:
            if self.free < n:
                await asyncio.wait_for(self._changed.wait_for(lambda: self.free >= n), timeout)
            self.free -= n

    async def give(self, n: int) -> None:
        async with self._changed:
            self.free += n
            self._changed.notify_all()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The host of a ``Host`` header or an ``Origin``, without port or brackets, lower case."""
    netloc = urlsplit(value).netloc if "://" in value else value
    parsed = urlsplit(f"//{netloc}")
    try:
        return (parsed.hostname or "").lower()
    except ValueError:
        return ""


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
    policy.check_collection(configurable.get("collection"), where)
    try:
        make_context(load_graph(method).context_schema, configurable, strict=True, owner=method)
    except AgentError as exc:
        raise Refusal(422, f"{where}: {str(exc).splitlines()[0]}") from None


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


def check_passages(payload: Any, policy: Policy) -> None:
    """Validate a ``/passages`` body: 1–100 ids as text, and a served collection."""
    if not isinstance(payload, dict):
        raise Refusal(422, "the body must be a JSON object")
    ids = payload.get("ids")
    if not isinstance(ids, list) or not 0 < len(ids) <= MAX_PASSAGE_IDS or not all(isinstance(i, str) for i in ids):
        raise Refusal(422, f"ids: a list of 1 to {MAX_PASSAGE_IDS} passage ids is required")
    policy.check_collection(payload.get("collection"), "collection")


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
    """The body as JSON; not UTF-8, not JSON, nested too deep or a number too long to convert is a 400."""
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refusal(400, "the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise Refusal(400, f"the body is not JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise Refusal(400, "the body's JSON is nested too deep") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise Refusal(400, f"the body's JSON holds a number that is too long ({exc})") from None


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


def media_type(headers: dict[bytes, bytes]) -> str:
    return headers.get(b"content-type", b"").split(b";")[0].strip().lower().decode("latin-1")


class Guard:
    """ASGI middleware applying a ``Policy`` to the ``routes`` of ``methods`` (see the module docstring).
    ``health`` answers whether the store and the clarify threads can be used: (ok, details)."""

    def __init__(
        self,
        app: Any,
        *,
        policy: Policy,
        methods: tuple[str, ...],
        health: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]],
    ):
        self.app, self.policy, self.health = app, policy, health
        self.routes = routes(methods)
        self.slots = Slots(policy.max_concurrent)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # websockets: no route takes them
            return await send({"type": "websocket.close", "code": 1008})
        try:
            await self._handle(scope, receive, send)
        except Refusal as refusal:
            await reply(send, refusal.status, refusal.detail, refusal.headers)

    def classify(self, method: str, path: str) -> Kind:
        """The kind of route ``method path`` is; a path no route names is a 404, another method of one a 405."""
        matches = [route for route in self.routes if route.pattern.fullmatch(path)]
        if not matches:
            raise Refusal(404, f"no route {path}")
        for route in matches:
            if method in route.methods:
                return route.kind
        allowed = sorted(set().union(*(route.methods for route in matches)))
        raise Refusal(405, f"{path} takes {', '.join(allowed)}", {"allow": ", ".join(allowed)})

    def _check_hosts(self, headers: dict[bytes, bytes]) -> None:
        allowed = self.policy.allowed_hosts
        if "*" in allowed:
            return
        if host_name(headers.get(b"host", b"").decode("latin-1")) not in allowed:
            raise Refusal(400, "the Host header names no host this server serves (serve --allowed-hosts)")
        origin = headers.get(b"origin")  # sent by browsers; "null" from sandboxed pages and files
        if origin is not None and host_name(origin.decode("latin-1")) not in allowed:
            raise Refusal(403, "requests from another site's pages are refused (serve --allowed-hosts)")

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        key = self.policy.api_key
        if not key:
            return True
        if b"x-api-key" in headers:
            return key_matches(headers[API_KEY_HEADER], key)
        cookie = cookie_value(headers.get(b"cookie", b""), KEY_COOKIE)
        return cookie is not None and key_matches(cookie, login_token(key))

    async def _handle(self, scope: dict, receive: Any, send: Any) -> None:
        path, method = scope["path"], scope["method"]
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(name.lower(), value)
        self._check_hosts(headers)
        kind = self.classify(method, path)
        authorized = self._authorized(headers)
        if kind is Kind.HEALTH:
            ok, details = await self.health()
            slots = {"busy": self.slots.size - self.slots.free, "size": self.slots.size}
            report = (
                {**details, "slots": slots} if authorized and self.policy.api_key else {"status": details["status"]}
            )
            return await reply(send, 200 if ok else 503, report)
        if kind is Kind.LOGIN:
            return await self._login(scope, receive, send, headers)
        if not authorized:
            raise Refusal(401, "missing or wrong X-API-Key header (browsers: log in once at /login)")
        if kind is Kind.PAGE:
            return await self.app(scope, receive, send)
        if media_type(headers) != "application/json":
            raise Refusal(415, "the body must be JSON: send Content-Type: application/json")
        body = await self._body(headers, receive)
        runs = self._runs(path, body)
        if runs > self.policy.max_concurrent:
            raise Refusal(413, f"a batch of {runs} questions is over this server's {self.policy.max_concurrent} slots")
        try:
            await self.slots.take(runs, self.policy.queue_timeout)
        except TimeoutError:
            raise Refusal(503, "all graph slots are busy; retry later", {"retry-after": "5"}) from None
        try:
            await self._run(scope, receive, body, send)
        finally:
            await self.slots.give(runs)

    async def _body(self, headers: dict[bytes, bytes], receive: Any) -> bytes:
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.policy.max_body_bytes:
            raise Refusal(413, f"request body over {self.policy.max_body_bytes} bytes")
        return await read_body(receive, self.policy.max_body_bytes, self.policy.body_timeout)

    def _runs(self, path: str, body: bytes) -> int:
        """Slots the request takes (a question each; one for a clarify step or a passage lookup), its content
        checked first."""
        parts = path.strip("/").split("/")
        payload = parse_json(body)
        if parts[0] == "clarify":
            check_clarify(len(parts) == 1, payload, self.policy)
            return 1
        if parts == ["passages"]:
            check_passages(payload, self.policy)
            return 1
        method, action = parts
        return check_payload(method, action, payload, self.policy)

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

    async def _login(self, scope: dict, receive: Any, send: Any, headers: dict[bytes, bytes]) -> None:
        """``GET /login``: a form; ``POST /login`` (form fields ``key``, ``next``): the key checked, an HttpOnly cookie
        derived from it set, and a redirect to ``next`` when that is a plain path of this server."""
        if not self.policy.api_key:
            raise Refusal(404, "this server has no API key: nothing to log in to")
        if scope["method"] == "GET":
            target = safe_next(parse_qs(scope.get("query_string", b"").decode("latin-1")).get("next", [""])[0])
            return await reply_html(send, 200, login_form(target))
        if media_type(headers) != "application/x-www-form-urlencoded":
            raise Refusal(415, "log in with the form: Content-Type: application/x-www-form-urlencoded")
        form = (await self._body(headers, receive)).decode("latin-1")
        fields = parse_qs(form, keep_blank_values=True, encoding="latin-1")  # a character a byte: the bytes as sent
        key = (fields.get("key") or [""])[0].encode("latin-1")
        if not key_matches(key, self.policy.api_key):
            raise Refusal(401, "wrong key")
        cookie = f"{KEY_COOKIE}={login_token(self.policy.api_key)}; HttpOnly; SameSite=Strict; Path=/"
        target = safe_next((fields.get("next") or [""])[0])
        await reply(send, 303, {"detail": "logged in"}, {"location": target, "set-cookie": cookie})


def cookie_value(header: bytes, name: str) -> bytes | None:
    for part in header.split(b";"):
        key, sep, value = part.strip().partition(b"=")
        if sep and key == name.encode():
            return value
    return None


def safe_next(target: str) -> str:
    """``target`` when it is a plain path of this server (no scheme, host, backslash or control character)."""
    return target if SAFE_NEXT.fullmatch(target) and not target.startswith("//") else "/rag/playground/"


def login_form(target: str) -> str:
    return (
        "<!doctype html><title>ambigqa: log in</title><form method=post action=/login>"
        f'<input type=hidden name=next value="{html.escape(target)}">'
        "<label>API key <input type=password name=key autofocus></label> <button>Log in</button></form>"
    )


async def reply(send: Any, status: int, detail: str | dict[str, Any], extra: dict[str, str] | None = None) -> None:
    body = json.dumps(detail if isinstance(detail, dict) else {"detail": detail}).encode()
    await _send(send, status, body, b"application/json", extra)


async def reply_html(send: Any, status: int, page: str) -> None:
    await _send(send, status, page.encode(), b"text/html; charset=utf-8", None)


async def _send(send: Any, status: int, body: bytes, content_type: bytes, extra: dict[str, str] | None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
