"""The input and output contract every graph shares: the question (or chat messages) in; answer, disambiguations,
passages, usage (and the answer as an AI message) out (docs/architecture.md)."""

from __future__ import annotations

from typing import Annotated

from typing_extensions import TypedDict

from agent.chat import ChatMessages
from agent.llm.usage import merge_usage
from agent.schemas import Disambiguation, Passage, UsageReport


class QuestionInput(ChatMessages, total=False):
    question: str  # or the last human message (agent.chat)


class AnswerOutput(ChatMessages, total=False):
    answer: str
    disambiguations: list[Disambiguation]
    passages: list[Passage]  # what the answer read
    retrieved: list[Passage]  # what the method retrieved, best first (retrieval metrics score it; absent: none)
    usage: Annotated[UsageReport, merge_usage]


def larger(current: int, update: int) -> int:
    """A reducer keeping the larger value (LangGraph reads a reducer's signature, which builtin ``max`` lacks)."""
    return max(current, update)


class RunState(TypedDict, total=False):
    """What a run learns as it goes, kept in its state (never in its options): every graph's state carries it."""

    window_cut: Annotated[
        int, larger
    ]  # tokens of worked examples the run's prompts leave out (agent.nodes.within_window)


class AnswerState(QuestionInput, AnswerOutput, RunState, total=False):
    """The state of a graph with no fields of its own (closed_book)."""
