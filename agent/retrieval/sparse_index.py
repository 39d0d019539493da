"""The sparse side of a Chroma collection: an SQLite FTS5 index on disk beside the store, ranked by BM25.

Chroma has no lexical ranking of its own, and an in-memory BM25 over the whole collection costs gigabytes per process
at a million passages. FTS5 keeps the inverted index on disk and ranks with BM25 (k1=1.2, b=0.75) over one field,
the titled text that is also embedded. Ingest writes it in the same batches as Chroma; an empty index beside a
non-empty collection (a store from an older version) is built from the collection a page at a time, and a count
left wrong by a run killed between the two writes is repaired by the next ingest. Rows are keyed by the passage's content key, read as a 60-bit integer rowid,
so a delete finds its row without a scan.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent.retrieval.terms import query_terms
from agent.schemas import Passage, titled_text

_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, doc_id UNINDEXED, title UNINDEXED, text UNINDEXED, "
    "tokenize = 'unicode61')"
)


def rowid(key: str) -> int:
    return int(key[:15], 16)


class SparseIndex:
    """One collection's FTS5 file; safe to share between threads (one connection per thread) and processes (WAL)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as db:
            db.execute(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def count(self) -> int:
        return int(self._connection().execute("SELECT count(*) FROM fts").fetchone()[0])

    def add(self, rows: Iterable[tuple[str, str, str, str]]) -> None:
        """(key, doc_id, title, text) rows; a key already present is replaced."""
        db = self._connection()
        values = [(rowid(k), titled_text(t, x), d, t, x) for k, d, t, x in rows]
        with db:
            db.execute("BEGIN")
            db.executemany("DELETE FROM fts WHERE rowid = ?", [(v[0],) for v in values])
            db.executemany("INSERT INTO fts (rowid, body, doc_id, title, text) VALUES (?, ?, ?, ?, ?)", values)

    def delete(self, keys: list[str]) -> None:
        db = self._connection()
        with db:
            db.execute("BEGIN")
            db.executemany("DELETE FROM fts WHERE rowid = ?", [(rowid(k),) for k in keys])

    def relabel(self, ids: dict[str, str]) -> None:
        """New document ids for these content keys."""
        db = self._connection()
        with db:
            db.execute("BEGIN")
            db.executemany("UPDATE fts SET doc_id = ? WHERE rowid = ?", [(d, rowid(k)) for k, d in ids.items()])

    def rebuild(self, pages: Iterator[list[tuple[str, str, str, str]]]) -> None:
        """Replace every row with the collection's, page by page."""
        db = self._connection()
        db.execute("DELETE FROM fts")
        for page in pages:
            self.add(page)
        db.execute("INSERT INTO fts (fts) VALUES ('optimize')")

    def search(self, query: str, k: int) -> list[Passage]:
        terms = query_terms(query)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self._connection().execute(
            "SELECT doc_id, title, text, bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (match, k)
        )
        return [Passage(id=d, title=t, text=x, score=round(-s, 6)) for d, t, x, s in rows]
