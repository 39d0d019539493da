"""The embedded default store: Chroma (``PersistentClient``, or ``HttpClient`` for a Chroma server) with our embedding
function for dense search, and an FTS5 file beside it for the sparse side (``sparse_index``)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlparse

import numpy as np

from agent.errors import CollectionError
from agent.retrieval.embeddings import collection_backend
from agent.retrieval.sparse_index import SparseIndex
from agent.retrieval.store import Neighbours, Row, Store, Writer
from agent.retrieval.store_server import SERVER_FILE, TOKEN_HEADER, Registration, registration
from agent.schemas import Passage
from agent.settings import Settings, get_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import GetResult, Include, Where
    from chromadb.base_types import InclusionExclusionOperator, LiteralValue

T = TypeVar("T")
PAGE_SIZE = 5000  # rows per Chroma get(): large collections are read in pages

_client_lock = threading.Lock()


def _client(path: str | None, url: str | None, token: str | None = None) -> ClientAPI:
    """One client per store, created once even when the first requests arrive together (Chroma's setup races)."""
    with _client_lock:
        return _new_client(path, url, token)


@lru_cache(maxsize=8)
def _new_client(path: str | None, url: str | None, token: str | None) -> ClientAPI:
    """The embedded store at ``path``, or the Chroma server at ``url`` (sending ``token``, the store server's)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if url:
        parsed = urlparse(url)
        try:
            return chromadb.HttpClient(
                host=parsed.hostname or "localhost",
                port=parsed.port or (443 if parsed.scheme == "https" else 8000),
                ssl=parsed.scheme == "https",
                headers={TOKEN_HEADER: token} if token else None,
                settings=chroma_settings,
            )
        except ValueError as exc:  # chromadb's "Could not connect to a Chroma server"
            raise CollectionError(
                f"cannot reach the Chroma server at {url} (AMBIGQA_CHROMA_URL): start it (e.g. `chroma run --path DIR "
                f"--port {parsed.port or 8000}`) or unset AMBIGQA_CHROMA_URL to use the embedded store"
            ) from exc
    if path is None:
        raise CollectionError("a Chroma client needs the store's folder or a server URL")
    return chromadb.PersistentClient(path=path, settings=chroma_settings)


_registrations: dict[str, tuple[float, Registration | None]] = {}


def get_client(settings: Settings | None = None) -> ClientAPI:
    """The Chroma client for the configured store: ``AMBIGQA_CHROMA_URL``, else the Chroma server a running ``serve``
    registered for the store's folder (``store_server``, reached with the token it registered), else the embedded
    store itself."""
    settings = settings or get_settings()
    found = _registration(settings.chroma_path)
    if settings.chroma_url:
        token = found.token if found and found.url == settings.chroma_url else None
        return _client(None, settings.chroma_url, token)
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return _client(None, found.url, found.token) if found else _client(str(settings.chroma_path), None)


def _registered(path: Path) -> str | None:
    """The URL of the store server registered for ``path``, if one runs."""
    found = _registration(path)
    return found.url if found else None


def _registration(path: Path, ttl: float = 5.0) -> Registration | None:
    key = str(path)
    checked, found = _registrations.get(key, (0.0, None))
    if time.monotonic() - checked > ttl:
        found = registration(path) if (path / SERVER_FILE).exists() else None
        _registrations[key] = (time.monotonic(), found)
    return found


def sparse_path(name: str, settings: Settings) -> Path:
    """The FTS5 file of collection ``name``: beside the embedded store (also when reached through the Chroma server
    that ``serve`` runs over its folder), or per Chroma server URL."""
    if settings.chroma_url and _registered(settings.chroma_path) != settings.chroma_url:
        server = hashlib.sha256(settings.chroma_url.encode()).hexdigest()[:12]
        return settings.home / "sparse" / server / f"{name}.sqlite"
    return settings.chroma_path.parent / "sparse" / f"{name}.sqlite"


_sparse: dict[Path, SparseIndex] = {}
_sparse_lock = threading.Lock()


class ChromaStore(Store, Writer):
    def __init__(self, collection: Collection, settings: Settings | None = None):
        self.collection = collection
        self.name = collection.name
        self.backend = collection_backend(collection)
        settings = settings or get_settings()
        self._sparse_path = sparse_path(self.name, settings)
        self._home = settings.home

    def count(self) -> int:
        return self.collection.count()

    def nearest(self, vectors: np.ndarray, k: int) -> list[list[Passage]]:
        k = max(1, min(k, self.count()))
        result = self.collection.query(
            query_embeddings=list(vectors), n_results=k, include=["documents", "metadatas", "distances"]
        )
        return [
            [_passage(doc, m, round(1.0 - dist, 6)) for doc, m, dist in zip(docs, metas, dists)]
            for docs, metas, dists in zip(
                _included(result["documents"]), _included(result["metadatas"]), _included(result["distances"])
            )
        ]

    def sparse_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        index = self.sparse_index()
        return [index.search(q, k) for q in queries]

    def sparse_index(self) -> SparseIndex:
        """The FTS5 index; built from the collection on first use when it is empty and the collection is not (a store
        from before the index). A count that disagrees otherwise is repaired by the next ingest (``finish``), which
        holds the collection's ingest lock: a reader never rebuilds under a running ingest."""
        with _sparse_lock:
            index = _sparse.get(self._sparse_path)
            if index is None:
                index = SparseIndex(self._sparse_path)
                if index.count() == 0 and self.count() > 0:
                    index.rebuild(self._sparse_pages())
                _sparse[self._sparse_path] = index
            return index

    def _sparse_pages(self) -> Iterator[list[tuple[str, str, str, str]]]:
        for page in self._pages(["documents", "metadatas"]):
            metadatas: list[Mapping[str, Any]] = _included(page["metadatas"])
            yield [
                (key, str(m.get("doc_id", "")), m.get("title", ""), doc)
                for key, doc, m in zip(page["ids"], _included(page["documents"]), metadatas)
            ]

    def vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        got = self.collection.get(ids=keys, include=["embeddings"])
        return dict(zip(got["ids"], cast("np.ndarray", got["embeddings"])))  # one array; the stubs also allow lists

    def passages(self, ids: list[str]) -> list[Passage]:
        if not ids:
            return []
        got = self.collection.get(where=_of_docs(ids), include=["documents", "metadatas"])
        found = {
            m["doc_id"]: _passage(doc, m) for doc, m in zip(_included(got["documents"]), _included(got["metadatas"]))
        }
        return [found[i] for i in ids if i in found]

    def neighbours(self, passages: list[Passage], k: int) -> Neighbours:
        if not passages:
            return {}
        result = self.collection.query(
            query_embeddings=list(self.embeddings(passages)),
            n_results=max(1, min(k + 1, self.count())),
            include=["documents", "metadatas", "distances"],
        )
        return {
            p.id: [
                (_passage(doc, m), round(1.0 - dist, 6))
                for doc, m, dist in zip(docs, metas, dists)
                if m["doc_id"] != p.id
            ][:k]
            for p, docs, metas, dists in zip(
                passages, _included(result["documents"]), _included(result["metadatas"]), _included(result["distances"])
            )
        }

    def _pages(self, include: Include) -> Iterator[GetResult]:
        offset = 0
        while True:
            page = self.collection.get(include=include, limit=PAGE_SIZE, offset=offset)
            if page["ids"]:
                yield page
            if len(page["ids"]) < PAGE_SIZE:
                return
            offset += PAGE_SIZE

    # the write side (ingest)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock per collection across this machine's processes (``fcntl``; none where it is missing)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        folder = self._home / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"ingest-{self.name}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def stored_ids(self, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        got = self.collection.get(ids=keys, include=["metadatas"])
        return {key: str(m["doc_id"]) for key, m in zip(got["ids"], _included(got["metadatas"]))}

    def relabel(self, ids: dict[str, str]) -> None:
        if not ids:
            return
        got = self.collection.get(ids=list(ids), include=["metadatas"])
        self.collection.update(
            ids=got["ids"],
            metadatas=[{**m, "doc_id": ids[key]} for key, m in zip(got["ids"], _included(got["metadatas"]))],
        )
        self.sparse_index().relabel(ids)

    def versions(self, doc_ids: list[str]) -> list[tuple[str, str]]:
        if not doc_ids:
            return []
        got = self.collection.get(where=_of_docs(doc_ids), include=["metadatas"])
        return [(key, str(m["doc_id"])) for key, m in zip(got["ids"], _included(got["metadatas"]))]

    def add(self, rows: list[Row]) -> None:
        self.collection.add(
            ids=[r.key for r in rows],
            documents=[r.text for r in rows],
            embeddings=[r.vector for r in rows],
            metadatas=[{"doc_id": r.doc_id, "title": r.title, "source": r.source} for r in rows],
        )
        self.sparse_index().add((r.key, r.doc_id, r.title, r.text) for r in rows)

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), PAGE_SIZE):
            self.collection.delete(ids=keys[i : i + PAGE_SIZE])
        self.sparse_index().delete(keys)

    def stored(self, page_size: int = PAGE_SIZE) -> Iterator[list[tuple[str, str]]]:
        for page in self._pages(["metadatas"]):
            yield [(key, str((m or {}).get("doc_id", ""))) for key, m in zip(page["ids"], _included(page["metadatas"]))]

    def finish(self) -> None:
        index = self.sparse_index()
        if index.count() != self.count():  # a run killed between Chroma's write and the index's
            index.rebuild(self._sparse_pages())


def _passage(doc: str, meta: Mapping[str, Any], score: float | None = None) -> Passage:
    return Passage(id=str(meta["doc_id"]), title=meta.get("title", ""), text=doc, score=score)


def _included(values: T | None) -> T:
    """A field of a Chroma result that the call's ``include`` asked for (Chroma types every such field optional)."""
    if values is None:
        raise CollectionError("Chroma's reply lacks a field the request included")
    return values


def _of_docs(ids: list[str]) -> Where:
    """The filter for the rows of the passages ``ids``."""
    among: dict[InclusionExclusionOperator, list[LiteralValue]] = {"$in": list(ids)}
    return {"doc_id": among}
