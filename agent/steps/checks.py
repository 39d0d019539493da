"""The answer step's checks: each reads a draft answer and says what is wrong with it, or nothing. None edits it.

A failed check goes back to the model with what failed (``agent.answer_step``). The checks are run over ASQA dev's
human long answers in the tests: at least 98% of that good text passes every one (tests/test_answer_checks.py).

- ``narrates``: a sentence talks about the material the model was given (the passages, the context, the
  disambiguated questions) instead of the world: "According to the passages, ...", "Passage [2] states ...".
  "A Passage to India", "the passage of the bill" and "in the context of the Cold War" are about the world.
- ``states_nothing``: the draft says nothing but that there is no answer ("The passages do not say.").
- ``borrows``: the draft states a number that only the worked examples hold, not the question, its readings or
  its passages (the small model filling its answer with an example's date).
- ``incomplete``: a reading with a short answer is left out (its answer appears nowhere, in any date wording).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from agent.llm.parsing import sentences
from agent.schemas import Disambiguation
from agent.text import MONTH_NAMES, MONTHS, stated_in, without_citations

Check = Literal["narrates", "states_nothing", "borrows", "incomplete"]
CHECKS: tuple[Check, ...] = get_args(Check)
SHORT_ANSWER_WORDS = 8  # a reading's answer of up to this many words must appear in the answer; a longer one is prose


@dataclass(frozen=True)
class Reading:
    """One interpretation as the checks see it: its question and the answers that state it (ASQA lists aliases)."""

    question: str
    answers: tuple[str, ...]

    @classmethod
    def of(cls, pair: Disambiguation) -> Reading:
        return cls(pair.question, (pair.answer,))

    @property
    def short(self) -> bool:
        """Whether an answer states it word for word: a short answer, not prose nor a bare yes or no."""
        return any(0 < len(words(a)) <= SHORT_ANSWER_WORDS and words(a) not in (["yes"], ["no"]) for a in self.answers)

    def stated_by(self, text: str) -> bool:
        held = words(text)
        return any(stated_in(text, a) or _holds(held, words(a)) for a in self.answers)


def words(text: str) -> list[str]:
    """``text`` as the checks compare it: lower case, any dash or punctuation a space ("1927–28" and "1927-28", "Season
    8's" and "season 8"), a number apart from its suffix ("5th" states 5), no articles."""
    text = re.sub(r"(\d)([a-z])", r"\1 \2", without_citations(text).lower())
    return [w for w in re.split(r"[\W_]+", text) if w and w not in ("a", "an", "the")]


def _same_word(held: str, wanted: str) -> bool:
    """One word in two writings: equal; a longer form of it ("diseases", "anonymously", "American"); or, for words of
    letters, one letter off ("Belicheck" for Belichick). Numbers must match exactly."""
    if held == wanted:
        return True
    if not (held.isalpha() and wanted.isalpha()) or min(len(held), len(wanted)) < 4:
        return False
    if held.startswith(wanted) and len(wanted) >= 5:
        return True
    if abs(len(held) - len(wanted)) > 1:
        return False
    shorter, longer = sorted((held, wanted), key=len)
    return any(longer[:i] + longer[i + (len(longer) > len(shorter)) :] == shorter for i in range(len(longer))) or (
        len(held) == len(wanted) and sum(a != b for a, b in zip(held, wanted)) == 1
    )


def _holds(held: list[str], wanted: list[str]) -> bool:
    """Whether ``wanted`` appears in ``held`` as consecutive words, each in one of its writings (``_same_word``)."""
    span = len(wanted)
    return span > 0 and any(
        all(_same_word(h, w) for h, w in zip(held[i : i + span], wanted)) for i in range(len(held) - span + 1)
    )


@dataclass(frozen=True)
class Grounds:
    """What a draft is checked against: its readings, and the numbers of its worked examples that nothing read holds."""

    readings: tuple[Reading, ...] = ()
    foreign_figures: frozenset[str] = field(default_factory=frozenset)


# --- narrates: talk about the given material ---------------------------------------------------------------------
# The nouns are matched in lower case: a capitalised "Passage" or "Context" is a title ("The Passage", a TV series).
_MATERIAL = r"(?:passages?|contexts?|documents?|excerpts?|snippets?)\b"
_GIVEN = r"(?:(?:retrieved|provided|given|above|following|cited|first|second|third|fourth|fifth|other|same)\s+)?"
_DETERMINER = r"(?:[Tt]he|[Tt]his|[Tt]hese|[Tt]hose|[Ee]ach|[Bb]oth|[Aa]ll|[Aa]ny|[Nn]one\s+of\s+the|[Oo]ne\s+of\s+the)"
_NUMBERED = r"(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])*"
_REPORTS = (
    r"(?:\w+ly\s+|also\s+)?(?:states?|stated|says?|said|mentions?|mentioned|indicates?|shows?|notes?|confirms?|"
    r"explains?|reports?|tells?|suggests?|provides?|describes?|lists?|contains?|refers?|clarifies|specif(?:y|ies)|"
    r"(?:does|do|did)\s+not|doesn't|don't|didn't)\b"
)
_NARRATION = [
    # "According to the passages, ...", "Based on the provided context", "In passage [2], ..." (not "in the context of")
    re.compile(
        rf"\b(?:[Aa]ccording\s+to|[Aa]s\s+(?:stated|mentioned|shown|noted|described|given)\s+in|[Bb]ased\s+on|[Ii]n|"
        rf"[Ff]rom)\s+(?:(?:the|this|these|that)\s+{_GIVEN}{_MATERIAL}{_NUMBERED}(?!\s+of\b)|(?:passage|document)s?\s*\[\d)"
    ),
    # "The passage states ...", "These documents do not ...", "Passage [3] mentions ...", "[2] says that ..."
    re.compile(
        rf"(?:\b{_DETERMINER}\s+{_GIVEN}{_MATERIAL}|\b(?:[Pp]assage|[Dd]ocument)s?(?=\s*\[)|^(?=\s*\[)){_NUMBERED}"
        rf"\s+{_REPORTS}"
    ),
    # the prompt's own structure: "the disambiguated questions", "DQ 2", "the long answer"
    re.compile(r"\b[Dd]isambiguat\w*\s+(?:questions?|answers?|pairs?)\b|\bD[QA]\s?\d+\b"),
    re.compile(r"\b[Tt]he\s+(?:retrieved|provided|given)\s+(?:information|evidence|texts?|sources?)\b"),
    re.compile(r"\b[Tt]he\s+(?:long|short|final)\s+answer\b"),
]


def narrates(sentence: str) -> bool:
    """Whether ``sentence`` talks about the material the model was given rather than the world."""
    return any(pattern.search(sentence) for pattern in _NARRATION)


# --- states_nothing: a draft that only says there is no answer ----------------------------------------------------
_NO_ANSWER = re.compile(
    r"\b(?:does|do|did)\s+not\s+(?:provide|give|contain|mention|specify|say|state|include|offer|answer)\b"
    r"|\b(?:doesn't|don't|didn't)\s+(?:provide|give|contain|mention|specify|say|state|include|answer)\b"
    r"|\bno\s+(?:information|mention|answer|data|details?|record)\b"
    r"|\bnot\s+(?:specified|mentioned|provided|stated|given|available|found|known|clear)\b"
    r"|\b(?:cannot|can't|unable\s+to)\s+(?:be\s+)?(?:answer|determine|find|say|tell|confirm)\w*"
    r"|\b(?:insufficient|not\s+enough)\s+(?:information|data|evidence|context)\b"
    r"|^(?:unknown|none|n/?a)\W*$",
    re.IGNORECASE,
)


def says_nothing(sentence: str) -> bool:
    """Whether ``sentence`` says that the answer is missing or unknowable."""
    return bool(_NO_ANSWER.search(sentence.strip()))


# --- borrows: dates and numbers only the worked examples hold -------------------------------------------------------
# What a small model copies from an example is a year or a day of a date ("released on June 22, 2001"); a small number
# ("2", "16") is too common to tell copying from knowledge, so only numbers of three or more digits and days of a
# month count.
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_FIGURE = re.compile(
    rf"\b(?:(?P<month>{_MONTH})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b|(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?"
    rf"(?P<month2>{_MONTH})\b|(?P<number>\d{{1,3}}(?:,\d{{3}})+|\d{{3,}}))",
    re.IGNORECASE,
)


def figures(text: str) -> set[str]:
    """The numbers of three or more digits ("1,000" as 1000) and the days of a month ("June 22", "22 June" as
    "june 22") in ``text``, citation marks aside."""
    found = set()
    for match in _FIGURE.finditer(without_citations(text)):
        if match["number"]:
            found.add(match["number"].replace(",", ""))
        else:
            month = MONTHS[(match["month"] or match["month2"]).lower()]
            found.add(f"{month}/{int(match['day'] or match['day2'])}")
    return found


def foreign_figures(examples: str, grounds: Iterable[str]) -> frozenset[str]:
    """The ``figures`` of ``examples`` (a prompt's worked examples) that none of ``grounds`` (what the answer may take
    its facts from: the question, its readings, its passages) holds."""
    held: set[str] = set()
    for text in grounds:
        held |= figures(text)
    return frozenset(figures(examples) - held)


def borrowed(sentence: str, foreign: frozenset[str]) -> list[str]:
    """The ``figures`` of ``sentence`` that only the worked examples hold."""
    return sorted(figures(sentence) & foreign)


# --- the checks ---------------------------------------------------------------------------------------------------


def missing_readings(text: str, readings: Sequence[Reading]) -> list[Reading]:
    """The readings with a short answer that ``text`` does not state."""
    return [r for r in readings if r.short and not r.stated_by(text)]


def _spelled(figure: str) -> str:
    month, _, day = figure.partition("/")
    return f"{MONTH_NAMES[int(month) - 1]} {day}" if day else figure


def failures(text: str, grounds: Grounds, enabled: Iterable[Check] = CHECKS) -> dict[Check, str]:
    """The checks in ``enabled`` that ``text`` fails, each with what failed, worded for the model that wrote it."""
    found: dict[Check, str] = {}
    parts = sentences(text)
    for check in CHECKS:
        if check not in enabled:
            continue
        if check == "narrates" and (talk := [s for s in parts if narrates(s)]):
            found[check] = (
                "It talks about the passages or the disambiguated questions, which the reader never sees: "
                + (" ".join(f"«{s}»" for s in talk[:3]))
            )
        elif check == "states_nothing" and all(says_nothing(s) for s in parts):
            wanted = "; ".join(f"{r.question} {r.answers[0]}" for r in grounds.readings[:5])
            found[check] = (
                "It gives no answer" + (f", though these readings have one: {wanted}" if wanted else "") + "."
            )
        elif check == "borrows" and (taken := sorted({n for s in parts for n in borrowed(s, grounds.foreign_figures)})):
            found[check] = (
                f"It states {', '.join(_spelled(f) for f in taken)}, which only the worked examples hold, not this question, its readings or "
                "its passages."
            )
        elif check == "incomplete" and (left := missing_readings(text, grounds.readings)):
            found[check] = "It leaves out these readings: " + "; ".join(f"{r.question} {r.answers[0]}" for r in left)
    return found
