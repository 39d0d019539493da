"""Query terms for the sparse side: lower-cased words without the Snowball English stop words.

Both stores drop the same stop words from queries (PostgreSQL's ``english`` stop list): they carry almost no
BM25 weight, and a disjunctive query over "the" or "of" would score nearly every passage of a large corpus.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")
STOP_WORDS = frozenset(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself "
    "it its itself they them their theirs themselves what which who whom this that these those am is are was were be "
    "been being have has had having do does did doing a an the and but if or because as until while of at by for with "
    "about against between into through during before after above below to from up down in out on off over under "
    "again further then once here there when where why how all any both each few more most other some such no nor "
    "not only own same so than too very s t can will just don should now".split()
)


def content_words(text: str) -> list[str]:
    """Every content word of ``text``, lower-cased, repeats included."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def query_terms(text: str) -> list[str]:
    """The distinct content words of ``text``, in order."""
    return list(dict.fromkeys(content_words(text)))
