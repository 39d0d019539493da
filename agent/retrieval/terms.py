"""Query terms for the sparse side: lower-cased words without the Snowball English stop words.

Both stores drop the same stop words from queries (PostgreSQL's ``english`` stop list): they carry almost no
BM25 weight, and a disjunctive query over "the" or "of" would score nearly every passage of a large corpus.
"""

from __future__ import annotations

import re

from agent.text import STOP_WORDS

_WORD = re.compile(r"[^\W_]+")


def content_words(text: str) -> list[str]:
    """Every content word of ``text``, lower-cased, repeats included."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def query_terms(text: str) -> list[str]:
    """The distinct content words of ``text``, in order."""
    return list(dict.fromkeys(content_words(text)))
