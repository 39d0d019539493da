"""SUNAR (Venktesh et al., NAACL 2025): Self-Ask decomposition, Neighbourhood Aware Retrieval with Answer
Semantic Uncertainty feedback per sub-question, and a Meta Evidence Reasoner over the whole reasoning path.

decompose → nar_retrieve → answer_sub → decompose … → meta_reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from agent.chat import REPLY, add_chat_io
from agent.context import RunContext, context_of
from agent.llm.calls import LLMOptions, Reply, aask, ask, gather_concurrently, run_concurrently
from agent.llm.parsing import parse_final_answer, parse_self_ask, parse_short_answer
from agent.nodes import llm_node
from agent.retrieval.nar import neighbourhood_rerank
from agent.retrieval.pipeline import FirstStage
from agent.retrieval.rerank import rerank
from agent.retrieval.scorers import DEFAULT_RERANKER, get_scorer
from agent.schemas import Passage
from agent.state import AnswerOutput, QuestionInput, RunState
from agent.steps.equivalence import Equivalence, get_equivalence, semantic_sets
from agent.text import normalize_answer, render_passages, states_nothing, supporting_ids

UNKNOWN = "unknown"


class SunarContext(RunContext):
    max_hops: int = Field(
        default=10, ge=1, le=20, description="safety limit on sub-questions (official Self-Ask: none)"
    )
    r0_from: Literal["question", "sub_question"] = Field(
        default="question",
        description="what R0 is retrieved for; each sub-question scores it (official code: question)",
    )
    nar: bool = Field(default=True, description="NAR's neighbour frontier; off: R0 and the re-ranker only (ablation)")
    mer: bool = Field(default=True, description="the Meta Evidence Reasoner; off: Self-Ask's own answer (ablation)")
    mer_per_hop: int = Field(
        default=2, ge=1, le=50, description="each hop's top passages MER re-ranks for the question (official code: 2)"
    )
    mer_question_k: int = Field(
        default=0,
        ge=0,
        le=50,
        description="MER's pool also takes the question's own top passages, R0 re-ranked for it (official code: 0; "
        "for a decomposition that asks about one part of the question only)",
    )
    mer_samples: int = Field(
        default=1,
        ge=1,
        le=20,
        description="MER answers: the first at the run's temperature, the rest at asu_temperature; the answer is the "
        "largest semantic set's (self-consistency, commented out in the official code); 1: one answer",
    )
    first_stage: FirstStage = Field(default="bm25", description="R0's retriever: sparse, the complement of G's dense")
    first_stage_k: int = Field(default=100, ge=1, le=1000, description="depth of the first-stage ranking R0")
    neighbours_k: int = Field(default=10, ge=1, le=100, description="neighbours per passage in the graph G")
    batch_size: int = Field(default=16, ge=1, le=128, description="NAR batch size b")
    budget: int = Field(default=100, ge=1, le=1000, description="NAR re-ranking budget c")
    reranker: str = Field(  # type: ignore[assignment]  # any registered scorer's name, beyond the pipeline's three
        default=DEFAULT_RERANKER,
        description="NAR's scorer: cross-encoder | colbert (agent.retrieval.scorers.register_scorer adds more)",
    )
    asu: bool = Field(
        default=False,
        description="re-score each NAR batch by Answer Semantic Uncertainty (Eq. 5; the paper's default); off: measured, "
        "with a 1.5B reader it changed MER's passages in 6 of 50 HotpotQA questions at 13.5x the seconds",
    )
    samples: int = Field(
        default=10, ge=1, le=20, description="answers m sampled per batch for ASU (Eq. 2; official: 10)"
    )
    asu_temperature: float = Field(
        default=0.3, ge=0, le=2, description="sampling temperature of the ASU answers and of MER's further samples"
    )
    asu_style: Literal["reasoned", "short"] = Field(
        default="reasoned",
        description="ASU samples reason step by step before the answer line (official code); or the short answer alone",
    )
    equivalence: str = Field(
        default="token",
        description="bidirectional entailment of two sampled answers: token (normalised tokens, no calls; the 1.5B "
        "model as judge merges different answers, notes/2026-11-sunar-hotpotqa.md) | llm | nli:/path/to/model (the paper's NLI)",
    )
    answer_top_k: int = Field(default=10, ge=1, le=50, description="top-l passages that answer a sub-question")
    evidence_k: int = Field(default=10, ge=1, le=50, description="evidence kept by the Meta Evidence Reasoner")
    passage_words: int = Field(default=100, ge=20, le=1000, description="words of each passage shown to the LLM")
    answer_tokens: int = Field(default=48, ge=8, le=512, description="max tokens of a sub-question, short answer")
    answer_style: Literal["reasoned", "short"] = Field(
        default="reasoned",
        description="sub-answers and the final answer reason step by step, then a final line (official code); or short",
    )
    reasoning_tokens: int = Field(default=250, ge=32, le=2048, description="max tokens of a reasoned answer")

    def short_options(self, temperature: float | None = None) -> LLMOptions:
        """Options for the short calls: sub-questions and factoid answers."""
        temperature = self.temperature if temperature is None else temperature
        return replace(self.llm_options(), temperature=temperature, max_tokens=self.answer_tokens)

    def answering(self, prompt: str) -> tuple[str, LLMOptions, Callable[[str], str]]:
        """The prompt, options and parser of an answer (a sub-answer or MER's) in the run's ``answer_style``."""
        if self.answer_style == "short":
            return f"{prompt}_short", self.short_options(), parse_short_answer
        return prompt, replace(self.llm_options(), max_tokens=self.reasoning_tokens), parse_final_answer


class Hop(BaseModel):
    """One step of the reasoning path: (sq_i, sa_i, R_i) in the paper's decomposition."""

    sub_question: str
    answer: str
    reasoning: str = Field(default="", description="the answer's step-by-step reasoning ('' for a short answer)")
    evidence_ids: list[str] = Field(default_factory=list, description="top-l passages the answer came from")
    supporting_ids: list[str] = Field(default_factory=list, description="those of them that contain the answer")
    semantic_sets: list[int] = Field(default_factory=list, description="ASU semantic sets s of each NAR batch")
    frontier_passages: int = Field(default=0, description="passages of R+ that came from the neighbour frontier")


class SunarOutput(AnswerOutput, total=False):
    hops: list[Hop]  # the reasoning path; SUNAR returns no disambiguations
    reasoning: str  # MER's step-by-step reasoning behind the answer ('' for a short answer or without MER)


class SunarState(QuestionInput, SunarOutput, RunState, total=False):
    sub_question: str  # the pending sub-question; '' once decompose stops
    draft_answer: str  # Self-Ask's own final answer, the fallback of meta_reason
    ranked: list[Passage]  # R+ of the pending sub-question, best first
    nar_batches: list[dict]  # source, ids and semantic sets of each NAR batch of the pending sub-question
    evidence: list[Passage]  # the top-l passages of every sub-question so far, for the Meta Evidence Reasoner


def _self_ask_path(path: list[Hop]) -> str:
    return "\n".join(f"Follow up: {h.sub_question}\nIntermediate answer: {h.answer}" for h in path) or "(none)"


def _facts(path: list[Hop]) -> str:
    return "\n".join(f"{h.sub_question} {h.answer}" for h in path) or "(none)"


async def decompose(state: SunarState, runtime: Runtime[SunarContext]) -> dict:
    ctx = context_of(runtime, SunarContext)
    path = state.get("hops", [])
    if len(path) >= ctx.max_hops:
        return {"sub_question": ""}
    fallback = (False, "") if path else (True, state["question"])  # unusable output: stop, or retrieve for the question
    reply = await aask(
        "sunar_decompose", ctx.short_options(), parse=parse_self_ask, fallback=fallback,
        question=state["question"], path=_self_ask_path(path),
    )  # fmt: skip
    follow_up, text = reply.value
    asked = {normalize_answer(h.sub_question) for h in path}
    if not follow_up and not path:  # Self-Ask answered without evidence: retrieve for the question itself
        return {"sub_question": state["question"], "draft_answer": text}
    if not follow_up or normalize_answer(text) in asked:  # done, or going round in circles
        return {"sub_question": "", "draft_answer": "" if follow_up else text}
    return {"sub_question": text}


def after_decompose(state: SunarState) -> Literal["nar_retrieve", "meta_reason"]:
    return "nar_retrieve" if state.get("sub_question") else "meta_reason"


def _draw(options: LLMOptions, i: int) -> LLMOptions:
    """``options`` for the i-th of several samples of one prompt: each its own seed, so m draws, not one draw m times."""
    return options if options.seed is None else replace(options, seed=options.seed + 100 * i)


def _sample_answers(sub_question: str, batch: list[Passage], path: list[Hop], ctx: SunarContext) -> list[Reply[str]]:
    """Eq. 2: m answers to the sub-question from the batch alone, sampled at ``asu_temperature``: each reasons step by
    step and ends on its answer line, as the official code samples them (``asu_style=short``: the answer alone)."""
    if ctx.asu_style == "reasoned":
        prompt, parse = "sunar_answer_sub", parse_final_answer
        options = replace(ctx.llm_options(), temperature=ctx.asu_temperature, max_tokens=ctx.reasoning_tokens)
    else:
        prompt, parse, options = "sunar_answer_sub_short", parse_short_answer, ctx.short_options(ctx.asu_temperature)
    passages = render_passages(batch, ctx.passage_words)

    def sample(i: int) -> Reply[str]:
        return ask(
            prompt, _draw(options, i), parse=parse, fallback=UNKNOWN,
            passages=passages, path=_facts(path), question=sub_question,
        )  # fmt: skip

    return run_concurrently(sample, range(ctx.samples), ctx.max_concurrency)


async def nar_retrieve(state: SunarState, runtime: Runtime[SunarContext]) -> dict:
    """NAR with ASU feedback, on a worker thread: its LLM samples are asked from inside the re-ranking loop's
    callback (they stay concurrent there)."""
    return await asyncio.to_thread(nar_rerank, state, context_of(runtime, SunarContext))


def nar_rerank(state: SunarState, ctx: SunarContext) -> dict:
    """R+ of the pending sub-question and its NAR batches (the bench runs it too, inside ``node_calls``)."""
    store = ctx.store()
    sub_question = state["sub_question"]
    query = state["question"] if ctx.r0_from == "question" else sub_question
    r0 = ctx.pool(query, ctx.first_stage_k, ctx.first_stage)  # first stage R0
    sampled: list[list[str]] = []  # each batch's sampled answers, in batch order
    equivalence = get_equivalence(ctx.equivalence, ctx.llm_options())

    def answer_semantic_sets(batch: list[Passage]) -> float:  # Algorithm 1 lines 6–7
        sampled.append([r.value for r in _sample_answers(sub_question, batch, state.get("hops", []), ctx)])
        return float(len(semantic_sets(sub_question, sampled[-1], equivalence)))

    result = neighbourhood_rerank(
        sub_question,
        r0,
        (lambda batch: store.neighbours(batch, ctx.neighbours_k)) if ctx.nar else (lambda batch: {}),
        get_scorer(ctx.reranker),
        batch_size=ctx.batch_size,
        budget=ctx.budget,
        rescore=answer_semantic_sets if ctx.asu else None,
    )
    batches = [
        {"source": b.source, "ids": b.ids, "semantic_sets": int(b.divisor)}
        | ({"answers": sampled[i]} if ctx.asu else {})
        for i, b in enumerate(result.batches)
    ]
    return {"ranked": result.ranked, "nar_batches": batches}


async def answer_sub(state: SunarState, runtime: Runtime[SunarContext]) -> dict:
    ctx = context_of(runtime, SunarContext)
    top = state["ranked"][: ctx.answer_top_k]
    path = state.get("hops", [])
    prompt, options, parse = ctx.answering("sunar_answer_sub")
    reply = await aask(
        prompt, options, parse=parse, fallback=UNKNOWN,
        passages=render_passages(top, ctx.passage_words), path=_facts(path), question=state["sub_question"],
    )  # fmt: skip
    frontier = {pid for b in state.get("nar_batches", []) if b["source"] == "frontier" for pid in b["ids"]}
    hop = Hop(
        sub_question=state["sub_question"],
        answer=reply.value,
        reasoning=reply.reasoning,
        evidence_ids=[p.id for p in top],
        semantic_sets=[b["semantic_sets"] for b in state.get("nar_batches", [])] if ctx.asu else [],
        frontier_passages=sum(p.id in frontier for p in state["ranked"]),
        supporting_ids=supporting_ids(reply.value, top),
    )
    return {"hops": path + [hop], "evidence": state.get("evidence", []) + top}


async def meta_reason(state: SunarState, runtime: Runtime[SunarContext]) -> dict:
    """MER: the top ``mer_per_hop`` passages of every hop (and, as an option, the question's own top
    ``mer_question_k``), re-ranked against the original question; the top ``evidence_k`` of them and the reasoning
    path give the answer. Off: Self-Ask's own answer, no call."""
    ctx = context_of(runtime, SunarContext)
    path = state.get("hops", [])
    fallback = state.get("draft_answer") or (path[-1].answer if path else UNKNOWN)
    by_id = {p.id: p for p in state.get("evidence", [])}
    pool = list({i: by_id[i] for hop in path for i in hop.evidence_ids[: ctx.mer_per_hop] if i in by_id}.values())
    if not ctx.mer:
        return {"answer": fallback, "reasoning": "", "passages": pool, "retrieved": pool}

    def best_first() -> list[Passage]:  # every hop's evidence; on a worker thread (the scorer may load its model)
        scorer = get_scorer(ctx.reranker)
        if ctx.mer_question_k:
            r0 = ctx.pool(state["question"], ctx.first_stage_k, ctx.first_stage)
            own = rerank(state["question"], r0, ctx.mer_question_k, scorer)
            candidates = list({p.id: p for p in pool + own}.values())
        else:
            candidates = pool
        return rerank(state["question"], candidates, len(candidates), scorer)

    ranked = await asyncio.to_thread(best_first)
    evidence = ranked[: ctx.evidence_k]
    prompt, options, parse = ctx.answering("sunar_meta_reason")
    call: dict[str, Any] = {"passages": render_passages(evidence, ctx.passage_words), "path": _self_ask_path(path)}

    async def sample(i: int) -> tuple[str, str]:  # the first at the run's options; the others at asu_temperature
        seeded = options if i == 0 else _draw(replace(options, temperature=ctx.asu_temperature), i)
        reply = await aask(prompt, seeded, parse=parse, fallback=fallback, question=state["question"], **call)
        return reply.value, reply.reasoning

    drawn = await gather_concurrently(sample, range(ctx.mer_samples), ctx.max_concurrency)
    answer = drawn[0][0]
    if len(drawn) > 1:  # a vote: only then is a judge (an NLI model, the LLM) wanted
        equivalence = get_equivalence(ctx.equivalence, ctx.llm_options())
        answer = consistent_answer(state["question"], [a for a, _ in drawn], equivalence)
    reasoning = next(r for a, r in drawn if a == answer)  # that of the answer's first draw
    return {"answer": answer, "reasoning": reasoning, "passages": evidence, "retrieved": ranked}


def consistent_answer(question: str, answers: list[str], equivalence: Equivalence) -> str:
    """The first answer of the largest semantic set (the earliest set on a tie, so one answer is itself), among the
    answers that state something ("not specified" and "unknown" do not vote, as in the official code's
    self-consistency) unless none does."""
    voting = [a for a in answers if not states_nothing(a)] or answers
    return max(semantic_sets(question, voting, equivalence), key=len)[0]


builder = StateGraph(SunarState, input_schema=QuestionInput, output_schema=SunarOutput, context_schema=SunarContext)
builder.add_node("decompose", llm_node(decompose))
builder.add_node("nar_retrieve", llm_node(nar_retrieve))
builder.add_node("answer_sub", llm_node(answer_sub))
builder.add_node("meta_reason", llm_node(meta_reason))
add_chat_io(builder, "decompose")
builder.add_conditional_edges("decompose", after_decompose)
builder.add_edge("nar_retrieve", "answer_sub")
builder.add_edge("answer_sub", "decompose")
builder.add_edge("meta_reason", REPLY)
graph = builder.compile(name="sunar")
