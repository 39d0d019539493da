"""The answer step every long-answer method ends with, as graph nodes: the method's draft → ``check_answer`` →
(``revise_answer`` → ``check_answer``)… → ``finish_answer``.

The method's own node writes the first draft (rag's and DIVA's ``rag_generate``, ToC's ``generate``, VerDICt's
``answer``) and hands over what the checks read (``drafted``). ``check_answer`` runs the run's ``answer_checks``
(``agent.steps.checks``) on the newest draft. A failed check sends the draft back to the model in its own conversation
with what failed (``revise_answer``), at most ``answer_revisions`` times. ``finish_answer`` keeps the draft that fails
fewest checks (then the one stating most readings, then the newest) and meets what it still fails with the fallback:

- sentences that talk about the sources, say there is no answer, or state a figure only the worked examples hold are
  left out where other sentences remain, and the readings only they stated are listed after the rest;
- a draft that says nothing usable is replaced by the readings listed ("Question? Answer.");
- with ``incomplete`` checked, the readings the answer leaves out are listed after it.

Then it cites by code: after each sentence, the passages of the readings it states (``[n]`` is the n-th passage the
answer read), whatever marks the model wrote. No part of a sentence the model wrote is rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict

from agent.chat import REPLY
from agent.context import RunContext, context_of
from agent.llm.calls import OutputError, Reply, aask
from agent.llm.parsing import parse_answer, sentences, whole_sentences
from agent.nodes import llm_node
from agent.schemas import Disambiguation, Passage
from agent.state import AnswerOutput
from agent.steps import conflict
from agent.steps.checks import CHECKS, Check, Grounds, Reading, borrowed, failures, narrates, says_nothing
from agent.text import normalize_answer, without_citations

Fallback = Literal["dropped_sentences", "listed_readings", "appended_readings"]


def checks_option(*checks: Check) -> Any:
    """The ``answer_checks`` field with a method's own default (``AnswerOptions`` states what differs and why)."""
    return Field(
        default=list(checks),
        description="checks a draft answer must pass; a failed one sends it back to the model with what failed "
        f"({', '.join(CHECKS)}; docs/answers.md)",
    )


class AnswerOptions(RunContext):
    """The answer step's options, declared once for every method that writes a long answer. ``incomplete`` is on
    where many readings reach the answer (ToC's tree, VerDICt's clusters) and off for rag and DIVA, whose few pairs the
    draft keeps (docs/answers.md)."""

    answer_checks: list[Check] = checks_option("narrates", "states_nothing", "borrows")
    answer_revisions: int = Field(
        default=1,
        ge=0,
        le=3,
        description="times a draft that fails a check goes back to the model with what failed; then the documented "
        "fallback (docs/answers.md)",
    )
    citations: bool = Field(
        default=True, description="after each sentence, cite the passages of the readings it states (by code)"
    )

    @field_validator("answer_checks", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        """``narrates,borrows`` as the CLI's ``--set`` writes it, '' for none."""
        return [c.strip() for c in value.split(",") if c.strip()] if isinstance(value, str) else value


class Draft(BaseModel):
    text: str = Field(description="the answer as the model wrote it, less an echoed label or a cut-off last sentence")
    reply: str = Field(description="the model's reply, as the conversation holds it")
    failed: dict[Check, str] = Field(default_factory=dict, description="the checks it failed, with what failed")


class AnswerReview(BaseModel):
    """What the answer step did: the checks it ran, what the first draft failed, the revisions, what the kept draft
    still failed and the fallback that met it."""

    checks: list[Check] = Field(default_factory=list)
    fired: list[Check] = Field(default_factory=list, description="checks the first draft failed")
    revisions: int = 0
    failed: list[Check] = Field(default_factory=list, description="checks the kept draft still failed")
    fallback: list[Fallback] = Field(default_factory=list)
    unstated: int = Field(default=0, description="readings with a short answer that the answer does not state")

    def figures(self) -> dict[str, int]:
        """One number per check and fallback (0 or 1) and the revisions: their means over questions are rates."""
        return {
            **{f"fired.{c}": int(c in self.fired) for c in self.checks},
            **{f"failed.{c}": int(c in self.failed) for c in self.checks},
            **{
                f"fallback.{f}": int(f in self.fallback)
                for f in ("dropped_sentences", "listed_readings", "appended_readings")
            },
            "revisions": self.revisions,
            "unstated": self.unstated,
        }


class AnswerStepState(TypedDict, total=False):
    answer_prompt: list[AnyMessage]  # the messages that asked for the first draft, continued by each revision
    drafts: list[Draft]
    foreign_figures: list[str]  # figures of the worked examples that nothing the answer read holds


class ReviewedOutput(AnswerOutput, total=False):
    answer_review: AnswerReview


def answer_text(reply: Reply[str]) -> str:
    """A draft's text: a reply cut at its token cap ends with its last whole sentence."""
    return whole_sentences(reply.value) if reply.truncated else reply.value


def drafted(reply: Reply[str], foreign: Collection[str] = ()) -> dict[str, Any]:
    """The update of the node that wrote the first draft: the draft, its conversation, and the figures of its worked
    examples that nothing it read holds (``agent.steps.checks.foreign_figures``)."""
    return {
        "drafts": [Draft(text=answer_text(reply), reply=reply.text)],
        "answer_prompt": list(reply.prompt),
        "foreign_figures": sorted(foreign),
    }


def _grounds(state: dict[str, Any]) -> Grounds:
    readings = tuple(Reading.of(p) for p in state.get("disambiguations", []))
    return Grounds(readings=readings, foreign_figures=frozenset(state.get("foreign_figures", [])))


def check_answer(state: dict[str, Any], runtime: Runtime[AnswerOptions]) -> dict[str, Any]:
    """Run the run's checks on the newest draft."""
    drafts = list(state.get("drafts", []))
    if not drafts:
        return {}
    enabled = context_of(runtime, AnswerOptions).answer_checks
    drafts[-1] = drafts[-1].model_copy(update={"failed": failures(drafts[-1].text, _grounds(state), enabled)})
    return {"drafts": drafts}


def after_check(state: dict[str, Any], runtime: Runtime[AnswerOptions]) -> Literal["revise_answer", "finish_answer"]:
    drafts = state.get("drafts", [])
    rounds_left = len(drafts) <= context_of(runtime, AnswerOptions).answer_revisions
    return "revise_answer" if drafts and drafts[-1].failed and rounds_left else "finish_answer"


async def revise_answer(state: dict[str, Any], runtime: Runtime[AnswerOptions]) -> dict[str, Any]:
    """The newest draft back to the model in its own conversation (its prefix is cached), told what failed."""
    ctx = context_of(runtime, AnswerOptions)
    last = state["drafts"][-1]
    history = [*state["answer_prompt"], AIMessage(content=last.reply)]
    problems = "\n".join(f"- {problem}" for problem in last.failed.values())
    reply = await aask(
        "answer_revise", ctx.llm_options(), parse=parse_answer, fallback="", history=history, problems=problems
    )
    return {"drafts": [*state["drafts"], Draft(text=answer_text(reply), reply=reply.text)]}


def finish_answer(state: dict[str, Any], runtime: Runtime[AnswerOptions]) -> dict[str, Any]:
    """The kept draft, its remaining failures met by the fallback, cited by code; disputes the conflict step left
    undecided follow it."""
    ctx = context_of(runtime, AnswerOptions)
    pairs: list[Disambiguation] = state.get("disambiguations", [])
    disputed = conflict.disputes(state.get("conflicts", []))
    drafts: list[Draft] = state.get("drafts", [])
    review = AnswerReview(checks=ctx.answer_checks, revisions=max(len(drafts) - 1, 0))
    if not drafts:  # nothing was drafted: every reading was left undecided
        return {"answer": disputed, "answer_review": review}
    grounds = _grounds(state)
    review.fired = list(drafts[0].failed)
    kept = min(
        reversed(drafts),
        key=lambda d: (len(d.failed), sum(not r.stated_by(d.text) for r in grounds.readings)),
    )
    review.failed = list(kept.failed)
    text, fallback = fallen_back(kept, pairs, grounds, "incomplete" in ctx.answer_checks)
    if not text and not pairs and not disputed:
        raise OutputError(f"the answer step got no usable answer; last reply: {drafts[-1].reply[:200]!r}")
    review.fallback = fallback
    review.unstated = sum(r.short and not r.stated_by(text) for r in grounds.readings)
    if ctx.citations:
        text = cited(text, pairs, state.get("passages", []))
    return {"answer": " ".join(filter(None, [text, disputed])), "answer_review": review}


def fallen_back(
    draft: Draft, pairs: list[Disambiguation], grounds: Grounds, complete: bool
) -> tuple[str, list[Fallback]]:
    """``draft``'s text with what it still fails met by the documented fallback (module docstring)."""
    text, done = draft.text, list[Fallback]()
    if {"narrates", "states_nothing", "borrows"} & set(draft.failed):
        kept = [s for s in sentences(text) if not _unusable(s, draft.failed, grounds)]
        if kept and not all(says_nothing(s) for s in kept):
            lost = [p for p, r in zip(pairs, grounds.readings) if r.stated_by(text) and not r.stated_by(" ".join(kept))]
            text = " ".join([*kept, listed(lost)]).strip()
            done.append("dropped_sentences")
        elif pairs:
            return listed(pairs), ["listed_readings"]
    if complete and (left := [p for p, r in zip(pairs, grounds.readings) if r.short and not r.stated_by(text)]):
        text = " ".join(filter(None, [_ended(text), listed(left)]))
        done.append("appended_readings")
    return text, done


def _unusable(sentence: str, failed: dict[Check, str], grounds: Grounds) -> bool:
    return (
        ("narrates" in failed and narrates(sentence))
        or ("states_nothing" in failed and says_nothing(sentence))
        or ("borrows" in failed and bool(borrowed(sentence, grounds.foreign_figures)))
    )


def listed(pairs: Sequence[Disambiguation]) -> str:
    """Readings as sentences, a question once with all its answers: "Who sings Wake Me Up? Avicii; Aloe Blacc."."""
    merged: dict[str, tuple[str, list[str]]] = {}
    for p in pairs:
        question, answers = merged.setdefault(normalize_answer(p.question), (p.question, []))
        answers.append(p.answer.rstrip("."))
    return " ".join(f"{question} {'; '.join(dict.fromkeys(answers))}." for question, answers in merged.values())


def _ended(text: str) -> str:
    return text if not text or re.search(r"""[.!?]["'”’)\]]*$""", text) else f"{text}."


_STOP = re.compile(r"""(?<=\S)([.!?])$""")  # a bare final stop, before which the marks go


def cited(text: str, pairs: Sequence[Disambiguation], passages: Sequence[Passage]) -> str:
    """``text`` without the model's citation marks, each sentence followed by ``[n]`` for the passages of the readings
    it states (n: the passage's place among those the answer read); a sentence stating none gets none."""
    number = {p.id: n for n, p in enumerate(passages, 1)}
    readings = [(Reading.of(p), sorted({number[i] for i in p.passage_ids if i in number})) for p in pairs]
    text = without_citations(text)
    out, cursor = [], 0
    for sentence in sentences(text):
        start = text.find(sentence, cursor)
        if start < 0:
            continue
        marks = sorted({n for reading, ns in readings if reading.stated_by(sentence) for n in ns})
        end = start + len(sentence)
        if marks:
            mark = "".join(f"[{n}]" for n in marks)
            stop = _STOP.search(sentence)
            at = start + stop.start() if stop else end
            out.append(text[cursor:at] + f" {mark}" + text[at:end])
        else:
            out.append(text[cursor:end])
        cursor = end
    return "".join(out) + text[cursor:]


def add_answer_step(builder: StateGraph[Any, Any, Any, Any], draft: str) -> None:
    """Wire the answer step after the method's ``draft`` node, ending the graph."""
    builder.add_node("check_answer", check_answer)
    builder.add_node("revise_answer", llm_node(revise_answer))
    builder.add_node("finish_answer", finish_answer)
    builder.add_edge(draft, "check_answer")
    builder.add_conditional_edges("check_answer", after_check)
    builder.add_edge("revise_answer", "check_answer")
    builder.add_edge("finish_answer", REPLY)
