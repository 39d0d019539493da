"""The input and output contract every graph shares: the question (or chat messages) in; answer, disambiguations,
passages, usage (and the answer as an AI message) out (docs/architecture.md)."""

from __future__ import annotations

from typing import Annotated

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


class AnswerState(QuestionInput, AnswerOutput, total=False):
    """Graphs extend this with their own fields."""
