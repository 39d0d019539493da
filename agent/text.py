"""Answer normalisation (SQuAD/ALCE style) and answer-in-passage tests, shared by graphs and evaluation."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence

from agent.schemas import Passage, QAPair
from agent.settings import get_settings

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, squeeze whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def contains_answer(text: str, answer: str) -> bool:
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def supporting_ids(answer: str, passages: list[Passage]) -> list[str]:
    """Ids of the passages whose text contains ``answer``."""
    return [p.id for p in passages if contains_answer(p.full_text, answer)]


PASSAGES_HEADING = "Passages retrieved for the question:"  # where a call's own passages start in its shared context
QUOTES = ("«", "»")  # delimit a passage's text in a prompt; removed from the text itself


def _one_line(text: str) -> str:
    return " ".join(text.replace(QUOTES[0], '"').replace(QUOTES[1], '"').split())


def passage_text(passage: Passage, words: int | None = None) -> str:
    """``title | «text»`` for a prompt: one line whatever the passage holds (a passage cannot start a line that poses
    as prompt structure, e.g. ``DQ 1:``), its text quoted, cut to ``words`` (default: the ``max_passage_words``
    setting) so that one long article cannot overflow the model's context."""
    limit = words or get_settings().max_passage_words
    tokens = _one_line(passage.text).split(" ")
    text = " ".join(tokens[:limit]) + " …" if len(tokens) > limit else " ".join(tokens)
    return f"{_one_line(passage.title)} | {QUOTES[0]}{text}{QUOTES[1]}"


def render_passages(passages: list[Passage], words: int | None = None, numbers: list[int] | None = None) -> str:
    """Numbered passages ``[n] title | text``; ``numbers`` defaults to 1, 2, ..."""
    numbers = numbers or list(range(1, len(passages) + 1))
    return "\n".join(f"[{n}] {passage_text(p, words)}" for n, p in zip(numbers, passages))


def render_pairs(pairs: Sequence[QAPair]) -> str:
    """``DQ n: question`` / ``DA n: answer`` lines (the papers' disambiguation format)."""
    if not pairs:
        return "(none found)"
    return "\n".join(f"DQ {i}: {p.question}\nDA {i}: {p.answer}" for i, p in enumerate(pairs, 1))


def printable(text: str) -> str:
    """``text`` without control and format characters (terminal escapes, NULs, bidi overrides); newlines and tabs
    stay."""
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
