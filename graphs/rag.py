"""Vanilla RAG (RAC in the DIVA and ToC papers): retrieve top-k → extract DQ/DA pairs (I_e) → long-form answer (I_g).

``retrieve`` runs the retrieval pipeline: the first stage, then the re-ranker over its top ``rerank_depth``."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from agent.context import RunContext, context_of
from agent.nodes import llm_node
from agent.state import AnswerOutput, AnswerState, QuestionInput
from agent.steps.rac import extract, generate


class RagContext(RunContext):
    top_k: int = Field(default=5, ge=1, le=50, description="passages retrieved for the question (DIVA A.3: 5)")
    structured: bool = Field(
        default=False, description="I_e as JSON under a grammar, else the papers' DQ/DA text (ours: docs/answers.md)"
    )


def retrieve(state: AnswerState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    found = ctx.search(state["question"], ctx.top_k)
    return {"passages": found, "retrieved": found}


async def rag_extract(state: AnswerState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    reply = await extract(
        state["question"], state["passages"], ctx.llm_options(), await ctx.acasebook(state["question"])
    )
    return {"disambiguations": reply.value}


async def rag_generate(state: AnswerState, runtime: Runtime[RagContext]) -> dict:
    ctx = context_of(runtime, RagContext)
    book = await ctx.acasebook(state["question"])  # the same examples and passages as rag_extract: a cached prefix
    reply = await generate(state["question"], state["disambiguations"], state["passages"], ctx.llm_options(), book)
    return {"answer": reply.value}


builder = StateGraph(AnswerState, input_schema=QuestionInput, output_schema=AnswerOutput, context_schema=RagContext)
builder.add_node("retrieve", retrieve)
builder.add_node("rag_extract", llm_node(rag_extract))
builder.add_node("rag_generate", llm_node(rag_generate))
builder.add_edge(START, "retrieve")
builder.add_edge("retrieve", "rag_extract")
builder.add_edge("rag_extract", "rag_generate")
builder.add_edge("rag_generate", END)
graph = builder.compile(name="rag")
