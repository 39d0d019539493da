"""DIVA (In et al.): diversify the retrieval, verify it, adapt the generation to its grade — Algorithm 1.

type_ambiguity (I_a) → interpret (I_p) → retrieve (pool C, top-K per interpretation) → prune (top-K by Eq. 5)
→ verify (one Yes/No per interpretation, Eq. 7) → Useful / PartialUseful: rag_extract (I_e) → rag_generate (I_g's
draft) → the answer step's checks (``agent.answer_step``); Useless: closed_book (I_l). Every call opens with the question's casebook; in the default ``casebook_short`` layout
verify's calls and I_e then open their turn with the kept passages, and I_g continues I_e's conversation, so the
casebook and the passages are each prefilled once.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from agent.answer_step import AnswerOptions, AnswerStepState, ReviewedOutput, add_answer_step, drafted
from agent.chat import REPLY, add_chat_io
from agent.context import context_of
from agent.llm.calls import Reply, aask, gather_concurrently
from agent.llm.parsing import parse_yes_no
from agent.nodes import llm_node
from agent.retrieval.pipeline import FirstStage, MemoScorer, Reranker, rank_pool
from agent.schemas import AmbiguityType, Passage, YesNo
from agent.state import QuestionInput, RunState
from agent.steps import conflict, rac
from agent.steps.ambiguity import classify_ambiguity, infer_interpretations
from agent.steps.casebook import evidence, shared_prefix
from agent.steps.checks import foreign_figures
from agent.steps.conflict import Conflict, SettleOptions, SubjectRule

Grade = Literal["Useful", "PartialUseful", "Useless"]
ExtractLayout = Literal["own_examples", "casebook_short"]


class DivaContext(SettleOptions, AnswerOptions):
    subject_rule: SubjectRule = Field(
        default="judge",  # DIVA's choice on issue 93's sample C (notes/2026-12-ramdocs-protocol.md); VerDICt's differs
        description=SettleOptions.model_fields["subject_rule"].description,
    )
    top_k: int = Field(
        default=5, ge=1, le=50, description="K: passages per interpretation (Eq. 4) and kept by pruning (A.4: 5)"
    )
    pool_size: int = Field(
        default=100, ge=1, le=1000, description="|C|: candidate passages first retrieved for the question"
    )
    first_stage: FirstStage = Field(
        default="hybrid",
        description="the first stage that fills the pool C_i; hybrid: best oracle MRecall@5 (docs/retrieval.md)",
    )
    reranker: Reranker = Field(
        default="colbert",
        description="ranks the pool per interpretation, scores Eq. 5 (A.4.1); colbert: best here (docs/retrieval.md)",
    )
    rerank_fusion: bool = Field(
        default=False,
        description="fuse each re-ranked order with the dense order (off: no better here; docs/retrieval.md)",
    )
    eq5_scale: Literal["minmax", "raw"] = Field(
        default="minmax",
        description="minmax: scale each interpretation's relevance over the union before Eq. 5 averages it; raw: as "
        "scored (ours: docs/methods.md)",
    )
    prompt_tokens: int = Field(
        default=2900,
        ge=256,
        le=1_000_000,
        description="prompt tokens per call; DIVA's casebook gets this less 1,300 (ours: docs/methods.md)",
    )
    max_interpretations: int = Field(
        default=8, ge=1, le=20, description="cap on pseudo-interpretations, i.e. on verify calls (ours)"
    )
    extract_layout: ExtractLayout = Field(
        default="casebook_short",
        description="I_e's prompt: casebook_short (the shared casebook and passages, short JSON answers) or "
        "own_examples (the paper's); docs/methods.md",
    )
    extract_prompt_tokens: int = Field(
        default=3300, ge=256, le=1_000_000, description="estimated prompt tokens of I_e's own prompt (own_examples)"
    )
    verify_max_tokens: int = Field(
        default=24, ge=4, le=300, description="reply tokens of a Yes/No verification (App. A.4.2: 3 on average)"
    )


class ScoredPassage(BaseModel):
    passage: Passage = Field(description="a passage of P̃ (Eq. 4), with its first-stage score for the question")
    relevance: list[float] = Field(
        description="relevance to each pseudo-interpretation, in order: the re-ranker's score, or cosine without one"
    )
    retrieved_for: list[int] = Field(description="the interpretations whose top-K held this passage")
    score: float | None = Field(
        default=None, description="S(p) of Eq. 5, the mean relevance (min-max scaled by default); set by prune"
    )
    kept: bool = Field(default=False, description="among the top-K by S(p), i.e. in P_i")


class Verification(BaseModel):
    interpretation: str
    verdict: Literal["Yes", "No"]
    parsed: bool = Field(description="False when the output stayed unparseable after retries and counts as No")


class DivaOutput(ReviewedOutput, total=False):
    ambiguity_types: list[AmbiguityType]
    ambiguity_reason: str
    interpretations: list[str]
    kept: list[Passage]
    verdicts: list[Verification]
    grade: Grade
    route: Literal["rag", "closed_book"]
    conflicts: list[Conflict]  # with settle_conflicts: the answers that disagreed and what was dropped


class TypedQuestionInput(QuestionInput, total=False):
    """A caller that already typed the question (the router) passes the typing, and I_a is not asked again."""

    ambiguity_types: list[AmbiguityType]
    ambiguity_reason: str


class DivaState(QuestionInput, DivaOutput, AnswerStepState, RunState, total=False):
    scored: list[ScoredPassage]  # P̃, the union of the interpretations' top-K, scored by Eq. 5 in prune
    short_extract_reply: str | None  # I_e's reply (casebook_short), whose conversation I_g continues


async def casebook(state: DivaState, ctx: DivaContext) -> str:
    """The question's worked examples with their ambiguity annotation: the first part of every DIVA prompt, so each
    call after the first prefills only its own instruction (and verify the passages, once)."""
    return await ctx.acasebook(state["question"], "ambiguity")


async def type_ambiguity(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    if state.get("ambiguity_types"):
        return {}
    ctx = context_of(runtime, DivaContext)
    reply = await classify_ambiguity(state["question"], ctx.llm_options(), await casebook(state, ctx))
    return {"ambiguity_types": reply.value.types, "ambiguity_reason": reply.value.reason}


async def interpret(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    question, reason = state["question"], state.get("ambiguity_reason", "")
    reply = await infer_interpretations(question, reason, ctx.llm_options(), await casebook(state, ctx))  # Eq. 3
    interpretations = reply.value[: ctx.max_interpretations] or [question]  # none inferred: the question itself
    return {"interpretations": interpretations}


def retrieve(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    store, options = ctx.store(), ctx.retrieval()
    interpretations = state["interpretations"]
    pool = ctx.pool(state["question"], ctx.pool_size, options.first_stage)  # C_i, for the question
    scorer = options.scorer()
    scorer = scorer and MemoScorer(scorer)  # retrieve and prune score the same pairs once
    retrieved_for: dict[str, list[int]] = {}
    for j, interpretation in enumerate(interpretations):
        for passage in rank_pool(store, interpretation, pool, ctx.top_k, options, scorer):  # R(C_i, q̂_j; K)
            retrieved_for.setdefault(passage.id, []).append(j)
    union = [p for p in pool if p.id in retrieved_for]  # P̃_i, the union over interpretations (Eq. 4), in pool order
    if scorer is None:
        relevance = store.embed(interpretations) @ store.embeddings(union).T  # cosine: all vectors are unit length
    else:
        relevance = np.array([scorer.score(interpretation, union) for interpretation in interpretations])
    scored = [
        ScoredPassage(
            passage=p, relevance=[round(float(s), 6) for s in relevance[:, i]], retrieved_for=retrieved_for[p.id]
        )
        for i, p in enumerate(union)
    ]
    return {"scored": scored}


def prune(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    scored = state["scored"]
    if not scored:  # an empty collection
        return {"scored": [], "kept": [], "retrieved": []}
    relevance = np.array([s.relevance for s in scored], dtype=float).T  # interpretations × P̃
    if ctx.eq5_scale == "minmax":
        low, high = relevance.min(axis=1, keepdims=True), relevance.max(axis=1, keepdims=True)
        relevance = (relevance - low) / np.where(high > low, high - low, 1.0)
    means = relevance.mean(axis=0)
    scored = [s.model_copy(update={"score": round(float(m), 6)}) for s, m in zip(scored, means)]  # Eq. 5
    top = sorted(range(len(scored)), key=lambda i: -(scored[i].score or 0.0))[: ctx.top_k]  # Algorithm 1 line 8
    kept = [scored[i].passage.model_copy(update={"score": scored[i].score}) for i in top]
    scored = [s.model_copy(update={"kept": i in top}) for i, s in enumerate(scored)]
    return {"scored": scored, "kept": kept, "retrieved": kept}  # the diversified passages, whichever route follows


def grade_of(verdicts: list[Verification]) -> Grade:
    """Useful when the passages answer every interpretation, Useless when none, PartialUseful otherwise (Sec. 3.3)."""
    yes = sum(v.verdict == "Yes" for v in verdicts)
    if verdicts and yes == len(verdicts):
        return "Useful"
    return "PartialUseful" if yes else "Useless"


async def verify(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    options = ctx.llm_options()
    prefix, passages = shared_prefix(await casebook(state, ctx)), evidence(state["kept"])  # shared with I_e

    async def check(interpretation: str) -> Reply[bool]:
        return await aask(
            "verify",
            options,
            parse=parse_yes_no,
            schema=YesNo,
            fallback=False,  # unparseable after retries counts as No
            max_tokens=ctx.verify_max_tokens,
            prefix=prefix,
            evidence=passages,
            interpretation=interpretation,
        )

    replies = await gather_concurrently(check, state["interpretations"], ctx.max_concurrency)  # Eq. 7
    verdicts = [
        Verification(interpretation=q, verdict="Yes" if r.value else "No", parsed=r.parsed)
        for q, r in zip(state["interpretations"], replies)
    ]
    return {"verdicts": verdicts, "grade": grade_of(verdicts)}


async def rag_extract(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    question, kept, options = state["question"], state["kept"], ctx.llm_options()
    if ctx.extract_layout == "own_examples":  # Eq. 1
        reply = await rac.extract_with_examples(question, kept, options, ctx.shots(ctx.extract_prompt_tokens))
    else:
        reply = await rac.extract(question, kept, options, await casebook(state, ctx), short=True)
    continued = ctx.extract_layout == "casebook_short" and reply.parsed  # an unusable reply is not built on
    return {
        "disambiguations": reply.value,
        "passages": kept,
        "route": "rag",
        "short_extract_reply": reply.text if continued else None,
    }


def after_extract(state: DivaState, runtime: Runtime[DivaContext]) -> Literal["settle", "rag_generate"]:
    return "settle" if context_of(runtime, DivaContext).settle_conflicts else "rag_generate"


async def settle(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    """Disagreeing answers to one interpretation judged; I_g then reads what survived, not I_e's conversation. With
    settle_conflicts off (a replay forked before this node) it passes the state on."""
    ctx = context_of(runtime, DivaContext)
    if not ctx.settle_conflicts:
        return {}
    pairs, passages, conflicts = await conflict.settle(
        state["question"],
        state["disambiguations"],
        state["passages"],
        ctx.llm_options(),
        ctx.max_concurrency,
        ctx.settle_by,
        ctx.judge_both_orders,
        ctx.subject_rule,
    )
    changed = len(pairs) < len(state["disambiguations"])
    return {
        "disambiguations": pairs,
        "passages": passages,
        "conflicts": conflicts,
        **({"short_extract_reply": None} if changed else {}),
    }


async def rag_generate(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    """I_g's first draft (Eq. 2), continuing I_e's conversation where it can; the answer step checks it."""
    ctx = context_of(runtime, DivaContext)
    question, pairs, passages, options = (
        state["question"],
        state["disambiguations"],
        state["passages"],
        ctx.llm_options(),
    )
    if not pairs and conflict.disputes(state.get("conflicts", [])):  # every reading was left undecided: assert nothing
        return {"drafts": []}
    book, extracted = await casebook(state, ctx), state.get("short_extract_reply")
    history = rac.short_extract_transcript(question, passages, options, book, extracted) if extracted else None
    reply = await rac.draft(question, pairs, passages, options, book, history)
    return drafted(reply, foreign_figures(book, rac.grounds(question, pairs, passages)))


async def closed_book(state: DivaState, runtime: Runtime[DivaContext]) -> dict:
    ctx = context_of(runtime, DivaContext)
    reply = await rac.closed_book(state["question"], ctx.llm_options(), await casebook(state, ctx))  # LLM(q_i, I_l)
    return {
        "answer": reply.value,
        "disambiguations": [],
        "passages": [],
        "route": "closed_book",
    }


def adapt(state: DivaState) -> Literal["rag_extract", "closed_book"]:
    """Algorithm 1 lines 14–17: answer from the passages unless verification found them Useless."""
    return "closed_book" if state["grade"] == "Useless" else "rag_extract"


def build(input_schema: type = QuestionInput) -> Any:
    """Compile DIVA; the router compiles it with ``TypedQuestionInput`` to hand over the typing it already has."""
    builder = StateGraph(DivaState, input_schema=input_schema, output_schema=DivaOutput, context_schema=DivaContext)
    builder.add_node("type_ambiguity", llm_node(type_ambiguity))
    builder.add_node("interpret", llm_node(interpret))
    builder.add_node("retrieve", retrieve)
    builder.add_node("prune", prune)
    builder.add_node("verify", llm_node(verify))
    builder.add_node("rag_extract", llm_node(rag_extract))
    builder.add_node("settle", llm_node(settle))
    builder.add_node("rag_generate", llm_node(rag_generate))
    builder.add_node("closed_book", llm_node(closed_book))
    add_chat_io(builder, "type_ambiguity")
    builder.add_edge("type_ambiguity", "interpret")
    builder.add_edge("interpret", "retrieve")
    builder.add_edge("retrieve", "prune")
    builder.add_edge("prune", "verify")
    builder.add_conditional_edges("verify", adapt)
    builder.add_conditional_edges("rag_extract", after_extract)
    builder.add_edge("settle", "rag_generate")
    add_answer_step(builder, "rag_generate")
    builder.add_edge("closed_book", REPLY)
    return builder.compile(name="diva")


graph = build()
