"""Per-run options (LangGraph ``context_schema``): the papers' defaults, changeable per request."""

from __future__ import annotations

from typing import TypeVar

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from agent.llm.calls import LLMOptions
from agent.retrieval.store import Store, open_store

C = TypeVar("C", bound="RunContext")


class RunContext(BaseModel):
    llm: str = Field(default="", description="LLM provider: local | openai | fake | a registered name; '' = settings")
    collection: str = Field(default="", description="Chroma collection to retrieve from; '' = settings (demo)")
    temperature: float = Field(default=0.3, ge=0, le=2, description="sampling temperature (DIVA A.4: 0.3)")
    max_tokens: int = Field(default=300, ge=16, le=4096, description="max tokens per LLM call (DIVA A.4: 300)")
    structured: bool = Field(default=True, description="grammar/JSON-schema constrained output where supported")
    retries: int = Field(default=2, ge=0, le=5, description="extra attempts when LLM output cannot be parsed")
    max_concurrency: int = Field(default=8, ge=1, le=64, description="parallel LLM calls within one node")

    def llm_options(self) -> LLMOptions:
        return LLMOptions(
            llm=self.llm or None,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            structured=self.structured,
            retries=self.retries,
        )

    def store(self) -> Store:
        return open_store(self.collection or None)


def context_of(runtime: Runtime | None, schema: type[C]) -> C:
    """The run's context, or the defaults when the caller passed none."""
    context = runtime.context if runtime is not None else None
    if context is None:
        return schema()
    if isinstance(context, dict):
        return schema(**{k: v for k, v in context.items() if k in schema.model_fields})
    if not isinstance(context, schema):  # a subgraph run under a parent graph's context: take the shared fields
        return schema(**{k: v for k, v in context.model_dump().items() if k in schema.model_fields})
    return context

