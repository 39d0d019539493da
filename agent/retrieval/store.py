"""The passage store: Chroma (embedded ``PersistentClient`` or ``HttpClient``) with our embedding function."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from agent.errors import CollectionError
from agent.retrieval.embeddings import EMBEDDING_DIM, collection_backend, embed
from agent.schemas import Passage
from agent.settings import Settings, get_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

PAGE_SIZE = 5000  # rows per Chroma get(): large collections are read in pages


def content_id(title: str, text: str) -> str:
    """Chroma id of a passage: a hash of its content, so re-ingesting unchanged text is a no-op."""
    return hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]


_client_lock = threading.Lock()


def _client(path: str | None, url: str | None) -> ClientAPI:
    """One client per store, created once even when the first requests arrive together (Chroma's setup races)."""
    with _client_lock:
        return _new_client(path, url)


@lru_cache(maxsize=8)
def _new_client(path: str | None, url: str | None) -> ClientAPI:
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
                settings=chroma_settings,
            )
        except ValueError as exc:  # chromadb's "Could not connect to a Chroma server"
            raise CollectionError(
                f"cannot reach the Chroma server at {url} (AMBIGQA_CHROMA_URL): start it (e.g. `chroma run --path DIR "
                f"--port {parsed.port or 8000}`) or unset AMBIGQA_CHROMA_URL to use the embedded store"
            ) from exc
    return chromadb.PersistentClient(path=path, settings=chroma_settings)


_registrations: dict[str, tuple[float, str | None]] = {}


def get_client(settings: Settings | None = None) -> ClientAPI:
    """The Chroma client for the configured store: ``AMBIGQA_CHROMA_URL``, else the Chroma server a running ``serve``
    registered for the store's folder (``store_server``), else the embedded store itself."""
    settings = settings or get_settings()
    if settings.chroma_url:
        return _client(None, settings.chroma_url)
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    url = _registered(settings.chroma_path)
    return _client(None, url) if url else _client(str(settings.chroma_path), None)


def _registered(path: Path, ttl: float = 5.0) -> str | None:
    from agent.retrieval.store_server import SERVER_FILE, registered_url

    key = str(path)
    checked, url = _registrations.get(key, (0.0, None))
    if time.monotonic() - checked > ttl:
        url = registered_url(path) if (path / SERVER_FILE).exists() else None
        _registrations[key] = (time.monotonic(), url)
    return url


class Store:
    """Search and read one collection; passages come back as ``Passage`` with cosine similarity scores. Queries are
    embedded with the backend that embedded the collection."""

    def __init__(self, collection: Collection):
        self.collection = collection
        self.name = collection.name
        self.backend = collection_backend(collection)

    def count(self) -> int:
        return self.collection.count()

    def embed(self, texts: list[str]) -> np.ndarray:
        """``texts`` embedded like this collection's passages (its recorded backend), to compare with them."""
        return embed(texts, backend=self.backend)

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        """Top-k per query, with one batched embedding call for all queries."""
        if not queries:
            return []
        k = max(1, min(k, self.count()))
        result = self.collection.query(
            query_embeddings=list(self.embed(queries)),
            n_results=k,
            include=["documents", "metadatas", "distances"],
        )
        return [
            [
                Passage(id=m["doc_id"], title=m.get("title", ""), text=doc, score=round(1.0 - dist, 6))
                for doc, m, dist in zip(docs, metas, dists)
            ]
            for docs, metas, dists in zip(result["documents"], result["metadatas"], result["distances"])
        ]

    def embeddings(self, passages: list[Passage]) -> np.ndarray:
        """Stored embeddings of these passages (never re-embedded), row i for passage i."""
        if not passages:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        keys = [content_id(p.title, p.text) for p in passages]
        got = self.collection.get(ids=keys, include=["embeddings"])
        by_key = dict(zip(got["ids"], got["embeddings"]))
        missing = [p.id for p, key in zip(passages, keys) if key not in by_key]
        if missing:
            raise CollectionError(f"passages {missing[:3]} are not in collection '{self.name}'")
        return np.asarray([by_key[key] for key in keys], dtype=np.float32)

    def pages(self, include: list[str]) -> Iterator[dict[str, Any]]:
        """Every stored row, ``PAGE_SIZE`` at a time (Chroma's ``get`` result per page)."""
        for offset in range(0, self.count(), PAGE_SIZE):
            yield self.collection.get(include=include, limit=PAGE_SIZE, offset=offset)

    def all_passages(self) -> list[Passage]:
        return [
            Passage(id=m["doc_id"], title=m.get("title", ""), text=doc)
            for page in self.pages(["documents", "metadatas"])
            for doc, m in zip(page["documents"], page["metadatas"])
        ]
