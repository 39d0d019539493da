"""Answer normalisation (SQuAD/ALCE style) and answer-in-passage tests, shared by graphs and evaluation."""

from __future__ import annotations

import re
import string

from agent.schemas import Passage

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
    return [p.id for p in passages if contains_answer(f"{p.title} {p.text}", answer)]


def render_passages(passages: list[Passage]) -> str:
    return "\n".join(p.render(i) for i, p in enumerate(passages, 1))
