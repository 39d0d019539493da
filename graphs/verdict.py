"""VerDICt (Lee et al.): verified diversification with consolidation (Section 4, Algorithm 1).

relax (I_R) → retrieve the universe U once → execute I_E on every passage alone, concurrently (a grounded
interpretation and its answer, or null) → consolidate (HDBSCAN over "question answer" embeddings, one medoid
per cluster) → answer (its first draft; the answer step checks it and cites, after each sentence, the passage that
grounds each interpretation it states: ``agent.answer_step``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from agent.answer_step import (
    AnswerOptions,
    AnswerStepState,
    ReviewedOutput,
    add_answer_step,
    checks_option,
    drafted,
)
from agent.chat import add_chat_io
from agent.context import context_of
from agent.llm.calls import Reply, aask, gather_concurrently
from agent.llm.parsing import parse_answer, parse_execution, parse_query
from agent.llm.prompts import demonstration
from agent.nodes import llm_node
from agent.retrieval.embeddings import embed
from agent.schemas import Disambiguation, Execution, Passage, QAPair
from agent.state import QuestionInput, RunState
from agent.steps import conflict
from agent.steps.checks import Check, foreign_figures
from agent.steps.conflict import Conflict, SettleOptions
from agent.steps.consolidation import hdbscan_labels, representatives
from agent.text import passage_text, render_pairs, render_passages, stated_in, states_nothing


class VerdictContext(SettleOptions, AnswerOptions):
    temperature: float = Field(default=0.0, ge=0, le=2, description="sampling temperature (VerDICt 5.1.3: greedy)")
    top_k: int = Field(default=20, ge=1, le=100, description="passages in the universe U (VerDICt footnote 3: 20)")
    min_cluster_size: int = Field(default=2, ge=2, le=20, description="HDBSCAN min_cluster_size (default setting)")
    min_samples: int = Field(default=2, ge=1, le=20, description="HDBSCAN min_samples (default setting)")
    consolidation: Literal["default", "conservative"] = Field(
        default="default",
        description="conservative (Table 4): HDBSCAN may return one cluster for all → fewer interpretations",
    )
    cluster_on: Literal["question_answer", "question"] = Field(
        default="question_answer", description="embed f(q̂;ŷ) (default) or f(q̂) only (Table 4)"
    )
    answer_passages: int = Field(
        default=10,
        ge=1,
        le=20,
        description="passages the answer step reads: the cited ones, or the top ones if all abstain",
    )
    answer_from: Literal["passages", "disambiguations"] = Field(
        default="passages",
        description="what the answer reads beside the disambiguations: their cited passages (the paper) or nothing "
        "more; with none it reads the top passages",
    )
    grounded_answers: bool = Field(
        default=True,
        description="drop a candidate whose passage does not state its answer (I_E's rule that the answer comes from "
        "the passage, checked by string: agent.text.stated_in; ours, not the paper's: notes/2026-11-ramdocs-conflicts.md)",
    )
    answer_checks: list[Check] = checks_option("narrates", "states_nothing", "borrows", "incomplete")


class VerdictOutput(ReviewedOutput, total=False):
    relaxed_query: str  # Eq. 6
    candidates: list[Disambiguation]  # Algorithm 1 lines 5–9: one per non-abstaining passage, citing it, by rank
    abstentions: int  # passages whose I_E reply was null, or an answer saying the passage has none
    unparsed: int  # passages whose I_E reply stayed unusable after retries (also dropped)
    ungrounded: int  # with grounded_answers: replies whose answer their passage does not state (also dropped)
    cluster_labels: list[int]  # HDBSCAN label per candidate; -1 = outlier
    conflicts: list[Conflict]  # with settle_conflicts: the answers that disagreed and what was dropped


class VerdictState(QuestionInput, VerdictOutput, AnswerStepState, RunState, total=False):
    pass


async def relax(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    options = context_of(runtime, VerdictContext).llm_options()
    reply = await aask(
        "verdict_relax", options, parse=parse_query, fallback=state["question"], question=state["question"]
    )
    return {"relaxed_query": reply.value}  # Eq. 6


def retrieve(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    ctx = context_of(runtime, VerdictContext)
    universe = ctx.search(state["relaxed_query"], ctx.top_k)  # Eq. 7, one retrieval
    return {"passages": universe, "retrieved": universe}


async def execute(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    ctx = context_of(runtime, VerdictContext)
    options = ctx.llm_options()

    async def one(passage: Passage) -> Reply:  # Eq. 8: one passage per call, after the shared prefix
        return await aask(
            "verdict_execute",
            options,
            parse=parse_execution,
            schema=Execution,
            fallback=None,
            passage=passage_text(passage),
            question=state["question"],
        )

    replies = await gather_concurrently(one, state["passages"], ctx.max_concurrency)
    # Algorithm 1 line 8: a null reply abstains, and so does an answer that says the passage has none
    # ("The passage does not provide information about ...": the small model writing out its null)
    abstained = [r.parsed and (r.value is None or states_nothing(r.value.answer)) for r in replies]
    # the answer must come from the passage (I_E rule 6): one the passage does not state was the model's own
    # ("Eddard Stark" as Lord Beric's actor, from a passage that never names him)
    ungrounded = [
        ctx.grounded_answers and r.value is not None and not null and not stated_in(p.full_text, r.value.answer)
        for p, r, null in zip(state["passages"], replies, abstained)
    ]
    candidates = [
        Disambiguation(question=r.value.question, answer=r.value.answer, passage_ids=[p.id])
        for p, r, null, foreign in zip(state["passages"], replies, abstained, ungrounded)
        if r.value is not None and not null and not foreign
    ]
    return {
        "candidates": candidates,
        "abstentions": sum(abstained),
        "unparsed": sum(not r.parsed for r in replies),
        "ungrounded": sum(ungrounded),
    }


def after_execute(state: VerdictState, runtime: Runtime[VerdictContext]) -> Literal["settle", "consolidate"]:
    return "settle" if context_of(runtime, VerdictContext).settle_conflicts else "consolidate"


async def settle(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    """Candidates of one interpretation that disagree are judged before consolidation; losers and the passages
    behind only them leave. With settle_conflicts off (a replay forked before this node) it passes the state on."""
    ctx = context_of(runtime, VerdictContext)
    if not ctx.settle_conflicts:
        return {}
    candidates, passages, conflicts = await conflict.settle(
        state["question"],
        state["candidates"],
        state["passages"],
        ctx.llm_options(),
        ctx.max_concurrency,
        ctx.settle_by,
        ctx.judge_both_orders,
        ctx.subject_rule,
    )
    return {"candidates": candidates, "passages": passages, "conflicts": conflicts}


def consolidate(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    ctx = context_of(runtime, VerdictContext)
    candidates = state["candidates"]
    texts = [f"{c.question} {c.answer}" if ctx.cluster_on == "question_answer" else c.question for c in candidates]
    vectors = embed(texts)  # f: the retriever's encoder, one batch
    conservative = ctx.consolidation == "conservative"
    labels = hdbscan_labels(vectors, ctx.min_cluster_size, ctx.min_samples, conservative)  # Algorithm 1 line 10
    kept = representatives(vectors, labels)  # lines 12–14: medoids; outliers dropped unless all are outliers
    return {"disambiguations": [candidates[i] for i in kept], "cluster_labels": labels}


async def answer(state: VerdictState, runtime: Runtime[VerdictContext]) -> dict:
    """The long answer's first draft from the disambiguations, each shown with its passage's number, and their cited
    passages (or the disambiguations alone); the answer step checks it and cites by code."""
    ctx = context_of(runtime, VerdictContext)
    passages, pairs = state["passages"], state["disambiguations"]
    if not pairs and conflict.disputes(state.get("conflicts", [])):  # every reading was left undecided
        return {"drafts": []}
    number = {p.id: i for i, p in enumerate(passages, 1)}  # citation [n] = n-th passage of the result
    cited = sorted({number[d.passage_ids[0]] for d in pairs}) or list(range(1, len(passages) + 1))
    cited = cited[: ctx.answer_passages]  # bounded context; every pair still carries its citation
    shown = [d.model_copy(update={"answer": f"{d.answer} [{number[d.passage_ids[0]]}]"}) for d in pairs]
    if ctx.answer_from == "disambiguations" and shown:
        prompt, evidence = "verdict_answer_disambiguations", {}
    else:
        prompt, evidence = (
            "verdict_answer",
            {"passages": render_passages([passages[n - 1] for n in cited], numbers=cited)},
        )
    call: dict[str, Any] = {
        **evidence,
        "question": state["question"],
        "disambiguations": render_pairs(one_per_question(shown)),
    }
    reply = await aask(prompt, ctx.llm_options(), parse=parse_answer, fallback="", **call)
    read = [*(p.full_text for p in passages), state["question"], render_pairs(pairs)]
    return drafted(reply, foreign_figures(demonstration(prompt), read))


def one_per_question(pairs: list[Disambiguation]) -> list[QAPair]:
    """The pairs as the answer prompt shows them: disambiguations asking the same question (the 1.5B model often
    repeats the question itself for several passages) shown once, with their cited answers joined ("Alex Smith [8];
    Eli Manning [3]"), so the prompt holds one question with several answers rather than one question many times."""
    merged: dict[str, QAPair] = {}
    for d in pairs:
        key = " ".join(re.sub(r"[^\w\s]", " ", d.question.casefold()).split())
        held = merged.get(key)
        answer = f"{held.answer}; {d.answer}" if held else d.answer
        merged[key] = QAPair(question=held.question if held else d.question, answer=answer)
    return list(merged.values())


builder = StateGraph(
    VerdictState, input_schema=QuestionInput, output_schema=VerdictOutput, context_schema=VerdictContext
)
builder.add_node("relax", llm_node(relax))
builder.add_node("retrieve", retrieve)
builder.add_node("execute", llm_node(execute))
builder.add_node("settle", llm_node(settle))
builder.add_node("consolidate", consolidate)
builder.add_node("answer", llm_node(answer))
add_chat_io(builder, "relax")
builder.add_edge("relax", "retrieve")
builder.add_edge("retrieve", "execute")
builder.add_conditional_edges("execute", after_execute)
builder.add_edge("settle", "consolidate")
builder.add_edge("consolidate", "answer")
add_answer_step(builder, "answer")
graph = builder.compile(name="verdict")
