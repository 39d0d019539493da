"""MADAM-RAG (Wang et al. 2025, "Retrieval-Augmented Generation with Conflicting Evidence"), as the official code
(HanNight/RAMDocs ``run_madam_rag.py``) runs it: one agent per document answers from that document alone; in each
later round every agent also reads all agents' previous replies; an aggregator that sees only the replies keeps every
correct answer with an explanation; the debate stops when no agent's answer changes, or after ``rounds``.

Two defects of the official code are fixed: a single round returns its own aggregation (the official returns none),
and an empty answer never counts as unchanged (the official's substring test calls "" unchanged against anything).
The replies of the last round sit in the shared part of every agent's prompt and the agent's own document comes last,
so the agents of a round share one prefix (``prompts/madam_debate.txt``). ``wording="official"`` runs the official
code's instructions instead (in our words): a debating agent answers from its document and the other agents' replies,
which it reads without its own, and the aggregator is not told which answers to leave out (notes/2026-12-madam-official.md).

retrieve → agents → (unchanged since the last round? finish) → aggregate → (rounds left? agents) → finish
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from agent.chat import REPLY, add_chat_io
from agent.context import RunContext, TopK, context_of
from agent.llm.calls import Reply, aask, gather_concurrently
from agent.llm.parsing import parse_agent_reply, parse_aggregation
from agent.llm.prompts import load_preface
from agent.nodes import llm_node
from agent.schemas import Passage
from agent.state import AnswerOutput, QuestionInput, RunState
from agent.text import normalize_answer, passage_text

UNKNOWN = "unknown"
Wording = Literal["ours", "official"]


class MadamContext(TopK, RunContext):
    temperature: float = Field(default=0.0, ge=0, le=2, description="sampling temperature (official code: greedy)")
    max_tokens: int = Field(default=128, ge=16, le=4096, description="max tokens per reply (official code: 128)")
    rounds: int = Field(default=3, ge=1, le=10, description="most debate rounds (official code: 3)")
    wording: Wording = Field(
        default="ours",
        description="ours: agents keep an answer their document supports and read every reply from a shared prefix, "
        "the aggregator leaves out answers other agents show wrong; official: the official code's instructions (an "
        "agent answers from its document and the other agents' replies, without its own)",
    )


class AgentTurn(BaseModel):
    document_id: str
    reply: str = Field(description="the agent's reply as written (what the next round reads)")
    answer: str = Field(description="its answer; '' when the reply stayed unusable")


class DebateRound(BaseModel):
    turns: list[AgentTurn]
    answers: list[str] | None = Field(default=None, description="the aggregator's answers; None: not aggregated")
    explanation: str = ""


class SupportedAnswer(BaseModel):
    answer: str
    passage_ids: list[str] = Field(description="documents whose agent's last answer is this one")


class MadamOutput(AnswerOutput, total=False):
    answers: list[SupportedAnswer]  # every answer the aggregator kept, with the documents behind it
    rejected_ids: list[str]  # documents whose agent's last answer is none of them (misinformation, noise, nothing)
    rounds: list[DebateRound]
    stop_reason: Literal["converged", "rounds", "no documents"]


class MadamState(QuestionInput, MadamOutput, RunState, total=False):
    pass


def retrieve(state: MadamState, runtime: Runtime[MadamContext]) -> dict:
    ctx = context_of(runtime, MadamContext)
    documents = list(ctx.passages or []) or ctx.search(state["question"], ctx.top_k)  # given ones in their order
    return {"passages": documents, "retrieved": documents, "rounds": []}


def _replies(turns: list[AgentTurn], leave_out: int = 0) -> str:
    """The replies numbered by agent, without agent ``leave_out``'s (1-based; 0 leaves none out)."""
    return "\n".join(f"Agent {i}: {turn.reply}" for i, turn in enumerate(turns, 1) if i != leave_out)


def _prompt(step: str, wording: Wording) -> str:
    return f"madam_{step}" if wording == "ours" else f"madam_{step}_official"


async def agents(state: MadamState, runtime: Runtime[MadamContext]) -> dict:
    """One round: every agent answers from its document, after the previous round's replies when there is one (with
    ``wording="official"``, the other agents' replies only)."""
    ctx = context_of(runtime, MadamContext)
    options, rounds, official = ctx.llm_options(), state["rounds"], ctx.wording == "official"
    prompt = _prompt("debate" if rounds else "agent", ctx.wording)

    async def answer(numbered: tuple[int, Passage]) -> Reply[tuple[str, str]]:
        number, document = numbered
        extra: dict[str, Any] = {}
        if rounds:
            extra["replies"] = _replies(rounds[-1].turns, leave_out=number if official else 0)
            if not official:
                extra["number"] = str(number)
        return await aask(
            prompt, options, parse=parse_agent_reply, fallback=("", ""),
            question=state["question"], document=passage_text(document), **extra,
        )  # fmt: skip

    documents = state["passages"]
    replies = await gather_concurrently(answer, list(enumerate(documents, 1)), ctx.max_concurrency)
    turns = [AgentTurn(document_id=d.id, reply=r.text.strip(), answer=r.value[0]) for d, r in zip(documents, replies)]
    return {"rounds": [*rounds, DebateRound(turns=turns)]}


def unchanged(previous: list[AgentTurn], current: list[AgentTurn]) -> bool:
    """Every agent kept its answer (one contains the other once normalised, as the official test); an empty answer
    is never unchanged."""
    return all(_same(before.answer, now.answer) for before, now in zip(previous, current, strict=True))


def after_agents(state: MadamState) -> Literal["aggregate", "finish"]:
    rounds = state["rounds"]
    return "finish" if len(rounds) > 1 and unchanged(rounds[-2].turns, rounds[-1].turns) else "aggregate"


async def aggregate(state: MadamState, runtime: Runtime[MadamContext]) -> dict:
    """The aggregator reads only the agents' replies; unusable output falls back to every answer an agent gave."""
    ctx = context_of(runtime, MadamContext)
    rounds = state["rounds"]
    turns = rounds[-1].turns
    given = list(dict.fromkeys(t.answer for t in turns if t.answer and normalize_answer(t.answer) != UNKNOWN))
    reply = await aask(
        _prompt("aggregate", ctx.wording), ctx.llm_options(), parse=parse_aggregation, fallback=(given, ""),
        question=state["question"], replies=_replies(turns), example=load_preface("madam_example"),
    )  # fmt: skip
    answers, explanation = reply.value
    return {"rounds": [*rounds[:-1], rounds[-1].model_copy(update={"answers": answers, "explanation": explanation})]}


def after_aggregate(state: MadamState, runtime: Runtime[MadamContext]) -> Literal["agents", "finish"]:
    return "agents" if len(state["rounds"]) < context_of(runtime, MadamContext).rounds else "finish"


def after_retrieve(state: MadamState) -> Literal["agents", "finish"]:
    return "agents" if state["passages"] else "finish"


def finish(state: MadamState) -> dict:
    """The last aggregation (after a converged round, the one before it), each answer with the documents whose agent
    gave it last, and the documents that back none of them."""
    rounds = state.get("rounds", [])
    if not rounds:
        return {"answer": "No documents to read.", "answers": [], "rejected_ids": [], "stop_reason": "no documents"}
    final = next(r for r in reversed(rounds) if r.answers is not None)
    last = rounds[-1].turns
    supported = [
        SupportedAnswer(answer=answer, passage_ids=[t.document_id for t in last if _same(t.answer, answer)])
        for answer in final.answers or []
    ]
    backed = {i for s in supported for i in s.passage_ids}
    text = "; ".join(s.answer for s in supported) or "None of the documents answers the question"
    return {
        "answer": f"{text}. {final.explanation}".strip(),
        "answers": supported,
        "rejected_ids": [t.document_id for t in last if t.document_id not in backed],
        "stop_reason": "converged" if rounds[-1].answers is None else "rounds",
    }


def _same(a: str, b: str) -> bool:
    a, b = normalize_answer(a), normalize_answer(b)
    return bool(a and b) and (a in b or b in a)


builder = StateGraph(MadamState, input_schema=QuestionInput, output_schema=MadamOutput, context_schema=MadamContext)
builder.add_node("retrieve", retrieve)
builder.add_node("agents", llm_node(agents))
builder.add_node("aggregate", llm_node(aggregate))
builder.add_node("finish", finish)
add_chat_io(builder, "retrieve")
builder.add_conditional_edges("retrieve", after_retrieve)
builder.add_conditional_edges("agents", after_agents)
builder.add_conditional_edges("aggregate", after_aggregate)
builder.add_edge("finish", REPLY)
graph = builder.compile(name="madam")
