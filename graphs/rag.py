"""Vanilla RAG (RAC in the DIVA and ToC papers): retrieve top-k → extract DQ/DA pairs (I_e) → long-form answer (I_g),
drafted and then checked (``agent.answer_step``). With ``answer_style=short`` it is the multi-hop baseline instead:
retrieve top-k → one reasoned short answer.

``retrieve`` runs the retrieval pipeline: the first stage, then the re-ranker over its top ``rerank_depth``."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from agent.answer_step import AnswerOptions, AnswerStepState, ReviewedOutput, add_answer_step, drafted
from agent.chat import REPLY, add_chat_io
from agent.context import TopK, context_of
from agent.llm.calls import aask
from agent.llm.parsing import parse_final_answer
from agent.nodes import llm_node
from agent.state import QuestionInput, RunState
from agent.steps.checks import foreign_figures
from agent.steps.rac import draft, extract, grounds
from agent.text import render_passages


class RagContext(TopK, AnswerOptions):
    structured: bool = Field(
        default=False, description="I_e as JSON under a grammar, else the papers' DQ/DA text (ours: docs/answers.md)"
    )
    answer_style: Literal["long", "short"] = Field(
        default="long",
        description="long: DQ/DA pairs, then a long answer (ASQA); short: a reasoned short answer (multi-hop baseline)",
    )


class RagOutput(ReviewedOutput, total=False):
    reasoning: str  # the short answer's step-by-step reasoning (answer_style=short only)


class RagState(QuestionInput, RagOutput, AnswerStepState, RunState, total=False):
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
    """I_g's first draft; the answer step checks it."""
    ctx = context_of(runtime, RagContext)
    question, pairs, passages = state["question"], state["disambiguations"], state["passages"]
    book = await ctx.acasebook(question)  # the same examples and passages as rag_extract: a cached prefix
    reply = await draft(question, pairs, passages, ctx.llm_options(), book)
    return drafted(reply, foreign_figures(book, grounds(question, pairs, passages)))


builder = StateGraph(RagState, input_schema=QuestionInput, output_schema=RagOutput, context_schema=RagContext)
builder.add_node("retrieve", retrieve)
builder.add_node("rag_extract", llm_node(rag_extract))
builder.add_node("rag_generate", llm_node(rag_generate))
builder.add_node("short_answer", llm_node(short_answer))
add_chat_io(builder, "retrieve")
builder.add_conditional_edges("retrieve", answer_style)
builder.add_edge("rag_extract", "rag_generate")
add_answer_step(builder, "rag_generate")
builder.add_edge("short_answer", REPLY)
graph = builder.compile(name="rag")
