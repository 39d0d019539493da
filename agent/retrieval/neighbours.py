"""The neighbourhood graph (SUNAR §NAR): each passage's top-k nearest passages by the dense encoder.

SUNAR's first stage is sparse (BM25), so the graph uses the complementary dense signal. It is built once per
collection from the stored embeddings (never re-embedded) with blocked matrix products, and saved as an ``.npz``
under ``$AMBIGQA_HOME/neighbours/`` keyed by collection name, size and k; a grown collection gets a new graph.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agent.retrieval.embeddings import EMBEDDING_DIM
from agent.retrieval.store import Store
from agent.settings import Settings, get_settings

_cache: dict[Path, NeighbourGraph] = {}
_lock = threading.Lock()


@dataclass
class NeighbourGraph:
    ids: np.ndarray  # (N,) passage ids (the corpus ids, not Chroma's content hashes)
    neighbours: np.ndarray  # (N, k) row indices of each passage's nearest passages, nearest first, no self
    similarities: np.ndarray  # (N, k) their cosine similarities
    seconds: float = 0.0  # build time
    rows: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rows = {str(pid): i for i, pid in enumerate(self.ids)}

    @property
    def k(self) -> int:
        return int(self.neighbours.shape[1])

    def of(self, passage_id: str) -> list[tuple[str, float]]:
        """(neighbour id, similarity) of one passage, nearest first; none for an unknown id."""
        row = self.rows.get(passage_id)
        if row is None:
            return []
        return [(str(self.ids[j]), float(s)) for j, s in zip(self.neighbours[row], self.similarities[row])]


def stored_embeddings(store: Store) -> tuple[np.ndarray, np.ndarray]:
    """(ids, unit embeddings) of every passage, read from the collection in pages."""
    ids: list[str] = []
    vectors: list[np.ndarray] = []
    for page in store.pages(["embeddings", "metadatas"]):
        ids += [m["doc_id"] for m in page["metadatas"]]
        vectors.append(np.asarray(page["embeddings"], dtype=np.float32))
    matrix = np.concatenate(vectors) if vectors else np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(ids), matrix / np.maximum(norms, 1e-12)


def nearest_neighbours(vectors: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k of every row against all rows, excluding the row itself, one block of rows at a time."""
    n = len(vectors)
    k = min(k, max(n - 1, 0))
    neighbours = np.zeros((n, k), dtype=np.int32)
    similarities = np.zeros((n, k), dtype=np.float32)
    if k == 0:
        return neighbours, similarities
    for start in range(0, n, block):
        rows = np.arange(start, min(start + block, n))
        sims = vectors[rows] @ vectors.T  # (block, N)
        sims[np.arange(len(rows)), rows] = -np.inf  # no self-loops
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        top_sims = np.take_along_axis(sims, top, axis=1)
        order = np.argsort(-top_sims, axis=1)
        neighbours[rows] = np.take_along_axis(top, order, axis=1)
        similarities[rows] = np.take_along_axis(top_sims, order, axis=1)
    return neighbours, similarities


def graph_path(store: Store, k: int, settings: Settings | None = None) -> Path:
    settings = settings or get_settings()
    return settings.home / "neighbours" / f"{store.name}-{store.count()}-k{k}.npz"


def build_neighbours(store: Store, k: int = 10, settings: Settings | None = None) -> NeighbourGraph:
    """Build the graph from the stored embeddings and save it beside the collection."""
    start = time.perf_counter()
    ids, vectors = stored_embeddings(store)
    neighbours, similarities = nearest_neighbours(vectors, k)
    seconds = round(time.perf_counter() - start, 3)
    path = graph_path(store, k, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, ids=ids, neighbours=neighbours, similarities=similarities, seconds=seconds)
    tmp.replace(path)
    return NeighbourGraph(ids, neighbours, similarities, seconds)


def load_neighbours(store: Store, k: int = 10, settings: Settings | None = None) -> NeighbourGraph:
    """The saved graph for this collection, size and k; built (and saved) on first use when missing."""
    path = graph_path(store, k, settings)
    with _lock:
        if path not in _cache:
            if path.is_file():
                with np.load(path) as data:
                    _cache[path] = NeighbourGraph(
                        data["ids"], data["neighbours"], data["similarities"], float(data["seconds"])
                    )
            else:
                _cache[path] = build_neighbours(store, k, settings)
        return _cache[path]
