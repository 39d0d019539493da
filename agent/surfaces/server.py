"""The LangServe app: a route per graph (invoke, batch, stream, schemas), the clarify threads (``POST /clarify``,
``POST /clarify/{thread_id}/resume``), ``POST /passages`` (cited ids → passages), /health and /login, behind
``guard.Guard``.

The operator fixes the LLM (settings) and the collections a request may name (``collections``); per-request options
are the methods' context fields the policy allows, never the LLM. The guard checks key, body and options before a
request may take a graph slot (see ``agent/surfaces/guard.py``); errors from a run map to 4xx/5xx with one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableConfig
from pydantic import BaseModel, Field, StringConstraints

from agent.chat import CHAT_NODES
from agent.context import make_context
from agent.errors import (
    AgentError,
    CollectionError,
    ConfigError,
    InvalidQuestionError,
    LLMError,
    LLMUnavailableError,
    StoreError,
    ThreadBusyError,
    UnknownThreadError,
)
from agent.registry import METHODS, load_graph
from agent.runner import aclarify, aresume, namespace_names, output_of
from agent.settings import Settings, get_settings, use_settings
from agent.surfaces.guard import LOOPBACK_HOSTS, NEVER_FROM_A_REQUEST, Guard, Policy
from agent.sync import iterate_sync, run_sync
from agent.threads import ClarifyResult
from agent.tracing import run_config


def question_type(max_chars: int) -> type[BaseModel]:
    class Ask(BaseModel):
        question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_chars)] = Field(
            description="the (possibly ambiguous) question"
        )

    return Ask


HEALTH_TIMEOUT_S = 5.0


class ClarifyRequest(BaseModel):
    question: str = Field(description="the (possibly ambiguous) question")
    options: dict[str, Any] = Field(default_factory=dict, description="router options, e.g. {'max_interpretations': 4}")


class PassagesRequest(BaseModel):
    ids: list[str] = Field(min_length=1, max_length=100, description="passage ids, as a result cites them")
    collection: str | None = Field(default=None, description="a served collection (default: the first)")


class ResumeRequest(BaseModel):
    picks: list[int] = Field(default_factory=list, description="the interpretations to answer, from 1; none: all")


class GraphRunnable(Runnable):
    """A compiled graph for LangServe: invoke returns its output schema; stream yields node updates as they happen
    (``{node, namespace, update}``), then that output."""

    def __init__(self, graph: Any, input_type: type[BaseModel], settable: list[str], collections: tuple[str, ...]):
        self.graph = graph
        self.name: str = graph.get_name()
        self._input_type = input_type
        self._settable = settable
        self._collections = collections

    @property
    def InputType(self) -> type[BaseModel]:  # noqa: N802 (LangChain's name)
        return self._input_type

    @property
    def OutputType(self) -> Any:  # noqa: N802
        return self.graph.get_output_jsonschema()

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self._input_type

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.graph.get_output_schema(config)

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The context fields the operator lets a request set as ``config.configurable`` (never the LLM)."""
        fields = self.graph.context_schema.model_fields
        return [
            ConfigurableFieldSpec(
                id=name, annotation=fields[name].annotation, default=fields[name].default,
                description=fields[name].description,
            )
            for name in self._settable
        ]  # fmt: skip

    def _context(self, config: RunnableConfig | None) -> Any:
        configurable = (config or {}).get("configurable", {})
        values = {k: v for k, v in configurable.items() if k in self._settable and k not in NEVER_FROM_A_REQUEST}
        values["collection"] = served_collection(values.get("collection"), self._collections)
        return make_context(self.graph.context_schema, values, strict=True, owner=self.name)

    def _run(self, config: RunnableConfig | None) -> dict[str, Any]:
        """The run's context, and its config named and tagged for tracers (``agent.tracing``)."""
        context = self._context(config)
        return {"config": run_config(self.name, context, dict(config or {})), "context": context}

    def invoke(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return run_sync(self.ainvoke(input, config))

    async def ainvoke(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return await self.graph.ainvoke(input, **self._run(config))

    def stream(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[dict]:
        return iterate_sync(self.astream(input, config))

    async def astream(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[dict]:
        state: dict[str, Any] = {}
        modes = ["updates", "values"]
        async for namespace, mode, chunk in self.graph.astream(
            input, **self._run(config), stream_mode=modes, subgraphs=True
        ):
            if mode == "updates":
                for event in _events(namespace, chunk):
                    yield event
            elif not namespace:
                state = chunk
        yield output_of(self.graph, state)  # last, so LangServe's playground shows the output, not one node's update


def _events(namespace: tuple[str, ...], chunk: dict) -> Iterator[dict]:
    for node, update in chunk.items():
        if node not in CHAT_NODES:
            yield {"node": node, "namespace": namespace_names(namespace), "update": update}


def served_collection(name: Any, collections: tuple[str, ...]) -> str:
    """``name`` if the operator serves it, the first served collection if none is named; else a ``ConfigError``.
    Checked again where a run's context is built, whatever route or config brought the name."""
    if name in (None, ""):
        return collections[0]
    if name not in collections:
        raise ConfigError(f"collection {name!r} is not served; served: {', '.join(collections)}")
    return name


STATUS = [  # most specific first
    (InvalidQuestionError, 422), (ConfigError, 422), (CollectionError, 404), (UnknownThreadError, 404), (ThreadBusyError, 409), (StoreError, 503),
    (LLMUnavailableError, 503), (LLMError, 502), (AgentError, 500),
]  # fmt: skip


def create_app(
    settings: Settings | None = None,
    *,
    api_key: str | None = None,
    max_concurrent: int = 4,
    queue_timeout: float = 30.0,
    max_body_bytes: int = 64_000,
    body_timeout: float = 10.0,
    request_timeout: float = 600.0,
    collections: tuple[str, ...] | None = None,
    options: frozenset[str] | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    methods: tuple[str, ...] = METHODS,
) -> Any:
    """Build the FastAPI app for ``settings`` (default: the environment's, ``AMBIGQA_*``), which fix the LLM and the
    store; ``collections`` default to the one the settings name, ``options`` to every context field but the LLM,
    ``allowed_hosts`` (the Host and Origin names served) to loopback."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from langserve import add_routes

    settings = use_settings(settings) if settings else get_settings()  # the runs below the app read get_settings()
    collections = collections or (settings.collection,)
    policy = Policy(
        api_key=api_key, collections=collections, options=options, allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout, max_concurrent=max_concurrent, queue_timeout=queue_timeout,
        request_timeout=request_timeout, max_question_chars=settings.max_question_chars,
    )  # fmt: skip
    app = FastAPI(title="ambigqa", description="LangGraph agents for ambiguous questions", version="0.1.0")
    ask = question_type(settings.max_question_chars)
    for method in methods:
        runnable = GraphRunnable(load_graph(method), ask, policy.settable(method), collections)
        # no config-hash routes (/METHOD/c/HASH/...: a config in the URL, around the guard's body checks) and no
        # LangSmith feedback route (it writes to a tracing project, not ours to expose)
        add_routes(
            app, runnable, path=f"/{method}", config_keys=("configurable",),
            disabled_endpoints=["config_hashes", "token_feedback"],  # type: ignore[list-item]  # EndpointName omits it
        )  # fmt: skip
    _add_clarify_routes(app, collections)
    _add_passages_route(app, collections)

    @app.exception_handler(AgentError)
    async def agent_error(_: Request, exc: AgentError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        return JSONResponse({"detail": str(exc).splitlines()[0]}, status_code=status)

    async def health() -> tuple[bool, dict[str, Any]]:
        store, threads = await asyncio.gather(_probe(_store_state, collections), _probe(_threads_state))
        ok = "down" not in (store["state"], threads["state"])
        return ok, {
            "status": "ok" if ok else "down", "methods": list(methods), "llm": settings.llm,
            "collections": list(collections), "store": store, "clarify_threads": threads,
        }  # fmt: skip

    return Guard(app, policy=policy, methods=methods, health=health)


async def _probe(check: Any, *args: Any) -> dict[str, Any]:
    """``check(*args)`` on a worker thread within ``HEALTH_TIMEOUT_S``: its state, or down with one line why."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(check, *args), HEALTH_TIMEOUT_S)
    except TimeoutError:
        return {"state": "down", "detail": f"no answer within {HEALTH_TIMEOUT_S:g} s"}
    except Exception as exc:  # noqa: BLE001 (a health probe reports every failure, whatever its kind)
        return {"state": "down", "detail": (str(exc).strip() or type(exc).__name__).splitlines()[0]}


def _store_state(collections: tuple[str, ...]) -> dict[str, Any]:
    """The store reachable, and which served collections it lacks (a missing one is a 404 on its runs, not down)."""
    from agent.retrieval.collections import DEMO_COLLECTION, list_collections

    present = set(list_collections())
    missing = [name for name in collections if name not in present and name != DEMO_COLLECTION]
    return {"state": "ok", "missing_collections": missing}


def _threads_state() -> dict[str, Any]:
    from agent.threads import open_threads

    open_threads().ping()
    return {"state": "ok"}


def _add_passages_route(app: Any, collections: tuple[str, ...]) -> None:
    """``POST /passages``: the stored passages with the ids a result cites, whole; no LLM, no graph slot."""
    from agent.runner import lookup
    from agent.schemas import Passage

    @app.post("/passages", response_model=list[Passage], response_model_exclude={"__all__": {"score"}})
    def passages(request: PassagesRequest) -> list[Passage]:
        """The passages with these ids, in the order given; an id the collection lacks is a 404 naming it."""
        return lookup(request.ids, collection=served_collection(request.collection, collections))


def _add_clarify_routes(app: Any, collections: tuple[str, ...]) -> None:
    """``POST /clarify`` starts a router thread; ``POST /clarify/{thread_id}/resume`` answers its picks."""

    @app.post("/clarify", response_model=ClarifyResult, response_model_exclude_none=True)
    async def clarify(request: ClarifyRequest) -> ClarifyResult:
        """Start a clarify thread (the router): the interpretations to pick from, or the answer to a clear question."""
        options = dict(request.options)
        collection = served_collection(options.pop("collection", None), collections)
        return await aclarify(request.question, collection=collection, **options)

    @app.post("/clarify/{thread_id}/resume", response_model=ClarifyResult, response_model_exclude_none=True)
    async def resume(thread_id: str, request: ResumeRequest) -> ClarifyResult:
        """Answer the picked interpretations of a waiting thread, started on this server or any sharing its database."""
        return await aresume(thread_id, request.picks)
