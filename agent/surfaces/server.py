"""The LangServe app: a route per graph (invoke, batch, stream, schemas), the clarify threads (``POST /clarify``,
``POST /clarify/{thread_id}/resume``), ``POST /passages`` (cited ids → passages), /health and /login, behind
``guard.Guard``.

The operator fixes the LLM (settings) and the collections a request may name (``collections``); per-request options
are the methods' context fields the policy allows, never the LLM. The guard checks key, body and options before a
request may take a graph slot (see ``agent/surfaces/guard.py``); errors from a run map to 4xx/5xx with one line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableConfig
from pydantic import BaseModel, Field, StringConstraints

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
from agent.surfaces.guard import NEVER_FROM_A_REQUEST, Guard, Policy
from agent.threads import ClarifyResult


def question_type(max_chars: int) -> type[BaseModel]:
    class Ask(BaseModel):
        question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_chars)] = Field(
            description="the (possibly ambiguous) question"
        )

    return Ask


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

    def __init__(self, graph: Any, input_type: type[BaseModel], settable: list[str], collection: str):
        self.graph = graph
        self.name = graph.get_name()
        self._input_type = input_type
        self._settable = settable
        self._collection = collection

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
        values["collection"] = values.get("collection") or self._collection
        return make_context(self.graph.context_schema, values, strict=True, owner=self.name)

    def invoke(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return self.graph.invoke(input, config, context=self._context(config))

    async def ainvoke(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return await self.graph.ainvoke(input, config, context=self._context(config))

    def stream(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[dict]:
        state: dict[str, Any] = {}
        modes = ["updates", "values"]
        for namespace, mode, chunk in self.graph.stream(
            input, config, context=self._context(config), stream_mode=modes, subgraphs=True
        ):
            if mode == "updates":
                yield from _events(namespace, chunk)
            elif not namespace:
                state = chunk
        yield output_of(self.graph, state)

    async def astream(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[dict]:
        state: dict[str, Any] = {}
        modes = ["updates", "values"]
        async for namespace, mode, chunk in self.graph.astream(
            input, config, context=self._context(config), stream_mode=modes, subgraphs=True
        ):
            if mode == "updates":
                for event in _events(namespace, chunk):
                    yield event
            elif not namespace:
                state = chunk
        yield output_of(self.graph, state)  # last, so LangServe's playground shows the output, not one node's update


def _events(namespace: tuple[str, ...], chunk: dict) -> Iterator[dict]:
    for node, update in chunk.items():
        yield {"node": node, "namespace": namespace_names(namespace), "update": update}


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
    methods: tuple[str, ...] = METHODS,
) -> Any:
    """Build the FastAPI app for ``settings`` (default: the environment's, ``AMBIGQA_*``), which fix the LLM and the
    store; ``collections`` default to the one the settings name, ``options`` to every context field but the LLM."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from langserve import add_routes

    settings = use_settings(settings) if settings else get_settings()  # the runs below the app read get_settings()
    collections = collections or (settings.collection,)
    policy = Policy(
        api_key=api_key, collections=collections, options=options, max_body_bytes=max_body_bytes,
        body_timeout=body_timeout, max_concurrent=max_concurrent, queue_timeout=queue_timeout,
        request_timeout=request_timeout, max_question_chars=settings.max_question_chars,
    )  # fmt: skip
    app = FastAPI(title="ambigqa", description="LangGraph agents for ambiguous questions", version="0.1.0")
    ask = question_type(settings.max_question_chars)
    for method in methods:
        runnable = GraphRunnable(load_graph(method), ask, policy.settable(method), collections[0])
        add_routes(app, runnable, path=f"/{method}", config_keys=("configurable",))
    _add_clarify_routes(app, collections[0])
    _add_passages_route(app, collections)

    @app.exception_handler(AgentError)
    async def agent_error(_: Request, exc: AgentError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        return JSONResponse({"detail": str(exc).splitlines()[0]}, status_code=status)

    def health() -> dict[str, Any]:
        return {"status": "ok", "methods": list(methods), "llm": settings.llm, "collections": list(collections)}

    return Guard(app, policy=policy, health=health)


def _add_passages_route(app: Any, collections: tuple[str, ...]) -> None:
    """``POST /passages``: the stored passages with the ids a result cites, whole; no LLM, no graph slot."""
    from agent.runner import lookup
    from agent.schemas import Passage

    @app.post("/passages", response_model=list[Passage], response_model_exclude={"__all__": {"score"}})
    def passages(request: PassagesRequest) -> list[Passage]:
        """The passages with these ids, in the order given; an id the collection lacks is a 404 naming it."""
        collection = request.collection or collections[0]
        if collection not in collections:
            raise ConfigError(f"collection '{collection}' is not served; served: {', '.join(collections)}")
        return lookup(request.ids, collection=collection)


def _add_clarify_routes(app: Any, default_collection: str) -> None:
    """``POST /clarify`` starts a router thread; ``POST /clarify/{thread_id}/resume`` answers its picks."""

    @app.post("/clarify", response_model=ClarifyResult, response_model_exclude_none=True)
    async def clarify(request: ClarifyRequest) -> ClarifyResult:
        """Start a clarify thread (the router): the interpretations to pick from, or the answer to a clear question."""
        options = dict(request.options)
        collection = options.pop("collection", None) or default_collection
        return await aclarify(request.question, collection=collection, **options)

    @app.post("/clarify/{thread_id}/resume", response_model=ClarifyResult, response_model_exclude_none=True)
    async def resume(thread_id: str, request: ResumeRequest) -> ClarifyResult:
        """Answer the picked interpretations of a waiting thread, started on this server or any sharing its database."""
        return await aresume(thread_id, request.picks)
