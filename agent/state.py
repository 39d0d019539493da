"""The input and output contract every graph shares: the question in; answer, disambiguations, passages, usage out
(docs/architecture.md)."""

from __future__ import annotations

from typing import Annotated

from typing_extensions import TypedDict

from agent.llm.usage import merge_usage
from agent.schemas import Disambiguation, Passage, UsageReport


class QuestionInput(TypedDict):
    question: str


class AnswerOutput(TypedDict, total=False):
    answer: str
    disambiguations: list[Disambiguation]
    passages: list[Passage]  # what the answer read
    retrieved: list[Passage]  # what the method retrieved, best first (retrieval metrics score it; absent: none)
    usage: Annotated[UsageReport, merge_usage]


class AnswerState(QuestionInput, AnswerOutput, total=False):
    """Graphs extend this with their own fields."""
