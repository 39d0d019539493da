"""Per-run options (LangGraph ``context_schema``): the papers' defaults, changeable per request."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError, field_validator

from agent.errors import AgentError, ConfigError
from agent.llm.calls import LLMOptions
from agent.retrieval.collections import open_store
from agent.retrieval.passage_set import given_passages, passage_set
from agent.retrieval.pipeline import FirstStage, Reranker, RetrievalOptions, first_stage, rank_pool, search
from agent.retrieval.store import Store
from agent.schemas import Passage
from agent.steps.casebook import CALL_ROOM, Source, casebook
from agent.steps.fewshot import Selection, Shots

C = TypeVar("C", bound="RunContext")
WINDOW_MARGIN = 1.2  # worked examples left out per token a prompt ran over: the estimate errs, fit_examples rounds


@dataclass
class WindowFit:
    """One node run's fit to the model's window: the tokens of worked examples its prompts leave out (the run's
    ``window_cut``), and whether any prompt read worked examples (else running it again with fewer cannot help)."""

    cut: int = 0
    read: bool = False


_window_fit: ContextVar[WindowFit | None] = ContextVar("ambigqa_window_fit", default=None)


@contextmanager
def fitting(cut: int) -> Iterator[WindowFit]:
    """Within the block, ``RunContext.shots`` leaves ``cut`` tokens of worked examples out and records that it was
    asked (in this task and the tasks and threads it starts)."""
    fit = WindowFit(cut)
    token = _window_fit.set(fit)
    try:
        yield fit
    finally:
        _window_fit.reset(token)


class RunContext(BaseModel):
    llm: str = Field(default="", description="LLM provider: local | openai | fake | a registered name; '' = settings")
    collection: str = Field(default="", description="collection to retrieve from; '' = settings (demo)")
    passages: list[Passage] | None = Field(
        default=None, description="read these passages instead of retrieving from the collection (none: retrieve)"
    )
    temperature: float = Field(default=0.3, ge=0, le=2, description="sampling temperature (DIVA A.4: 0.3)")
    seed: int | None = Field(
        default=0, ge=0, description="sampling seed sent with each call, so a run repeats (ours); none: the endpoint's"
    )
    max_tokens: int = Field(default=300, ge=16, le=4096, description="max tokens per LLM call (DIVA A.4: 300)")
    structured: bool = Field(default=True, description="grammar/JSON-schema constrained output where supported")
    retries: int = Field(default=2, ge=0, le=5, description="extra attempts when LLM output cannot be parsed")
    max_concurrency: int = Field(default=8, ge=1, le=64, description="parallel LLM calls within one node")
    fewshot: int = Field(default=5, ge=0, le=15, description="pool demonstrations per prompt (DIVA A.4, ToC A.3: 5)")
    demo_selection: Selection = Field(
        default="nearest", description="nearest to the question, or fixed (one prompt prefix shared across questions)"
    )
    prompt_tokens: int = Field(
        default=3300,
        ge=256,
        le=1_000_000,
        description="prompt tokens per call; the casebook gets this less 1,300 (ours: the local model's 4,096-token "
        "window less a 300-token reply)",
    )
    first_stage: FirstStage = Field(
        default="dense",
        description="dense (MiniLM) | bm25 | hybrid (rank fusion); dense: best on ASQA dev (docs/retrieval.md)",
    )
    reranker: Reranker = Field(
        default="cross-encoder",
        description="none | cross-encoder (ms-marco-MiniLM-L-12-v2) | colbert (late interaction); cross-encoder: "
        "best on ASQA dev (docs/retrieval.md)",
    )
    rerank_depth: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="first-stage passages the re-ranker scores (docs/retrieval.md: latency against recall)",
    )
    rerank_fusion: bool = Field(
        default=True,
        description="order re-ranked passages by rank fusion with the first stage's order, else by the re-ranker's "
        "alone (docs/retrieval.md)",
    )

    def llm_options(self) -> LLMOptions:
        return LLMOptions(
            llm=self.llm or None,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            structured=self.structured,
            retries=self.retries,
        )

    @field_validator("passages", mode="before")
    @classmethod
    def _given(cls, value: Any) -> list[Passage] | None:
        return None if value is None else given_passages(value)

    def store(self) -> Store:
        """The given passages as a store, else the collection."""
        return passage_set(self.passages) if self.passages else open_store(self.collection or None)

    def pool(self, query: str, k: int, kind: FirstStage) -> list[Passage]:
        """A method's candidates: the first stage's top ``k`` for ``query``, or every given passage in their order
        (retrieval skipped; the method still re-ranks and prunes within them)."""
        if self.passages:
            return list(passage_set(self.passages).items)
        return first_stage(self.store(), [query], k, kind)[0]

    def search(self, query: str, k: int) -> list[Passage]:
        """The retrieval pipeline's top ``k`` for ``query``; with given passages, all of them in the re-ranked order."""
        if self.passages:
            store = passage_set(self.passages)
            return rank_pool(store, query, store.items, len(store.items), self.retrieval())
        return search(self.store(), query, k, self.retrieval())

    def shots(self, budget: int | None = None) -> Shots:
        """How the run's prompts pick and fit their worked examples: within ``budget`` (default ``prompt_tokens``)
        less the tokens of them that the node being run leaves out (``fitting``)."""
        fit = _window_fit.get()
        if fit is not None:
            fit.read = True
        tokens = (budget or self.prompt_tokens) - (fit.cut if fit is not None else 0)
        return Shots(k=self.fewshot, selection=self.demo_selection, budget=max(tokens, CALL_ROOM))

    def wider_cut(self, cut: int, excess: int | None) -> int | None:
        """The cut for a node whose prompts, with ``cut`` tokens of worked examples left out, ran ``excess`` tokens
        over the model's window (None: by an unstated amount, so every example goes); None when none is left to cut."""
        most = max(self.prompt_tokens - CALL_ROOM, 0)
        if cut >= most:
            return None
        return min(most if excess is None else cut + math.ceil(excess * WINDOW_MARGIN), most)

    def casebook(self, question: str, source: Source = "pool") -> str:
        """The worked examples every prompt about ``question`` starts with (``agent.steps.casebook``)."""
        return casebook(question, self.shots(), source)

    async def acasebook(self, question: str, source: Source = "pool") -> str:
        """``casebook`` from a coroutine: built on a worker thread (it may read the demo store and embed)."""
        return await asyncio.to_thread(self.casebook, question, source)

    def retrieval(self) -> RetrievalOptions:
        return RetrievalOptions(
            first_stage=self.first_stage, reranker=self.reranker, depth=self.rerank_depth, fusion=self.rerank_fusion
        )


class TopK(BaseModel):
    """``top_k`` for the methods that read the question's passages as retrieved; DIVA, ToC and VerDICt declare their
    own (passages per interpretation, per expansion, and the universe U), with their papers' defaults."""

    top_k: int = Field(default=5, ge=1, le=50, description="passages retrieved for the question (DIVA A.3: 5)")


def make_context(
    schema: type[C],
    values: Mapping[str, Any] | BaseModel | None = None,
    *,
    strict: bool = False,
    owner: str = "the method",
) -> C:
    """``schema`` built from a dict of options or another method's context.

    Another context passes only the fields its caller set, so a method keeps its own defaults for the rest (VerDICt's
    greedy decoding and 20 passages under the router). ``strict`` rejects options the schema lacks; a bad value is
    always a ``ConfigError`` naming the field.
    """
    if isinstance(values, BaseModel):
        values = values.model_dump(exclude_unset=True)
    values = dict(values or {})
    unknown = sorted(set(values) - set(schema.model_fields))
    if strict and unknown:
        raise ConfigError(f"{owner} has no option {', '.join(unknown)}; its options: {', '.join(schema.model_fields)}")
    try:
        return schema(**{k: v for k, v in values.items() if k in schema.model_fields})
    except ValidationError as exc:
        error = exc.errors()[0]
        if isinstance(cause := error.get("ctx", {}).get("error"), AgentError):
            raise cause from None  # our own check's message says it all (e.g. InvalidPassagesError)
        field = ".".join(str(part) for part in error["loc"])
        raise ConfigError(f"bad {owner} option: {field} {error['msg']}") from None


def context_of(runtime: Runtime[Any] | None, schema: type[C]) -> C:
    """The run's context as ``schema``; the defaults when the caller passed none."""
    context = runtime.context if runtime is not None else None
    if isinstance(context, schema):
        return context
    return make_context(schema, context)
