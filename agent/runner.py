"""``agent.run``: validate the question, pick the graph, run it with per-run options, return a ``RunResult``;
``agent.clarify`` and ``agent.resume``: the router's clarify mode on a thread a person answers later."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langgraph.types import Command

from agent.chat import CHAT_NODES
from agent.context import RunContext, make_context
from agent.errors import CollectionError, ConfigError
from agent.llm.calls import ANSWER_TAG
from agent.llm.factory import model_name, prewarm
from agent.llm.usage import merge_usage
from agent.questions import validate_question
from agent.registry import load_graph
from agent.retrieval.pipeline import search as pipeline_search
from agent.schemas import Passage, RunResult
from agent.sync import iterate_sync
from agent.threads import ClarifyResult, Thread, Threads, clarify_result, open_threads
from agent.tracing import run_config

if TYPE_CHECKING:
    from agent.eval.checkpoints import RunCheckpoint

CONTRACT = {"question", "answer", "disambiguations", "passages", "retrieved", "usage", "messages"}
INTERRUPT = "__interrupt__"  # the key of the update a run streams when it stops at an interrupt

NodeCallback = Callable[[str, dict[str, Any], float], None]
TokenCallback = Callable[[str, str], None]  # (text, node): a piece of the answer as the model writes it


def namespace_names(namespace: tuple[str, ...]) -> list[str]:
    """The subgraph nodes a streamed chunk came from (LangGraph's namespace parts are ``node:task_id``)."""
    return [part.split(":")[0] for part in namespace]


def node_path(namespace: tuple[str, ...], node: str) -> str:
    """``node``, or ``parent/node`` for a subgraph's node."""
    return "/".join([*namespace_names(namespace), node])


def output_of(graph: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The graph's declared output schema taken from its final state: what ``invoke`` returns."""
    return {k: state[k] for k in graph.output_channels if k in state}


class _Run:
    """One run's bookkeeping, shared by ``run`` and ``arun``: progress callbacks as chunks arrive, then the result."""

    def __init__(
        self,
        question: str,
        method: str,
        graph: Any,
        on_node: NodeCallback | None,
        on_token: TokenCallback | None = None,
    ):
        self.question, self.method, self.graph, self.on_node = question, method, graph, on_node
        self.on_token = on_token
        self.start = self.last = time.perf_counter()
        self.state: dict[str, Any] = {}

    @property
    def modes(self) -> list[str]:
        """The stream modes this run needs: the LLM's tokens too when someone reads the answer as it is written."""
        return ["updates", "values", "messages"] if self.on_token else ["updates", "values"]

    def feed(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> None:
        if mode == "messages":
            message, metadata = chunk
            if self.on_token and ANSWER_TAG in (metadata.get("tags") or []) and isinstance(message.content, str):
                self.on_token(message.content, metadata.get("langgraph_node", ""))
            return
        if mode == "values":
            if not namespace:
                self.state = chunk
            return
        for node, update in chunk.items():
            if not isinstance(update, dict) or node in CHAT_NODES:
                continue
            now = time.perf_counter()
            if self.on_node:
                self.on_node(node_path(namespace, node), update, now - self.last)
            self.last = now

    def result(self) -> RunResult:
        output = output_of(self.graph, self.state)
        return RunResult(
            question=self.question,
            method=self.method,
            answer=output.get("answer", ""),
            disambiguations=output.get("disambiguations", []),
            passages=output.get("passages", []),
            retrieved=output.get("retrieved"),
            usage=merge_usage(None, output.get("usage")),
            seconds=round(time.perf_counter() - self.start, 3),
            extra={k: v for k, v in output.items() if k not in CONTRACT},
        )


def _context(graph: Any, method: str, name: str | None, collection: str | None, options: dict[str, Any]) -> Any:
    values = {"llm": name or "", "collection": collection or "", **options}
    context = make_context(graph.context_schema, values, strict=True, owner=method)
    prewarm(context.llm or None)
    return context


def run(
    question: str,
    method: str = "rag",
    llm: str | BaseChatModel | None = None,
    collection: str | None = None,
    *,
    on_node: NodeCallback | None = None,
    on_token: TokenCallback | None = None,
    callbacks: Any = None,
    checkpoint: RunCheckpoint | None = None,
    **options: Any,
) -> RunResult:
    """Answer ``question`` with ``method``; ``options`` override the method's context fields (e.g. ``top_k=10``); an
    option the method does not have is a ``ConfigError`` listing the ones it has. ``passages=[...]`` (texts, or
    ``{id, title, text}`` objects) makes the method read those instead of retrieving (``InvalidPassagesError`` when
    they are empty, too many or too long).

    The result holds exactly the graph's output schema: the shared contract, and the method's own fields in ``extra``.
    ``on_node(node, update, seconds)`` is called as each node finishes (live progress, subgraph nodes included);
    ``on_token(text, node)`` gets the answer's pieces as the model writes them (a draft, then any revision; the
    result's answer is the finished one). ``callbacks`` (a caller's LangChain callbacks, e.g. a tool's) make the run
    nest under the caller's trace. ``checkpoint`` (``agent.eval.checkpoints``) keeps every step's state on a thread, or replays a stored run from one
    node on: the nodes before it are not run again, and the result's usage counts their stored calls too.
    """
    question = validate_question(question)
    graph = load_graph(method)
    inputs: Any = {"question": question}
    config: dict[str, Any] = {"callbacks": callbacks} if callbacks else {}
    if checkpoint:
        graph, inputs, config = checkpoint.start(graph, inputs, config)
    with model_name(llm) as name:
        context = _context(graph, method, name, collection, options)
        record = _Run(question, method, graph, on_node, on_token)
        for namespace, mode, chunk in _stream(
            graph, inputs, context, run_config(method, context, config), record.modes
        ):
            record.feed(namespace, mode, chunk)
    return record.result()


async def arun(
    question: str,
    method: str = "rag",
    llm: str | BaseChatModel | None = None,
    collection: str | None = None,
    *,
    on_node: NodeCallback | None = None,
    on_token: TokenCallback | None = None,
    callbacks: Any = None,
    **options: Any,
) -> RunResult:
    """``run`` for an event loop: concurrent questions with ``asyncio.gather`` leave the loop free while they run.

    The graph streams asynchronously and its LLM nodes are awaited on this loop (``agent.nodes``); retrieval nodes run
    on LangGraph's worker threads.
    """
    question = validate_question(question)
    graph = load_graph(method)
    with model_name(llm) as name:
        context = _context(graph, method, name, collection, options)
        record = _Run(question, method, graph, on_node, on_token)
        config = run_config(method, context, {"callbacks": callbacks} if callbacks else None)

        async def consume() -> None:
            async for namespace, mode, chunk in graph.astream(
                {"question": question}, config, context=context, stream_mode=record.modes, subgraphs=True
            ):
                record.feed(namespace, mode, chunk)

        await asyncio.create_task(consume(), context=contextvars.Context())  # a fresh context, as ``_stream`` says
    return record.result()


def clarify(
    question: str,
    *,
    llm: str | None = None,
    collection: str | None = None,
    on_node: NodeCallback | None = None,
    **options: Any,
) -> ClarifyResult:
    """Run the router in clarify mode on a new thread: it stops at the question's interpretations (``needs_choice``,
    for ``resume``), or answers a clear question at once. ``llm`` is a provider name, so that any process sharing the
    threads' database can resume; ``options`` are the router's context fields."""
    question = validate_question(question)
    store = open_threads()
    values = {"llm": llm or "", "collection": collection or "", **options, "clarify": True}
    context = make_context(store.graph.context_schema, values, strict=True, owner="router")
    with store.reachable():
        thread = store.start(context.model_dump(mode="json", exclude_unset=True))
        return _advance(store, thread, question, {"question": question}, on_node)


def resume(thread_id: str, picks: list[int], *, on_node: NodeCallback | None = None) -> ClarifyResult:
    """Answer the interpretations ``picks`` (numbered from 1; none: all) of a thread waiting for a choice, started by
    this process or by any other sharing the threads' database. Of concurrent resumes of one thread exactly one runs,
    the others are a ``ThreadBusyError``; a resume that fails (the LLM down) leaves the thread waiting again."""
    store = open_threads()
    with store.reachable(), store.claim(thread_id) as (thread, waiting):
        chosen = _checked_picks(picks, len(waiting.interpretations))
        return _advance(store, thread, waiting.question, Command(resume=chosen), on_node)


async def aclarify(
    question: str,
    *,
    llm: str | None = None,
    collection: str | None = None,
    on_node: NodeCallback | None = None,
    **options: Any,
) -> ClarifyResult:
    """``clarify`` for an event loop; a thread's claim and state are read synchronously, so it goes to a worker thread."""
    return await asyncio.to_thread(clarify, question, llm=llm, collection=collection, on_node=on_node, **options)


async def aresume(thread_id: str, picks: list[int], *, on_node: NodeCallback | None = None) -> ClarifyResult:
    """``resume`` for an event loop, on a worker thread like ``aclarify``."""
    return await asyncio.to_thread(resume, thread_id, picks, on_node=on_node)


def _advance(
    store: Threads, thread: Thread, question: str, payload: Any, on_node: NodeCallback | None
) -> ClarifyResult:
    """Run ``thread`` until it waits for a choice or ends; the context comes from the thread's own options, the result
    from this run's own stream (never the thread's latest state, which another run may have written)."""
    context = _context(store.graph, "router", None, None, thread.options)
    record = _Run(question, "router", store.graph, on_node)
    interrupts: tuple[Any, ...] = ()
    config = run_config("router", context, thread.config)
    for namespace, mode, chunk in _stream(store.graph, payload, context, config, record.modes):
        record.feed(namespace, mode, chunk)
        if mode == "updates" and not namespace:
            interrupts = chunk.get(INTERRUPT, interrupts)
    return clarify_result(thread.id, record.state, interrupts)


def _checked_picks(picks: list[int], count: int) -> list[int]:
    wrong = [p for p in picks if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= count]
    if wrong:
        raise ConfigError(f"pick {wrong[0]!r} is not one of the interpretations: choose numbers from 1 to {count}")
    return list(dict.fromkeys(picks))


def search(question: str, k: int = 5, collection: str | None = None, **options: Any) -> list[Passage]:
    """The ``k`` passages the default pipeline retrieves for ``question`` (what ``rag`` reads); ``options`` are
    retrieval fields (``first_stage``, ``reranker``, ``rerank_depth``)."""
    question = validate_question(question)
    if not 1 <= k <= 1000:
        raise ConfigError(f"k must be between 1 and 1000, not {k}")
    context = make_context(RunContext, {"collection": collection or "", **options}, strict=True, owner="search")
    return pipeline_search(context.store(), question, k, context.retrieval())


def lookup(ids: list[str], collection: str | None = None) -> list[Passage]:
    """The stored passages with these ids (the ones a result cites), in the order given; an id the collection does
    not hold is a ``CollectionError`` naming it."""
    ids = [i.strip() for i in ids if i.strip()]
    if not ids:
        raise ConfigError("give at least one passage id, e.g. one a result cites")
    context = make_context(RunContext, {"collection": collection or ""}, strict=True, owner="lookup")
    store = context.store()
    found = store.passages(ids)
    held = {p.id for p in found}
    missing = [i for i in ids if i not in held]
    if missing:
        raise CollectionError(f"collection '{store.name}' holds no passage with id {', '.join(map(repr, missing))}")
    return found


def _stream(
    graph: Any, inputs: Any, context: Any, config: dict | None, modes: list[str]
) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """(namespace, mode, chunk) of ``modes``: node updates as they finish, the output values, the LLM's tokens; the
    graph streams on the background loop (``agent.sync``) while this thread consumes.

    The run gets a fresh context: called from inside another graph (a tool in an agent), LangGraph would otherwise
    take it for a subgraph of that run and send its updates to the parent's stream instead of ours.
    """
    chunks = graph.astream(inputs, config, context=context, stream_mode=modes, subgraphs=True)
    return iterate_sync(chunks, contextvars.Context())
