"""BM25 over a collection's passages (rank-bm25): the sparse first stage (SUNAR's R0) and a lexical baseline."""

from __future__ import annotations

import re
import threading

import numpy as np

from agent.retrieval.store import Store
from agent.schemas import Passage

_TOKEN = re.compile(r"\w+")
_cache: dict[tuple[str, int], BM25Index] = {}
_lock = threading.Lock()


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Index:
    def __init__(self, passages: list[Passage]):
        from rank_bm25 import BM25Okapi

        self.passages = passages
        self._bm25 = BM25Okapi([tokenize(p.full_text) for p in passages])

    def search(self, query: str, k: int) -> list[Passage]:
        scores = self._bm25.get_scores(tokenize(query))
        top = np.argsort(-scores)[:k]
        return [self.passages[i].model_copy(update={"score": float(scores[i])}) for i in top]


def bm25_index(store: Store) -> BM25Index:
    """Built once per collection and size (a grown collection gets a new index)."""
    key = (store.name, store.count())
    with _lock:
        if key not in _cache:
            _cache[key] = BM25Index(store.all_passages())
        return _cache[key]
