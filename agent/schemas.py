"""Pydantic models at the boundaries: passages, disambiguations, usage, LLM decisions and the run result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


def titled_text(title: str, text: str) -> str:
    """``title | text``, or the text alone: what is embedded, matched and re-ranked for a passage."""
    return f"{title} | {text}" if title else text


class Passage(BaseModel):
    id: str = Field(description="corpus id of the passage (the id in the ingested JSONL)")
    title: str = ""
    text: str
    score: float | None = Field(default=None, description="retrieval or reranking score; higher is better")

    @property
    def full_text(self) -> str:
        return titled_text(self.title, self.text)


class QAPair(BaseModel):
    question: str = Field(description="a disambiguated question")
    answer: str = Field(description="its short factoid answer")


class ExtractedPairs(BaseModel):
    """I_e output: every interpretation the passages support, with its answer."""

    disambiguations: list[QAPair] = Field(default_factory=list)


class ShortQAPair(QAPair):
    answer: str = Field(
        description="a name, date, number or place of a few words taken from the passages, never a sentence"
    )


class ShortExtractedPairs(BaseModel):
    """I_e output whose schema asks for short answers (DIVA's ``casebook_short`` layout)."""

    disambiguations: list[ShortQAPair] = Field(default_factory=list)


class Disambiguation(QAPair):
    passage_ids: list[str] = Field(default_factory=list, description="passages that support the answer")


class YesNo(BaseModel):
    verdict: Literal["Yes", "No"]


class TrueFalse(BaseModel):
    verdict: Literal["True", "False"]


class NodeUsage(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = Field(
        default=0, description="prompt tokens the endpoint served from its prefix cache, where it reports them"
    )
    output_tokens: int = 0
    seconds: float = 0.0

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens the model evaluated (all of them where the endpoint reports no cache hits)."""
        return self.input_tokens - self.cached_tokens

    def __add__(self, other: NodeUsage) -> NodeUsage:
        return NodeUsage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            seconds=round(self.seconds + other.seconds, 3),
        )


class UsageReport(BaseModel):
    total: NodeUsage = Field(default_factory=NodeUsage)
    by_node: dict[str, NodeUsage] = Field(default_factory=dict)


class RunResult(BaseModel):
    """What ``agent.run`` returns: the output contract every graph shares, plus the graph's own fields."""

    question: str
    method: str
    answer: str
    disambiguations: list[Disambiguation] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list, description="what the answer read")
    retrieved: list[Passage] | None = Field(
        default=None, description="what the method retrieved, best first; None for a method that retrieves nothing"
    )
    usage: UsageReport = Field(default_factory=UsageReport)
    seconds: float = Field(default=0.0, description="wall time of the whole run")
    extra: dict[str, Any] = Field(default_factory=dict, description="method-specific state (route, tree, ...)")


AmbiguityType = Literal["AmbSub", "AmbObj", "AmbPred", "AmbTime", "AmbLoc", "N/A"]


class AmbiguityTyping(BaseModel):
    """DIVA's I_a output: why the question is ambiguous (reason first, so it conditions the types) and how."""

    reason: str = Field(description="the unclear part of the question and the interpretations it allows")
    types: list[AmbiguityType] = Field(description="the kinds of ambiguity; N/A when the question has one reading")


class Execution(BaseModel):
    """VerDICt I_E output: one interpretation the passage answers, or nulls to abstain."""

    interpretation: str | None = Field(description="a disambiguated question the passage answers, or null")
    answer: str | None = Field(description="its short answer taken from the passage, or null")


class Decisions(BaseModel):
    """A judge's Yes/No label for each item of a numbered list (VerDICt I_M)."""

    decisions: list[Literal["Yes", "No"]]
