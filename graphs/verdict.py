"""VerDICt (Lee et al.): verified diversification with consolidation (Section 4, Algorithm 1).

relax (I_R) → retrieve the universe U once → execute I_E on every passage alone, concurrently (a grounded
interpretation and its answer, or null) → consolidate (HDBSCAN over "question answer" embeddings, one medoid
per cluster) → answer, citing the passage that grounds each interpretation.
"""

from __future__ import annotations

import re
from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from agent.context import RunContext, context_of
from agent.llm.calls import LLMOptions, Reply, aask, gather_concurrently
from agent.llm.parsing import parse_execution, parse_query, sentences
from agent.llm.prompts import demonstration
from agent.nodes import llm_node
from agent.retrieval.embeddings import embed
from agent.schemas import Disambiguation, Execution, Passage, QAPair
from agent.state import AnswerOutput, QuestionInput
from agent.steps import conflict
from agent.steps.conflict import Conflict, SettleOptions
from agent.steps.consolidation import hdbscan_labels, representatives
from agent.steps.rac import (
    completed,
    render_pairs,
    rephrased,
    restated,
    statements,
    whole_answer,
    written_from_pairs,
)
from agent.text import (
    COPY_LIMIT,
    contains_answer,
    copied_runs,
    longest_copied_run,
    passage_text,
    render_passages,
    stated_in,
    states_nothing,
    unborrowed,
    uncopied,
    without_question_talk,
)


class VerdictContext(SettleOptions, RunContext):
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
    append_uncited: bool = Field(
        default=False,
        description="append each disambiguation the answer failed to cite to its text (off, as in the paper)",
    )
    grounded_answers: bool = Field(
        default=True,
        description="drop a candidate whose passage does not state its answer (I_E's rule that the answer comes from "
        "the passage, checked by string: agent.text.stated_in; ours, not the paper's: docs/evaluation.md)",
    )
    complete_readings: bool = Field(
        default=True,
        description="add sentences, written from the pairs, for the disambiguations whose short answer the answer "
        "leaves out (as ToC does; ours, not the paper's: on RAMDocs, docs/evaluation.md)",
    )


class VerdictOutput(AnswerOutput, total=False):
    relaxed_query: str  # Eq. 6
    candidates: list[Disambiguation]  # Algorithm 1 lines 5–9: one per non-abstaining passage, citing it, by rank
    abstentions: int  # passages whose I_E reply was null, or an answer saying the passage has none
    unparsed: int  # passages whose I_E reply stayed unusable after retries (also dropped)
    ungrounded: int  # with grounded_answers: replies whose answer their passage does not state (also dropped)
    cluster_labels: list[int]  # HDBSCAN label per candidate; -1 = outlier
    conflicts: list[Conflict]  # with settle_conflicts: the answers that disagreed and what was dropped
    uncited: int  # disambiguations the answer did not cite (appended to it with append_uncited)


class VerdictState(QuestionInput, VerdictOutput, total=False):
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
    behind only them leave."""
    ctx = context_of(runtime, VerdictContext)
    candidates, passages, conflicts = await conflict.settle(
        state["question"],
        state["candidates"],
        state["passages"],
        ctx.llm_options(),
        ctx.max_concurrency,
        ctx.settle_by,
        ctx.judge_both_orders,
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
    ctx = context_of(runtime, VerdictContext)
    passages, pairs = state["passages"], state["disambiguations"]
    disputed = conflict.disputes(state.get("conflicts", []))
    if disputed and not pairs:  # every reading was left undecided: report the disagreement, assert nothing
        return {"answer": disputed, "uncited": 0}
    number = {p.id: i for i, p in enumerate(passages, 1)}  # citation [n] = n-th passage of the result
    cited = sorted({number[d.passage_ids[0]] for d in pairs}) or list(range(1, len(passages) + 1))
    cited = cited[: ctx.answer_passages]  # bounded context; every pair still carries its citation
    cite = [f"[{number[d.passage_ids[0]]}]" for d in pairs]
    shown = [d.model_copy(update={"answer": f"{d.answer} {c}"}) for d, c in zip(pairs, cite)]
    fallback = {"fallback": listed(shown)} if shown else {}
    if ctx.answer_from == "disambiguations" and shown:
        prompt, evidence = "verdict_answer_disambiguations", {}
    else:
        prompt, evidence = (
            "verdict_answer",
            {"passages": render_passages([passages[n - 1] for n in cited], numbers=cited)},
        )
    call = {**evidence, "question": state["question"], "disambiguations": render_pairs(one_per_question(shown))}
    # the answer states facts with their citations; it never narrates its passages nor quotes them at length
    reply = whole_answer(await aask(prompt, ctx.llm_options(), parse=statements, **fallback, **call))
    answers = [d.answer for d in pairs]
    reply = await restated(reply, answers, prompt, call, ctx.llm_options())
    if ctx.complete_readings:  # no casebook (book ""), so there is no example to borrow from and no grounds to check
        done = await completed(reply, pairs, "", state["question"], ctx.llm_options(), held=[])
        reply = done.with_value(cited_additions(reply.value, done.value, pairs, cite))
    text, sources = reply.value, [p.full_text for p in passages]
    if copied := copied_runs(text, sources, COPY_LIMIT):
        again = await rephrased(reply, copied, sources, answers, prompt, call, ctx.llm_options())
        kept = whole_answer(again).value if again.value else uncopied(text, sources, answers)
        if not kept and pairs:
            kept = await from_pairs(state["question"], pairs, shown, sources, ctx.llm_options())
        text = kept or text
    # a sentence carrying a name or number of the prompt's example that nothing read holds was copied from it
    read = [*sources, state["question"], render_pairs(pairs)]
    text = unborrowed(text, demonstration(prompt), read) or fallback.get("fallback", text)
    text = without_question_talk(text, answers) or text  # "The question … can be read as asking about …": no reading
    missing = [f"{d.question} {d.answer}." for d, c in zip(shown, cite) if c not in text]
    answer = " ".join([text, *missing]) if ctx.append_uncited else text
    return {"answer": " ".join(filter(None, [answer, disputed])), "uncited": len(missing)}


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


def listed(pairs: list[Disambiguation]) -> str:
    """The pairs as sentences, a question once with all its answers: "Who sings Wake Me Up? Avicii [1]; Aloe Blacc [4]."."""
    return " ".join(f"{p.question} {p.answer}." for p in one_per_question(pairs))


def cited_additions(before: str, after: str, pairs: list[Disambiguation], cite: list[str]) -> str:
    """``after`` (``before`` with the readings it left out appended, uncited) with each appended sentence citing the
    passages of the pairs whose answer it states: the readings written from the pairs name their passages too."""
    if after == before or not after.startswith(before):
        return after
    split = len(before) + len(re.match(r"[.!?]?", after[len(before) :])[0])  # the stop given to ``before``
    added = [
        re.sub(r"[.!?]?$", lambda end: " " + " ".join(marks) + end[0], sentence, count=1)
        if (marks := [c for d, c in zip(pairs, cite) if contains_answer(sentence, d.answer) and c not in sentence])
        else sentence
        for sentence in sentences(after[split:])
    ]
    return " ".join([after[:split], *added]).strip()


async def from_pairs(
    question: str, pairs: list[Disambiguation], shown: list[Disambiguation], sources: list[str], options: LLMOptions
) -> str:
    """The answer when every rephrasing still quotes a passage and cutting the quotes would lose a reading (the model
    pasting whole passages): written from the pairs alone (``rac.written_from_pairs``, citations kept, no casebook and
    no passages to copy), cut below ``COPY_LIMIT``; else the ``shown`` pairs (cited) listed, less those whose answer is
    itself a quote."""
    fresh = await written_from_pairs(question, render_pairs(shown), pairs, options, book="")
    if fresh.value and (kept := uncopied(whole_answer(fresh).value, sources, [d.answer for d in pairs])):
        return kept
    return listed([d for d in shown if longest_copied_run(d.answer, sources) < COPY_LIMIT])


builder = StateGraph(
    VerdictState, input_schema=QuestionInput, output_schema=VerdictOutput, context_schema=VerdictContext
)
builder.add_node("relax", llm_node(relax))
builder.add_node("retrieve", retrieve)
builder.add_node("execute", llm_node(execute))
builder.add_node("settle", llm_node(settle))
builder.add_node("consolidate", consolidate)
builder.add_node("answer", llm_node(answer))
builder.add_edge(START, "relax")
builder.add_edge("relax", "retrieve")
builder.add_edge("retrieve", "execute")
builder.add_conditional_edges("execute", after_execute)
builder.add_edge("settle", "consolidate")
builder.add_edge("consolidate", "answer")
builder.add_edge("answer", END)
graph = builder.compile(name="verdict")
