"""The passage store: Chroma (embedded ``PersistentClient`` or ``HttpClient``) with our embedding function."""

from __future__ import annotations

import hashlib
import threading
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import numpy as np

from agent.retrieval.embeddings import MiniLMEmbeddingFunction, embed
from agent.errors import CollectionError
from agent.schemas import Passage
from agent.settings import REPO_ROOT, Settings, get_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

DEMO_COLLECTION = "demo"
DEMO_CORPUS = REPO_ROOT / "data" / "demo" / "corpus.jsonl"
_demo_lock = threading.Lock()


def content_id(title: str, text: str) -> str:
    """Chroma id of a passage: a hash of its content, so re-ingesting unchanged text is a no-op."""
    return hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]


@lru_cache(maxsize=8)
def _client(path: str | None, url: str | None) -> "ClientAPI":
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


def get_client(settings: Settings | None = None) -> "ClientAPI":
    settings = settings or get_settings()
    if settings.chroma_url:
        return _client(None, settings.chroma_url)
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return _client(str(settings.chroma_path), None)


class Store:
    """Search and read one collection; passages come back as ``Passage`` with cosine similarity scores."""

    def __init__(self, collection: "Collection"):
        self.collection = collection
        self.name = collection.name

    def count(self) -> int:
        return self.collection.count()

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        """Top-k per query, with one batched embedding call for all queries."""
        if not queries:
            return []
        k = max(1, min(k, self.count()))
        result = self.collection.query(
            query_embeddings=list(embed(queries)), n_results=k, include=["documents", "metadatas", "distances"]
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
            return np.zeros((0, 384), dtype=np.float32)
        keys = [content_id(p.title, p.text) for p in passages]
        got = self.collection.get(ids=keys, include=["embeddings"])
        by_key = dict(zip(got["ids"], got["embeddings"]))
        missing = [p.id for p, key in zip(passages, keys) if key not in by_key]
        if missing:
            raise CollectionError(f"passages {missing[:3]} are not in collection '{self.name}'")
        return np.asarray([by_key[key] for key in keys], dtype=np.float32)

    def all_passages(self, batch_size: int = 5000) -> list[Passage]:
        passages: list[Passage] = []
        for offset in range(0, self.count(), batch_size):
            got = self.collection.get(include=["documents", "metadatas"], limit=batch_size, offset=offset)
            passages += [
                Passage(id=m["doc_id"], title=m.get("title", ""), text=doc)
                for doc, m in zip(got["documents"], got["metadatas"])
            ]
        return passages


def open_store(name: str | None = None, settings: Settings | None = None) -> Store:
    """Open a collection for reading; the demo collection is ingested from the repo on first use."""
    settings = settings or get_settings()
    name = name or settings.collection
    client = get_client(settings)
    if name == DEMO_COLLECTION:
        _ensure_demo(client, settings)
    try:
        collection = client.get_collection(name, embedding_function=MiniLMEmbeddingFunction())
    except Exception as exc:  # chromadb raises NotFoundError / ValueError depending on client type
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            raise CollectionError(
                f"collection '{name}' does not exist: run `ambigqa ingest CORPUS.jsonl --collection {name}` first"
            ) from None
        raise CollectionError(f"cannot open collection '{name}': {exc}") from exc
    store = Store(collection)
    if store.count() == 0:
        raise CollectionError(f"collection '{name}' is empty: run `ambigqa ingest CORPUS.jsonl --collection {name}` first")
    return store


def _ensure_demo(client: "ClientAPI", settings: Settings) -> None:
    from agent.retrieval.ingest import ingest

    with _demo_lock:
        names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if DEMO_COLLECTION in names and client.get_collection(DEMO_COLLECTION, embedding_function=MiniLMEmbeddingFunction()).count() > 0:
            return
        ingest(DEMO_CORPUS, DEMO_COLLECTION, settings=settings, progress=False)
