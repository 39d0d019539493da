"""The PostgreSQL store (``AMBIGQA_DATABASE_URL``): one table per collection, dense search through a pgvector HNSW
index, sparse search through BM25 over impact-ordered postings, neighbours through the same HNSW index.

The sparse side: each row's ``tsvector`` (the ``simple`` configuration: words, no stemming, as the Chroma store's
FTS5 index) is unnested into a postings table ``(term, rid, impact)``, the BM25 term-frequency part (k1 1.2, b 0.75,
the document length in words) stored once, under a B-tree on ``(term, impact DESC)``. A query reads, for each of its
terms, at most its ``POSTINGS_PER_TERM`` highest-impact postings (an index-only scan), weights them by the term's IDF
and sums: exact BM25 for every term rarer than that, and for a common term the documents where it weighs most. Its work
is bounded by the number of query terms, not the corpus: at a million passages a query reads a few thousand index
entries and its top k rows (``ts_rank`` over the rows a GIN index matched had to read each candidate row, 5,000 of
them, from the heap: docs/deploy.md). Document frequencies come from the planner's statistics for the most common
lexemes and from the postings themselves for the rest.

Everything is answered inside the database: a query returns its top k rows, never the collection. Connections come
from one ``psycopg_pool`` pool per URL; a database that is down is a ``StoreError`` naming its host and port (never the
password), and the pool reconnects when it returns. psycopg with pgvector's adapter, rather than langchain-postgres'
vector store: we need the stored vectors themselves (``rank_pool``, neighbours), COPY for bulk loads and our own keys,
which that store's ``Document`` interface does not expose.

Relation names: PostgreSQL cuts identifiers at 63 bytes, so collection ``NAME``'s relations are ``ambigqa_NAME`` and
``ambigqa_NAME_postings`` (indexes ``…_hnsw``, ``…_bm25``, ``…_doc``) only where that fits; a longer one is a readable
prefix of the name, ``$`` and 16 hex digits of the name's SHA-256 (``ambigqa_PREFIX$HASH_postings``). Every name that
fits keeps the relation it always had, so stored collections open as before; a cut name would have mapped names
sharing a prefix to one table. Collection names never hold ``$``, so a hashed name never equals a plain one, and two
plain ones clash only by a suffix (collection ``x_postings`` against ``x``'s postings, ``collections`` against the
registry): a new collection whose relations exist already is refused.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from agent.errors import CollectionError, IngestError, StoreError
from agent.retrieval.embeddings import EMBEDDING_DIM, Backend
from agent.retrieval.store import Neighbours, Row, Store, Writer
from agent.retrieval.terms import STOP_WORDS, query_terms
from agent.schemas import Passage

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
REGISTRY = "ambigqa_collections"
POSTINGS_PER_TERM = 1000  # highest-impact postings a query reads per term: bounded work at any corpus size
BM25_K1, BM25_B = 1.2, 0.75  # Robertson and Zaragoza's usual values (FTS5's too)
STATISTICS_TTL = 300.0
MAX_IDENTIFIER = 63  # bytes: PostgreSQL cuts longer identifiers (NAMEDATALEN - 1)
RELATIONS = {"table": "", "postings": "_postings", "dense": "_hnsw", "bm25": "_bm25", "doc": "_doc", "gin": "_tsv"}
_statistics: dict[tuple[str, str], tuple[float, tuple[dict[str, float], float]]] = {}
_pools: dict[str, ConnectionPool] = {}
_pools_lock = threading.Lock()


def where(url: str) -> str:
    """``host:port/dbname`` of a database URL, to name it in errors without its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:
        return "an unparsable AMBIGQA_DATABASE_URL"
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


def _configure(connection: Connection) -> None:
    from pgvector.psycopg import register_vector

    connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    connection.commit()
    register_vector(connection)
    from agent.settings import get_settings

    connection.execute(f"SET hnsw.ef_search = {int(get_settings().hnsw_ef_search)}")
    connection.commit()


RECONNECT_S = 2.0  # a pool retries a lost connection this long (1 s apart), then connects again on the next request:
# after an outage it never sleeps out a long backoff while the database is back


def pool(url: str, timeout: float = 5.0) -> ConnectionPool:
    """The connection pool for ``url``, opened once per process."""
    with _pools_lock:
        if url not in _pools:
            try:
                from psycopg_pool import ConnectionPool
            except ImportError:
                raise StoreError(
                    "a PostgreSQL store needs the package 'psycopg[pool]': pip install 'psycopg[pool]'"
                ) from None
            _hide_password(url)
            _pools[url] = ConnectionPool(
                url, min_size=1, max_size=16, open=True, timeout=timeout, configure=_configure,
                check=ConnectionPool.check_connection, reconnect_timeout=RECONNECT_S, name=where(url),
            )  # fmt: skip
        return _pools[url]


def run(url: str, work: Callable[[Connection], T]) -> T:
    """``work`` on a pooled connection, in a transaction; connection failures become one ``StoreError``, after one
    retry on a fresh connection (the server may have restarted since the pool connected)."""
    import psycopg
    from psycopg_pool import PoolTimeout

    for attempt in range(2):
        try:
            with pool(url).connection() as connection:
                return work(connection)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if attempt == 1 or isinstance(exc, PoolTimeout):
                reason = _failure(url) if isinstance(exc, PoolTimeout) else _one_line(exc)
                raise StoreError(
                    f"cannot reach PostgreSQL at {where(url)} (AMBIGQA_DATABASE_URL): {_redact(reason, url)}"
                ) from None
    raise AssertionError("unreachable")


def _failure(url: str, timeout: int = 3) -> str:
    """Why the pool found no connection: one direct attempt's error (the pool's own attempts only log theirs)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=timeout).close()
    except psycopg.Error as exc:
        return _one_line(exc)
    return "no connection within the timeout"


def _first(row: tuple[Any, ...] | None) -> Any:
    """The first column of a row that its query always returns (an aggregate, a collection's registry row)."""
    if row is None:
        raise StoreError("PostgreSQL returned no row where one is always expected")
    return row[0]


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _redact(text: str, url: str) -> str:
    from agent.settings import redact

    return redact(text, url)


class _Redacting(logging.Filter):
    """Rewrites the pool's log records (a failed connection attempt quotes libpq's message) without the passwords."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for url in self.urls:
            message = _redact(message, url)
        record.msg, record.args = message, None
        return True


_redacting = _Redacting()


def _hide_password(url: str) -> None:
    """The pool logs each failed connection attempt (``psycopg.pool``): never with ``url``'s password, and only where
    the application set up logging (no last-resort lines on stderr: ``run`` reports the failure as one line)."""
    _redacting.urls.add(url)
    logger = logging.getLogger("psycopg.pool")
    if _redacting not in logger.filters:
        logger.addFilter(_redacting)
        logger.addHandler(logging.NullHandler())


def relation(name: str, kind: str = "table") -> str:
    """The name of collection ``name``'s relation ``kind`` (a key of ``RELATIONS``): plain where it fits in 63 bytes,
    else a prefix of the collection name and a hash of all of it (the module's docstring says why)."""
    suffix = RELATIONS[kind]
    plain = f"ambigqa_{name}{suffix}"
    if len(plain.encode()) <= MAX_IDENTIFIER:
        return plain
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    room = MAX_IDENTIFIER - len(f"ambigqa_${digest}{suffix}")
    return f"ambigqa_{name.encode()[:room].decode(errors='ignore')}${digest}{suffix}"


def _sql(template: str, name: str) -> Any:
    """``template`` with ``{table}``, ``{postings}`` and the index names ``{dense}``/``{bm25}``/``{doc}``/``{gin}``
    (the full-text index earlier versions built) for collection ``name``."""
    from psycopg import sql

    return sql.SQL(template).format(**{kind: sql.Identifier(relation(name, kind)) for kind in RELATIONS})


def collections(url: str) -> list[str]:
    def read(c: Connection) -> list[str]:
        _registry(c)
        return [r[0] for r in c.execute(f"SELECT name FROM {REGISTRY} ORDER BY name")]

    return run(url, read)


def _registry(c: Connection) -> None:
    c.execute(
        f"CREATE TABLE IF NOT EXISTS {REGISTRY} (name text PRIMARY KEY, backend text NOT NULL, "
        "dim int NOT NULL, created timestamptz NOT NULL DEFAULT now(), "
        "postings_rid bigint NOT NULL DEFAULT 0, average_length float8)"  # BM25: rows up to this rid are in postings
    )


class PostgresStore(Store, Writer):
    def __init__(self, url: str, name: str, backend: Backend):
        self.url, self.name, self.backend = url, name, backend

    @classmethod
    def open(cls, url: str, name: str) -> PostgresStore:
        def read(c: Connection) -> Any:
            _registry(c)
            return c.execute(f"SELECT backend FROM {REGISTRY} WHERE name = %s", (name,)).fetchone()

        found = run(url, read)
        if found is None:
            raise CollectionError(
                f"collection '{name}' does not exist on {where(url)}: run `ambigqa ingest CORPUS.jsonl --collection "
                f"{name}` first"
            )
        return cls(url, name, found[0])

    @classmethod
    def create(cls, url: str, name: str, backend: Backend) -> PostgresStore:
        """Open ``name``, creating its table (and recording ``backend``) when it is new."""

        def make(c: Connection) -> Backend:
            _registry(c)
            new = c.execute(f"INSERT INTO {REGISTRY} (name, backend, dim) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING "
                            "RETURNING name", (name, backend, EMBEDDING_DIM)).fetchone()  # fmt: skip
            existing = _existing(c, name)
            if new and existing:
                raise IngestError(
                    f"collection name {name!r} cannot be used on PostgreSQL: its relation {existing[0]} belongs to "
                    "another collection or to ambigqa itself; choose another name"
                )
            if {relation(name), relation(name, "postings")} - set(existing):  # made now: postings built from row 1
                c.execute(f"UPDATE {REGISTRY} SET postings_rid = 0, average_length = NULL WHERE name = %s", (name,))
            c.execute(_sql(
                "CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, doc_id text NOT NULL, title text NOT NULL, "
                f"text text NOT NULL, source text NOT NULL DEFAULT '', embedding vector({EMBEDDING_DIM}) NOT NULL, "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', title || ' ' || text)) STORED, "
                "rid bigint GENERATED ALWAYS AS IDENTITY UNIQUE)", name,
            ))  # fmt: skip
            c.execute(_sql("CREATE INDEX IF NOT EXISTS {doc} ON {table} (doc_id)", name))
            c.execute(_sql("CREATE TABLE IF NOT EXISTS {postings} (term text NOT NULL, rid bigint NOT NULL, "
                           "impact real NOT NULL)", name))  # fmt: skip
            _migrate(c, name)
            return _first(c.execute(f"SELECT backend FROM {REGISTRY} WHERE name = %s", (name,)).fetchone())

        return cls(url, name, run(url, make))

    def _query(self, template: str, params: Any = None) -> list[tuple]:
        return run(self.url, lambda c: c.execute(_sql(template, self.name), params).fetchall())

    def count(self) -> int:
        return int(self._query("SELECT count(*) FROM {table}")[0][0])

    def empty(self) -> bool:
        return not self._query("SELECT EXISTS (SELECT 1 FROM {table})")[0][0]

    def nearest(self, vectors: np.ndarray, k: int) -> list[list[Passage]]:
        query = _sql(
            "SELECT doc_id, title, text, 1 - (embedding <=> %(v)s) FROM {table} ORDER BY embedding <=> %(v)s "
            "LIMIT %(k)s", self.name,
        )  # fmt: skip

        def read(c: Connection) -> list[list[Passage]]:
            return [_passages(c.execute(query, {"v": v, "k": k}).fetchall()) for v in np.asarray(vectors)]

        return run(self.url, read)

    def sparse_many(self, queries: list[str], k: int) -> list[list[Passage]]:
        """BM25 top-k over the postings (see the module's docstring): each query term's ``POSTINGS_PER_TERM``
        highest-impact postings, weighted by its IDF, summed per row."""
        query = _sql(
            "WITH terms AS ("
            "  SELECT q.term, ln(1 + (%(rows)s - f.df + 0.5) / (f.df + 0.5)) AS idf"
            "  FROM unnest(%(terms)s::text[], %(dfs)s::float8[]) AS q(term, df) CROSS JOIN LATERAL ("
            "    SELECT least(coalesce(q.df, (SELECT count(*) FROM {postings} WHERE term = q.term)), %(rows)s) AS df) f"
            "), hits AS ("
            "  SELECT p.rid, sum(t.idf * p.impact) AS score FROM terms t CROSS JOIN LATERAL ("
            "    SELECT rid, impact FROM {postings} WHERE term = t.term ORDER BY impact DESC LIMIT %(depth)s) p"
            "  GROUP BY p.rid ORDER BY score DESC LIMIT %(k)s"
            ") SELECT r.doc_id, r.title, r.text, h.score FROM hits h JOIN {table} r ON r.rid = h.rid "
            "ORDER BY h.score DESC", self.name,
        )  # fmt: skip
        frequency, rows = self._term_statistics()

        def read(c: Connection) -> list[list[Passage]]:
            found: list[list[Passage]] = []
            for text in queries:
                terms = query_terms(text)  # words of letters and digits: 'simple' keeps each as it is
                if not terms:
                    found.append([])
                    continue
                dfs = [frequency[t] * rows if t in frequency else None for t in terms]
                params = {"terms": terms, "dfs": dfs, "rows": max(rows, 1.0), "depth": max(POSTINGS_PER_TERM, k),
                          "k": k}  # fmt: skip
                found.append(_passages(c.execute(query, params).fetchall()))
            return found

        try:
            return run(self.url, read)
        except _missing_relation() as exc:
            raise CollectionError(
                f"collection '{self.name}' on {where(self.url)} has no BM25 postings (an earlier version loaded it): "
                f"run `ambigqa ingest CORPUS.jsonl --collection {self.name}` again to build them"
            ) from exc

    def _term_statistics(self) -> tuple[dict[str, float], float]:
        """(lexeme → share of rows, row estimate) from the planner's statistics on the ``tsvector`` column
        (``ANALYZE``, kept current by autovacuum): the most common lexemes' document frequencies, re-read every few
        minutes."""
        cached = _statistics.get((self.url, self.name))
        if cached and time.monotonic() - cached[0] < STATISTICS_TTL:
            return cached[1]
        table = relation(self.name)
        rows = self._query(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples FROM pg_class c "
            "LEFT JOIN pg_stats s ON s.tablename = %s AND s.attname = 'tsv' WHERE c.oid = quote_ident(%s)::regclass",
            (table, table),
        )
        elements, shares, count = rows[0] if rows else (None, None, 0)
        frequency = dict(zip(elements, shares)) if elements and shares else {}  # none before the first ANALYZE
        count = float(count or 0)
        statistics = (frequency, count if count > 0 else float(self.count()))  # reltuples is -1 or 0 before it
        _statistics[(self.url, self.name)] = (time.monotonic(), statistics)
        return statistics

    def vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        return dict(self._query("SELECT key, embedding FROM {table} WHERE key = ANY(%s)", (keys,)))

    def passages(self, ids: list[str]) -> list[Passage]:
        if not ids:
            return []
        rows = self._query("SELECT doc_id, title, text, NULL FROM {table} WHERE doc_id = ANY(%s)", (list(ids),))
        found = {p.id: p for p in _passages(rows)}
        return [found[i] for i in ids if i in found]

    def neighbours(self, passages: list[Passage], k: int) -> Neighbours:
        if not passages:
            return {}
        rows = self._query(
            "SELECT s.doc_id, n.doc_id, n.title, n.text, n.similarity FROM {table} s CROSS JOIN LATERAL ("
            "  SELECT o.doc_id, o.title, o.text, 1 - (o.embedding <=> s.embedding) AS similarity FROM {table} o"
            "  WHERE o.doc_id <> s.doc_id ORDER BY o.embedding <=> s.embedding LIMIT %(k)s) n "
            "WHERE s.doc_id = ANY(%(ids)s) ORDER BY s.doc_id, n.similarity DESC",
            {"ids": [p.id for p in passages], "k": k},
        )
        found: Neighbours = {p.id: [] for p in passages}
        for source, doc_id, title, text, similarity in rows:
            found[source].append((Passage(id=doc_id, title=title, text=text), round(float(similarity), 6)))
        return found

    # the write side (ingest)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One ingest per collection at a time, across machines: a session advisory lock held on its own connection."""
        with pool(self.url).connection() as c:
            c.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"ambigqa-ingest-{self.name}",))
            c.commit()
            try:
                yield
            finally:
                c.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"ambigqa-ingest-{self.name}",))
                c.commit()

    def stored_ids(self, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        return dict(self._query("SELECT key, doc_id FROM {table} WHERE key = ANY(%s)", (keys,)))

    def relabel(self, ids: dict[str, str]) -> None:
        if not ids:
            return
        update = _sql(
            "UPDATE {table} r SET doc_id = v.doc_id FROM unnest(%s::text[], %s::text[]) AS v(key, doc_id) "
            "WHERE r.key = v.key",
            self.name,
        )
        run(self.url, lambda c: c.execute(update, (list(ids), list(ids.values()))))

    def versions(self, doc_ids: list[str]) -> list[tuple[str, str]]:
        if not doc_ids:
            return []
        return [(k, d) for k, d in self._query("SELECT key, doc_id FROM {table} WHERE doc_id = ANY(%s)", (doc_ids,))]

    def add(self, rows: list[Row]) -> None:
        self.replace(rows, [])

    def delete(self, keys: list[str]) -> None:
        self.replace([], keys)

    def replace(self, rows: list[Row], stale: list[str]) -> None:
        """``rows`` in and the ``stale`` keys out in one transaction: a reader sees an edited passage's old version or
        its new one, and a killed ingest leaves neither both nor none."""
        if not rows and not stale:
            return

        def write(c: Connection) -> None:
            if rows:
                self._copy(c, rows)
            if stale:
                self._remove(c, stale)

        run(self.url, write)

    def _copy(self, c: Connection, rows: list[Row]) -> None:
        """A COPY in binary format: the fastest way in (the generated ``tsvector`` is computed on the way). Once the
        postings exist, the new rows' postings go in with them, so sparse search finds them at once; the first load
        leaves them to ``finish``'s bulk build."""
        copy = _sql("COPY {table} (key, doc_id, title, text, source, embedding) FROM STDIN (FORMAT BINARY)", self.name)
        with c.cursor() as cursor, cursor.copy(copy) as target:
            target.set_types(["text", "text", "text", "text", "text", "vector"])
            for r in rows:
                target.write_row((r.key, r.doc_id, r.title, r.text, r.source, np.asarray(r.vector, np.float32)))
        if self._average_length(c) is not None:
            self._add_postings(c)

    def _remove(self, c: Connection, keys: list[str]) -> None:
        """The rows, and their postings: each recomputed exactly as it was stored, so the postings index finds it by
        ``(term, impact)`` without reading the term's other postings."""
        average = self._average_length(c)
        if average is not None:
            c.execute(_sql(
                "DELETE FROM {postings} p USING (" + _impacts("r.key = ANY(%(keys)s)") + ") x "
                "WHERE p.term = x.term AND p.impact = x.impact AND p.rid = x.rid", self.name,
            ), _bm25(average) | {"keys": keys})  # fmt: skip
        c.execute(_sql("DELETE FROM {table} WHERE key = ANY(%s)", self.name), (keys,))

    def stored(self, page_size: int = 5000) -> Iterator[list[tuple[str, str]]]:
        after = ""
        while True:
            page = self._query(
                "SELECT key, doc_id FROM {table} WHERE key > %s ORDER BY key LIMIT %s", (after, page_size)
            )
            if page:
                yield [(k, d) for k, d in page]
            if len(page) < page_size:
                return
            after = page[-1][0]

    def finish(self) -> None:
        """Build the HNSW index and the BM25 postings once the first load is in (a bulk build is much faster than
        growing them row by row); later loads have added their rows' postings as they inserted, and this adds any a
        killed run left out. Refresh the planner's statistics the sparse side reads."""

        def build(c: Connection) -> None:
            c.execute("SET maintenance_work_mem = '2GB'")
            c.execute(_sql("ALTER TABLE {table} ALTER COLUMN tsv SET STATISTICS 1000", self.name))  # 10⁴ lexemes
            c.execute(_sql("ANALYZE {table}", self.name))
            self._add_postings(c)
            c.execute(_sql("CREATE INDEX IF NOT EXISTS {bm25} ON {postings} (term, impact DESC) INCLUDE (rid)",
                           self.name))  # fmt: skip
            c.execute(_sql("CREATE INDEX IF NOT EXISTS {dense} ON {table} USING hnsw (embedding vector_cosine_ops)",
                           self.name))  # fmt: skip

        run(self.url, build)
        run(self.url, lambda c: _vacuum(c, _sql("VACUUM (ANALYZE) {postings}", self.name)))  # index-only scans
        _statistics.pop((self.url, self.name), None)

    def _average_length(self, c: Connection) -> float | None:
        """BM25's average document length, fixed by the first build; None before it."""
        return _first(c.execute(f"SELECT average_length FROM {REGISTRY} WHERE name = %s", (self.name,)).fetchone())

    def _add_postings(self, c: Connection) -> None:
        """The postings of the rows past the registry's ``postings_rid``. The first build fixes BM25's average
        document length (from a sample of about 20,000 rows): later loads of the same kind of text move it little,
        and every stored impact stays as it was computed."""
        after = _first(c.execute(f"SELECT postings_rid FROM {REGISTRY} WHERE name = %s", (self.name,)).fetchone())
        last = _first(c.execute(_sql("SELECT max(rid) FROM {table}", self.name)).fetchone())
        if last is None or last <= after:
            return
        average = self._average_length(c)
        if average is None:
            rows = _first(c.execute(_sql("SELECT count(*) FROM {table}", self.name)).fetchone())
            share = min(100.0, 100.0 * 20000 / max(rows, 1))
            average = _first(c.execute(_sql(f"SELECT avg({_LENGTH}) FROM {{table}} r TABLESAMPLE BERNOULLI (%s)",
                                            self.name), (share,)).fetchone())  # fmt: skip
            average = float(average or 1.0)
        c.execute(_sql(
            "INSERT INTO {postings} (term, rid, impact) " + _impacts("r.rid > %(after)s AND r.rid <= %(last)s"),
            self.name,
        ), _bm25(average) | {"after": after, "last": last})  # fmt: skip
        c.execute(f"UPDATE {REGISTRY} SET postings_rid = %s, average_length = %s WHERE name = %s",
                  (last, average, self.name))  # fmt: skip

    def drop(self) -> None:
        def drop(c: Connection) -> None:
            c.execute(_sql("DROP TABLE IF EXISTS {postings}", self.name))
            c.execute(_sql("DROP TABLE IF EXISTS {table}", self.name))
            c.execute(f"DELETE FROM {REGISTRY} WHERE name = %s", (self.name,))

        run(self.url, drop)


_LENGTH = "(SELECT sum(coalesce(array_length(positions, 1), 1)) FROM unnest(r.tsv))"  # words, stop words too


def _impacts(rows: str) -> str:
    """(term, rid, impact) of the rows the condition ``rows`` picks: BM25's term-frequency part, stop words left out.
    Each row's length is counted once, behind the ``OFFSET 0`` fence: inlined, the planner recounts it per posting
    (19× slower: 28.8 s against 1.5 s for 20,000 rows)."""
    return (
        "SELECT u.lexeme AS term, r.rid, (f.tf * %(k1_plus)s / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * r.length / "
        f"%(average)s)))::real AS impact FROM (SELECT r.rid, r.tsv, {_LENGTH} AS length FROM {{table}} r WHERE {rows} "
        "OFFSET 0) r CROSS JOIN LATERAL unnest(r.tsv) u CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, "
        "1), 1)::float8 AS tf) f WHERE NOT u.lexeme = ANY(%(stop)s)"
    )


def _bm25(average: float) -> dict[str, Any]:
    return {"k1_plus": BM25_K1 + 1, "k1": BM25_K1, "b": BM25_B, "average": average, "stop": sorted(STOP_WORDS)}


def _existing(c: Connection, name: str) -> list[str]:
    """Which of collection ``name``'s relations exist."""
    names = [relation(name, kind) for kind in RELATIONS]
    found = c.execute("SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass(quote_ident(n)) IS NOT NULL", (names,))
    return [r[0] for r in found]


def _migrate(c: Connection, name: str) -> None:
    """A registry and a table an earlier version made gain what the BM25 postings need: the registry's two columns,
    the table's row ids (its GIN index goes). Checked first: an ``ALTER TABLE`` locks out readers even when it
    changes nothing."""
    registry = {r[0] for r in c.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (REGISTRY,))}  # fmt: skip
    if "postings_rid" not in registry:
        c.execute(f"ALTER TABLE {REGISTRY} ADD COLUMN postings_rid bigint NOT NULL DEFAULT 0, "
                  "ADD COLUMN average_length float8")  # fmt: skip
    table = {r[0] for r in c.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (relation(name),))}  # fmt: skip
    if "rid" not in table:
        c.execute(_sql("ALTER TABLE {table} ADD COLUMN rid bigint GENERATED ALWAYS AS IDENTITY UNIQUE", name))
        c.execute(_sql("DROP INDEX IF EXISTS {gin}", name))


def _vacuum(c: Connection, statement: Any) -> None:
    """``VACUUM`` runs outside a transaction: on this connection in autocommit mode, restored after."""
    c.commit()
    c.autocommit = True
    try:
        c.execute(statement)
    finally:
        c.autocommit = False


def _missing_relation() -> tuple[type[Exception], ...]:
    from psycopg.errors import UndefinedColumn, UndefinedTable

    return UndefinedTable, UndefinedColumn


def _passages(rows: list[tuple]) -> list[Passage]:
    return [Passage(id=d, title=t, text=x, score=None if s is None else round(float(s), 6)) for d, t, x, s in rows]
