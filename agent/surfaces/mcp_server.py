"""``ambigqa mcp``: every method as an MCP tool (``ask_diva``, ...), the router's clarify threads as ``clarify``
and ``resume``, and ``read_passages`` for the passages a result cites, over stdio or streamable HTTP on loopback.

The operator fixes the LLM and the collection when starting the server; a tool call gives a ``question`` and, where
useful, a few of the method's options. A result is the answer as text plus structured content: the interpretations
with the ids of the passages that ground them, the route or grade where the method has one, and the run's usage.

Like ``serve``: over HTTP every request wants the operator's key (``KeyCheck``), and a tool that runs a graph takes
one of ``max_concurrent`` slots, or answers a tool error when none frees within ``queue_timeout`` (``Runs``).
"""

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from agent.errors import AgentError
from agent.registry import METHODS, describe, load_graph
from agent.settings import get_settings
from agent.surfaces.guard import Slots
from agent.surfaces.keys import key_matches

if TYPE_CHECKING:
    from agent.threads import ClarifyResult

STATE_FIELDS = ("route", "grade", "stop_reason", "relaxed_query", "rejected_ids", "reasoning")  # worth returning
OWN_LISTS = ("hops", "answers")  # SUNAR's hops, MADAM's answers with their documents
NEVER_FROM_A_CALL = frozenset({"llm", "collection"})
CLARIFY = (
    "Ask the user which interpretations of an ambiguous question they mean. Where the client supports elicitation the "
    "user picks them in a form and the answer comes back; otherwise (or when the user declines the form) this returns "
    "the interpretations and a thread_id (or, for a clear question, the answer): then call resume with the numbers "
    "the user picks."
)
RESUME = "Answer the interpretations the user picked (numbers from clarify's list; none: all) on a clarify thread."
READ = "Read the collection's passages with these ids whole: the ones an answer's interpretations cite."


def result_content(result: Any) -> dict[str, Any]:
    """The structured content of a tool result."""
    content: dict[str, Any] = {
        "answer": result.answer,
        "interpretations": [
            {"question": d.question, "answer": d.answer, "passage_ids": d.passage_ids} for d in result.disambiguations
        ],
        "passages": [{"id": p.id, "title": p.title} for p in result.passages],
        "usage": result.usage.total.model_dump(),
    }
    content |= {k: result.extra[k] for k in STATE_FIELDS if k in result.extra}
    content |= {k: [item.model_dump() for item in result.extra[k]] for k in OWN_LISTS if k in result.extra}
    return content


def clarify_text(result: "ClarifyResult") -> str:
    """A clarify result as text: the interpretations to pick from, or the answer."""
    if result.status == "answered":
        return result.answer or ""
    options = "\n".join(f"{i}. {option}" for i, option in enumerate(result.interpretations, 1))
    return (
        f"The question can mean:\n{options}\nCall resume with thread_id {result.thread_id} and the numbers to answer."
    )


class Runs:
    """At most ``size`` graph runs at once over all calls and sessions; a call that gets no slot within ``timeout``
    seconds is refused (a tool error) rather than queued for good."""

    def __init__(self, size: int = 4, timeout: float = 30.0):
        self.size, self.timeout = size, timeout
        self._slots = Slots(size)  # serve's slots: a free one is taken without waiting, even at timeout 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        try:
            await self._slots.take(1, self.timeout)
        except TimeoutError:
            raise AgentError(
                f"the server is busy: all {self.size} graph runs are in use (--max-concurrent); retry later"
            ) from None
        try:
            yield
        finally:
            await self._slots.give(1)


def build_server(
    llm: str | None = None, collection: str | None = None, methods: tuple[str, ...] = METHODS, runs: Runs | None = None
) -> Any:
    """An ``MCPServer`` with one tool per method (and ``clarify``/``resume`` with the router), bound to ``llm`` and
    ``collection``; the graph-running tools share ``runs``' slots."""
    from mcp.server.mcpserver import MCPServer

    runs = runs or Runs()
    server = MCPServer(
        name="ambigqa",
        instructions="Tools that answer possibly ambiguous questions from a document collection, covering every "
        "interpretation. Prefer ask_diva for clearly ambiguous questions, ask_rag for quick answers.",
    )
    for method in methods:
        server.add_tool(ask_tool(method, llm, collection, runs), name=f"ask_{method}", description=describe(method))
    server.add_tool(read_tool(collection), name="read_passages", description=READ)
    if "router" in methods:
        clarify, resume = clarify_tools(llm, collection, runs)
        server.add_tool(clarify, name="clarify", description=CLARIFY)
        server.add_tool(resume, name="resume", description=RESUME)
    return server


def question_type() -> Any:
    """A tool's ``question`` argument, with the settings' length limit."""
    max_chars = get_settings().max_question_chars
    return Annotated[str, Field(min_length=1, max_length=max_chars, description="the question, as the user asked it")]


def ask_tool(method: str, llm: str | None, collection: str | None, runs: Runs) -> Any:
    """``ask_<method>``: a question and the method's options a call may set; the answer with its structured content."""
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult, TextContent

    from agent.context import make_context
    from agent.runner import arun

    settable = sorted(set(load_graph(method).context_schema.model_fields) - NEVER_FROM_A_CALL - {"passages"})

    async def ask(
        question: question_type(),  # type: ignore[valid-type]
        options: Annotated[
            dict[str, Any] | None,
            Field(description=f"optional method options, e.g. {{'top_k': 5}}; settable: {', '.join(settable)}"),
        ] = None,
        passages: Annotated[
            list[str | dict[str, Any]] | None,
            Field(description="optional passages to read instead of retrieving: texts or {id, title, text} objects"),
        ] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        options = (options or {}) | ({"passages": passages} if passages is not None else {})
        progress = Progress(ctx)
        try:
            refuse(set(options) & NEVER_FROM_A_CALL, settable)
            make_context(load_graph(method).context_schema, options, strict=True, owner=method)
            async with runs.slot():
                result = await arun(
                    question, method=method, llm=llm, collection=collection, on_node=progress.node, **options
                )
        except AgentError as exc:
            return failed(exc)
        finally:
            await progress.sent()
        return CallToolResult(
            content=[TextContent(type="text", text=result.answer)], structured_content=result_content(result)
        )

    return ask


class Progress:
    """A tool call's progress notifications, one per finished node ("rag_extract done, 1 LLM call"), in order; sent
    only to a client that asked for them (its call carries a progress token)."""

    def __init__(self, ctx: Any):
        self.ctx, self.done = ctx, 0
        self.sending: list[asyncio.Task[None]] = []

    def node(self, node: str, update: dict[str, Any], seconds: float) -> None:
        if self.ctx is None:
            return
        self.done += 1
        message = f"{node} done in {seconds:.1f} s"
        self.sending.append(asyncio.get_running_loop().create_task(self.ctx.report_progress(self.done, None, message)))

    async def sent(self) -> None:
        """Wait until every notification is out (before the result, so a client sees them first)."""
        await asyncio.gather(*self.sending, return_exceptions=True)


def read_tool(collection: str | None) -> Any:
    """``read_passages``: ids in, the stored passages out (text, and ``{id, title, text}`` as structured content)."""
    from mcp_types import CallToolResult, TextContent

    from agent.runner import lookup

    async def read_passages(
        ids: Annotated[list[str], Field(min_length=1, max_length=100, description="passage ids, as a result cites")],
    ) -> CallToolResult:
        try:
            found = lookup(ids, collection=collection)
        except AgentError as exc:
            return failed(exc)
        text = "\n\n".join(f"[{p.id}] {p.full_text}" for p in found)
        content = {"passages": [p.model_dump(include={"id", "title", "text"}) for p in found]}
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=content)

    return read_passages


def clarify_tools(llm: str | None, collection: str | None, runs: Runs) -> tuple[Any, Any]:
    """``clarify`` starts a router thread that stops at the interpretations, and asks the user to pick through MCP
    elicitation where the client supports it; ``resume`` answers the ones picked (the fallback)."""
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult, InputRequiredResult

    from agent.runner import aclarify, aresume
    from agent.surfaces.mcp_forms import PicksForm

    router_options = sorted(set(load_graph("router").context_schema.model_fields) - NEVER_FROM_A_CALL - {"clarify"})

    async def clarify(
        question: question_type(),  # type: ignore[valid-type]
        options: Annotated[
            dict[str, Any] | None, Field(description=f"optional router options; settable: {', '.join(router_options)}")
        ] = None,
        ctx: Context | None = None,
    ) -> CallToolResult | InputRequiredResult:
        options = options or {}
        try:
            refuse(set(options) - set(router_options), router_options)
            form = PicksForm.answered(ctx)
            if form is None:  # a first call: run the router to its interpretations
                async with runs.slot():
                    waiting = await aclarify(question, llm=llm, collection=collection, **options)
                form = PicksForm(waiting)
                if not form.can_ask(ctx):
                    return clarified(waiting)
                if form.asked_by_retry(ctx):  # MCP 2026-07-28: the client asks the user and calls again
                    return form.input_required()
                form.reply = await form.ask_now(ctx)  # earlier versions: a request to the client, mid-call
            picks = form.picks()
            if picks is None:  # declined or cancelled: the thread waits for resume
                return clarified(form.waiting)
            async with runs.slot():
                return clarified(await aresume(form.waiting.thread_id, picks))
        except AgentError as exc:
            return failed(exc)

    async def resume(
        thread_id: Annotated[str, Field(description="the thread_id clarify returned")],
        picks: Annotated[
            list[int] | None, Field(description="the interpretations to answer, numbered from 1; none: all")
        ] = None,
    ) -> CallToolResult:
        try:
            async with runs.slot():
                return clarified(await aresume(thread_id, picks or []))
        except AgentError as exc:
            return failed(exc)

    return clarify, resume


def refuse(refused: set[str], settable: list[str]) -> None:
    """A call that sets options outside ``settable`` is an error naming them and the ones it may set."""
    if refused:
        raise AgentError(f"{', '.join(sorted(refused))} cannot be set per call; settable: {', '.join(settable)}")


def clarified(result: "ClarifyResult") -> Any:
    """A clarify thread's state: the choice to make (or the answer) as text, the whole result as structured content."""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(type="text", text=clarify_text(result))],
        structured_content=result.model_dump(mode="json", exclude_none=True),
    )


def failed(exc: Exception) -> Any:
    """An error the calling model reads as the tool's reply."""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class KeyCheck:
    """ASGI middleware: an HTTP request without the key (``X-API-Key: KEY``, or ``Authorization: Bearer KEY`` as MCP
    clients send it; the raw header bytes against the key's UTF-8, in constant time) is a 401 the MCP app never
    sees."""

    def __init__(self, app: ASGIApp, key: str):
        self.app, self.key = app, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not any(key_matches(given, self.key) for given in offered_keys(scope)):
            body = json.dumps({"detail": "missing or wrong key: send X-API-Key: KEY or Authorization: Bearer KEY"})
            headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="ambigqa"')]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


def offered_keys(scope: Scope) -> list[bytes]:
    """The keys a request offers, as raw bytes: its ``X-API-Key`` headers and the tokens of ``Bearer`` ones."""
    offered = []
    for name, value in scope.get("headers", []):
        if name == b"x-api-key":
            offered.append(value)
        elif name == b"authorization" and value[:7].lower() == b"bearer ":
            offered.append(value[7:].strip())
    return offered


def http_app(server: Any, api_key: str | None) -> ASGIApp:
    """The server's streamable HTTP app at ``/mcp`` for 127.0.0.1 (the SDK's Host/Origin check on), behind the key."""
    app = server.streamable_http_app(host="127.0.0.1")
    return KeyCheck(app, api_key) if api_key else app
