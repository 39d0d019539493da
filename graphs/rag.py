"""Vanilla RAG (RAC in the DIVA and ToC papers): retrieve top-k → extract DQ/DA pairs (I_e) → long-form answer (I_g).
With ``answer_style=short`` it is the multi-hop baseline instead: retrieve top-k → one reasoned short answer.

``retrieve`` runs the retrieval pipeline: the first stage, then the re-ranker over its top ``rerank_depth``."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from agent.context import RunContext, context_of
from agent.llm.calls import aask
from agent.llm.parsing import parse_final_answer
from agent.nodes import llm_node
from agent.state import AnswerOutput, QuestionInput
from agent.steps.rac import extract, generate
from agent.text import render_passages


class RagContext(RunContext):
    top_k: int = Field(default=5, ge=1, le=50, description="passages retrieved for the question (DIVA A.3: 5)")
    structured: bool = Field(
        default=False, description="I_e as JSON under a grammar, else the papers' DQ/DA text (ours: docs/answers.md)"
    )
    answer_style: Literal["long", "short"] = Field(
        default="long",
        description="long: DQ/DA pairs, then a long answer (ASQA); short: a reasoned short answer (multi-hop baseline)",
    )
    complete_readings: bool = Field(
        default=False,
        description="add sentences for the pairs whose short answer the answer leaves out (on in ToC; off here: docs/evaluation.md)",
    )


class RagOutput(AnswerOutput, total=False):
    reasoning: str  # the short answer's step-by-step reasoning (answer_style=short only)


class RagState(QuestionInput, RagOutput, total=False):
    pass


def retrieve(state: RagState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    found = ctx.search(state["question"], ctx.top_k)
    return {"passages": found, "retrieved": found}


async def rag_extract(state: RagState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    reply = await extract(
        state["question"], state["passages"], ctx.llm_options(), await ctx.acasebook(state["question"])
    )
    return {"disambiguations": reply.value}


async def short_answer(state: RagState, runtime: Runtime[RagContext]) -> dict:
    """The multi-hop baseline's one call: reason over the passages, answer on a last line."""
    ctx = context_of(runtime, RagContext)
    options = replace(ctx.llm_options(), structured=False)
    reply = await aask(
        "rag_short", options, parse=parse_final_answer, fallback="unknown",
        passages=render_passages(state["passages"]), question=state["question"],
    )  # fmt: skip
    return {"answer": reply.value, "reasoning": reply.reasoning, "disambiguations": []}


def answer_style(state: RagState, runtime: Runtime[RagContext]) -> Literal["rag_extract", "short_answer"]:
    return "short_answer" if context_of(runtime, RagContext).answer_style == "short" else "rag_extract"


async def rag_generate(state: RagState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    book = await ctx.acasebook(state["question"])  # the same examples and passages as rag_extract: a cached prefix
    reply = await generate(
        state["question"], state["disambiguations"], state["passages"], ctx.llm_options(), book,
        complete=ctx.complete_readings,
    )  # fmt: skip
    return {"answer": reply.value}


builder = StateGraph(RagState, input_schema=QuestionInput, output_schema=RagOutput, context_schema=RagContext)
builder.add_node("retrieve", retrieve)
builder.add_node("rag_extract", llm_node(rag_extract))
builder.add_node("rag_generate", llm_node(rag_generate))
builder.add_node("short_answer", llm_node(short_answer))
builder.add_edge(START, "retrieve")
builder.add_conditional_edges("retrieve", answer_style)
builder.add_edge("rag_extract", "rag_generate")
builder.add_edge("rag_generate", END)
builder.add_edge("short_answer", END)
graph = builder.compile(name="rag")
