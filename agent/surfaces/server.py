"""The LangServe app: a route per graph (invoke, batch, stream, schemas), /health, API key, size and concurrency limits.

Limits live in pure ASGI middleware so they cover streaming responses too: a request over ``max_body_bytes``
gets 413, one without the configured ``X-API-Key`` gets 401, and when ``max_concurrent`` graph runs are busy a
request waits up to ``queue_timeout`` seconds, then gets 503 — the process never falls over.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableConfig
from pydantic import BaseModel, Field, StringConstraints

from agent.context import make_context
from agent.registry import METHODS, load_graph
from agent.runner import namespace_names, output_of
from agent.settings import get_settings

API_KEY_HEADER = "x-api-key"


def question_type(max_chars: int) -> type[BaseModel]:
    class Ask(BaseModel):
        question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_chars)] = Field(
            description="the (possibly ambiguous) question"
        )

    return Ask


class GraphRunnable(Runnable):
    """A compiled graph for LangServe: invoke returns its output schema; stream yields node updates as they happen
    (``{node, namespace, update}``), then that output."""

    def __init__(self, graph: Any, input_type: type[BaseModel]):
        self.graph = graph
        self.name = graph.get_name()
        self._input_type = input_type

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
        """The graph's context fields, settable per request as ``config.configurable``."""
        return [
            ConfigurableFieldSpec(
                id=name, annotation=field.annotation, default=field.default, description=field.description
            )
            for name, field in self.graph.context_schema.model_fields.items()
        ]

    def _context(self, config: RunnableConfig | None) -> Any:
        return make_context(self.graph.context_schema, (config or {}).get("configurable", {}))

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


class Limits:
    """ASGI middleware: API key, request size and a bounded number of concurrent graph runs."""

    def __init__(
        self, app: Any, *, api_key: str | None, max_body_bytes: int, max_concurrent: int, queue_timeout: float
    ):
        self.app = app
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.queue_timeout = queue_timeout
        self.slots = asyncio.Semaphore(max_concurrent)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in ("/health", "/docs", "/openapi.json"):
            return await self.app(scope, receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        if self.api_key and headers.get(API_KEY_HEADER) != self.api_key:
            return await _reply(send, 401, "missing or wrong X-API-Key header")
        if int(headers.get("content-length") or 0) > self.max_body_bytes:
            return await _reply(send, 413, f"request body over {self.max_body_bytes} bytes")
        if scope["method"] != "POST":  # schemas and playground pages run no graph
            return await self.app(scope, receive, send)
        try:
            await asyncio.wait_for(self.slots.acquire(), timeout=self.queue_timeout)
        except TimeoutError:
            return await _reply(send, 503, "all graph slots are busy; retry later", {"retry-after": "5"})
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.release()


async def _reply(send: Any, status: int, detail: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(
    *,
    api_key: str | None = None,
    max_concurrent: int = 4,
    queue_timeout: float = 30.0,
    max_body_bytes: int = 64_000,
    methods: tuple[str, ...] = METHODS,
) -> Any:
    """Build the FastAPI app; the LLM and collection come from settings (``AMBIGQA_LLM``, ``AMBIGQA_COLLECTION``)."""
    from fastapi import FastAPI
    from langserve import add_routes

    settings = get_settings()
    app = FastAPI(title="ambigqa", description="LangGraph agents for ambiguous questions", version="0.1.0")
    ask = question_type(settings.max_question_chars)
    for method in methods:
        add_routes(app, GraphRunnable(load_graph(method), ask), path=f"/{method}", config_keys=("configurable",))

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "methods": list(methods), "llm": settings.llm, "collection": settings.collection}

    app.add_middleware(
        Limits,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        max_concurrent=max_concurrent,
        queue_timeout=queue_timeout,
    )
    return app
