"""What every passage store offers the retrieval pipeline, the methods and ingest: ``ChromaStore`` (embedded or a
Chroma server, ``chroma_store``) and ``PostgresStore`` (pgvector and full-text search, ``postgres_store``).

A store answers one query at a time from its indexes — dense, sparse, by id, nearest stored neighbours — and never
holds its collection in memory, so the same code serves six passages or twenty million.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from agent.errors import AgentError, CollectionError, IngestError
from agent.retrieval.embeddings import EMBEDDING_DIM, Backend, embed

if TYPE_CHECKING:
    from agent.schemas import Passage

COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{2,62}$")  # Chroma's rule, and a safe SQL table suffix


def check_name(name: str, error: type[AgentError] = IngestError) -> str:
    """``name`` if a collection may be called so; else ``error`` saying why, on one line (the name as a literal)."""
    if not COLLECTION_NAME.fullmatch(name):
        raise error(
            f"collection name {name!r} is not usable: it needs at least 3 characters, at most 63, of letters, digits, "
            "'_' or '-', starting with a letter or digit"
        )
    return name


def content_id(title: str, text: str) -> str:
    """A passage's storage key: a hash of its content, so re-ingesting unchanged text is a no-op."""
    return hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Row:
    """One passage as stored: its content key, the corpus's document id, text and unit vector."""

    key: str
    doc_id: str
    title: str
    text: str
    source: str
    vector: np.ndarray


Neighbours = dict[str, list[tuple["Passage", float]]]  # passage id → (neighbour, cosine similarity), nearest first


class Store(ABC):
    """Search and read one collection; passages come back as ``Passage`` (``id`` is the corpus's document id, unique
    in a collection: ingest stores an id the corpus lists with several texts as ``ID``, ``ID#2``, …) with the score of
    the search that found them. Queries are embedded with the backend that embedded the collection."""

    name: str
    backend: Backend

    @abstractmethod
    def count(self) -> int: ...

    def empty(self) -> bool:
        return self.count() == 0

    def embed(self, texts: list[str]) -> np.ndarray:
        """``texts`` embedded like this collection's passages (its recorded backend), to compare with them."""
        return embed(texts, backend=self.backend)

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        """Dense top-k per query (cosine similarity), with one batched embedding call for all queries."""
        if not queries:
            return []
        return self.nearest(self.embed(queries), k)

    @abstractmethod
    def nearest(self, vectors: np.ndarray, k: int) -> list[list[Passage]]:
        """Dense top-k per query vector."""

    @abstractmethod
    def sparse_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        """Lexical top-k per query (BM25-style scores, higher is better; passages sharing no term are left out)."""

    def embeddings(self, passages: list[Passage]) -> np.ndarray:
        """Stored embeddings of these passages (never re-embedded), row i for passage i."""
        if not passages:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        keys = [content_id(p.title, p.text) for p in passages]
        by_key = self.vectors(keys)
        missing = [p.id for p, key in zip(passages, keys) if key not in by_key]
        if missing:
            raise CollectionError(f"passages {missing[:3]} are not in collection '{self.name}'")
        return np.asarray([by_key[key] for key in keys], dtype=np.float32)

    @abstractmethod
    def vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these content keys (missing keys are left out)."""

    @abstractmethod
    def passages(self, ids: list[str]) -> list[Passage]:
        """The stored passages with these document ids, in the order given; unknown ids are left out."""

    @abstractmethod
    def neighbours(self, passages: list[Passage], k: int) -> Neighbours:
        """Each passage's ``k`` nearest stored passages by its stored vector (SUNAR's graph G, read on demand)."""


class Writer(ABC):
    """The write side of a collection, as ingest uses it: batches in, nothing proportional to the corpus in memory."""

    name: str
    backend: Backend

    @abstractmethod
    def locked(self) -> AbstractContextManager[None]:
        """Held for a whole ingest: one writer per collection at a time."""

    @abstractmethod
    def stored_ids(self, keys: list[str]) -> dict[str, str]:
        """The document id of each of these content keys that is stored."""

    @abstractmethod
    def relabel(self, ids: dict[str, str]) -> None:
        """Give these stored content keys new document ids (key → id), nothing re-embedded."""

    @abstractmethod
    def versions(self, doc_ids: list[str]) -> list[tuple[str, str]]:
        """(key, doc_id) of every stored passage with one of these document ids."""

    @abstractmethod
    def add(self, rows: list[Row]) -> None: ...

    @abstractmethod
    def delete(self, keys: list[str]) -> None: ...

    def replace(self, rows: list[Row], stale: list[str]) -> None:
        """Store ``rows`` and remove the ``stale`` keys (their ids' older versions): added first, so a reader never
        sees a gap. Without transactions a run killed in between leaves both; the next ingest removes the old one."""
        if rows:
            self.add(rows)
        if stale:
            self.delete(stale)

    @abstractmethod
    def stored(self, page_size: int) -> Iterator[list[tuple[str, str]]]:
        """(key, doc_id) of every stored passage, one page at a time."""

    @abstractmethod
    def finish(self) -> None:
        """After a load: build what is built once (indexes), repair what a killed run left behind."""
