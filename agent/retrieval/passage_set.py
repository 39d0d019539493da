"""A caller's own passages as a ``Store``: every method reads them through the same retrieval code it uses for a
collection (dense, BM25, re-ranking, SUNAR's neighbours), but nothing is ingested and nothing else is found.

The passages are embedded once per distinct set (a small LRU keeps the last sets a process saw), so the nodes of a
run and the runs of a benchmark over the same documents never embed them twice.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import InvalidPassagesError
from agent.retrieval.embeddings import embed, usable
from agent.retrieval.store import Neighbours, Store, content_id
from agent.retrieval.terms import content_words, query_terms
from agent.schemas import Passage
from agent.settings import get_settings
from agent.text import printable

_CACHED_SETS = 16
_cache: OrderedDict[tuple[tuple[str, str, str], ...], PassageSet] = OrderedDict()
_lock = threading.Lock()

BM25_K1, BM25_B = 1.2, 0.75


def passage_set(passages: Sequence[Passage]) -> PassageSet:
    """The store over ``passages``, embedded once per distinct set."""
    key = tuple((p.id, p.title, p.text) for p in passages)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    store = PassageSet(passages)
    with _lock:
        _cache[key] = store
        while len(_cache) > _CACHED_SETS:
            _cache.popitem(last=False)
    return store


class PassageSet(Store):
    """``passages`` in memory: dense search over their embeddings, BM25 over their words, in their given order on
    ties."""

    def __init__(self, passages: Sequence[Passage]):
        self.name = "given passages"
        self.backend = usable(get_settings().embeddings)
        self.items = [p.model_copy(update={"score": None}) for p in passages]
        self.keys = [content_id(p.title, p.text) for p in self.items]
        self.matrix = embed([p.full_text for p in self.items], backend=self.backend)
        self.terms = [Counter(content_words(p.full_text)) for p in self.items]
        self.lengths = np.array([sum(t.values()) for t in self.terms], dtype=float)

    def count(self) -> int:
        return len(self.items)

    def nearest(self, vectors: np.ndarray, k: int) -> list[list[Passage]]:
        return [self._top(self.matrix @ vector, k) for vector in vectors]

    def sparse_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        return [self._top(self._bm25(query), k, positive=True) for query in queries]

    def vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        wanted = set(keys)
        return {key: self.matrix[i] for i, key in enumerate(self.keys) if key in wanted}

    def passages(self, ids: list[str]) -> list[Passage]:
        by_id = {p.id: p for p in self.items}
        return [by_id[i] for i in ids if i in by_id]

    def neighbours(self, passages: list[Passage], k: int) -> Neighbours:
        if not passages:
            return {}
        similarity = self.embeddings(passages) @ self.matrix.T
        found: Neighbours = {}
        for passage, row in zip(passages, similarity):
            order = [i for i in np.argsort(-row, kind="stable") if self.items[i].id != passage.id][:k]
            found[passage.id] = [(self.items[i], round(float(row[i]), 6)) for i in order]
        return found

    def _top(self, scores: np.ndarray, k: int, positive: bool = False) -> list[Passage]:
        order = np.argsort(-scores, kind="stable")[:k]
        return [
            self.items[i].model_copy(update={"score": round(float(scores[i]), 6)})
            for i in order
            if not positive or scores[i] > 0
        ]

    def _bm25(self, query: str) -> np.ndarray:
        """Okapi BM25 of every passage for ``query``'s content words."""
        n = len(self.items)
        average = float(self.lengths.mean()) or 1.0
        scores = np.zeros(n)
        for term in query_terms(query):
            counts = np.array([t.get(term, 0) for t in self.terms], dtype=float)
            holding = int((counts > 0).sum())
            if not holding:
                continue
            idf = math.log(1 + (n - holding + 0.5) / (holding + 0.5))
            scores += idf * counts * (BM25_K1 + 1) / (counts + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths / average))
        return scores


def given_passages(items: Any) -> list[Passage]:
    """A caller's passages checked and made ``Passage``s: each a text, or a mapping with ``text`` and optional ``id``
    and ``title`` (missing ids become ``p1``, ``p2``, … in order). Raises ``InvalidPassagesError`` naming the first
    problem: none given, too many, an empty or too long text, a repeated id."""
    settings = get_settings()
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or not items:
        raise InvalidPassagesError("give at least one passage: a list of texts or of {id, title, text} objects")
    if len(items) > settings.max_given_passages:
        raise InvalidPassagesError(f"{len(items):,} passages given; the limit is {settings.max_given_passages:,}")
    passages = []
    for number, item in enumerate(items, 1):
        if isinstance(item, Passage):
            item = item.model_dump()
        elif isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InvalidPassagesError(f"passage {number} is neither a text nor an object with a 'text' string")
        text = " ".join(printable(item["text"]).split())
        if not text:
            raise InvalidPassagesError(f"passage {number} has no text")
        if len(text) > settings.max_given_passage_chars:
            raise InvalidPassagesError(
                f"passage {number} has {len(text):,} characters; the limit is {settings.max_given_passage_chars:,}"
            )
        passage_id = str(item.get("id") or f"p{number}")
        passages.append(Passage(id=passage_id, title=str(item.get("title") or ""), text=text))
    ids = [p.id for p in passages]
    if len(set(ids)) < len(ids):
        repeated = next(i for i in ids if ids.count(i) > 1)
        raise InvalidPassagesError(f"passage id '{repeated}' is given twice: ids name one passage each")
    return passages


def read_passages(path: Path) -> list[Passage]:
    """A JSONL file of passages (each line ``{"id", "title", "text"}`` with ``id`` and ``title`` optional, or a JSON
    string), checked as ``given_passages`` does; a missing file or a bad line is an ``InvalidPassagesError``."""
    if not path.is_file():
        raise InvalidPassagesError(f"passages file {path} does not exist")
    lines = enumerate(path.read_bytes().splitlines(), 1)
    return given_passages([_json_line(path, number, _text(path, number, raw)) for number, raw in lines if raw.strip()])


def _text(path: Path, number: int, raw: bytes) -> str:
    """Line ``number`` of ``path`` as text; not UTF-8 is an ``InvalidPassagesError`` naming the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPassagesError(
            f"{path}:{number}: not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
        ) from None


def _json_line(path: Path, number: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidPassagesError(f"{path}:{number}: not JSON ({exc.msg})") from None
