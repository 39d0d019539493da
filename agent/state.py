"""The input and output contract every graph shares (DESIGN.md: question in; answer, disambiguations, passages, usage out)."""

from __future__ import annotations

from typing import Annotated

from typing_extensions import TypedDict

from agent.schemas import Disambiguation, Passage, UsageReport
from agent.llm.usage import merge_usage


class QuestionInput(TypedDict):
    question: str


class AnswerOutput(TypedDict, total=False):
    answer: str
    disambiguations: list[Disambiguation]
    passages: list[Passage]
    usage: Annotated[UsageReport, merge_usage]


class AnswerState(QuestionInput, AnswerOutput, total=False):
    """Graphs extend this with their own fields."""
