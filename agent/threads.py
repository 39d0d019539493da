"""Clarify threads: the router's checkpointer, where a run waits for a person to pick among its interpretations.

SQLite under ``AMBIGQA_HOME`` by default (one machine); PostgreSQL when ``AMBIGQA_DATABASE_URL`` is set, so a thread
started by one process resumes in any other. A thread keeps its question in its state and its run options (LLM,
collection, router options) in its checkpoints' metadata: nothing about it lives outside the database.

A resume runs under a claim, a row in the same database (``ambigqa_resume_claims``) taken atomically before the thread
is read and released after the run: of concurrent resumes of one thread, in one process or in several, exactly one
runs and the others are a ``ThreadBusyError``. A resume that fails leaves the thread waiting for its choice again.
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, cast

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import StateSnapshot
from pydantic import BaseModel, Field

from agent.errors import StoreError, ThreadBusyError, UnknownThreadError
from agent.registry import method_module
from agent.savers import checkpoint_serde, sqlite_saver, threaded_postgres_saver
from agent.schemas import Disambiguation
from agent.settings import get_settings

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import DictRow
    from psycopg_pool import ConnectionPool

OPTIONS_KEY = "ambigqa_options"  # checkpoint metadata: the thread's run options as JSON (metadata keeps scalars only)
WAIT_S = 5.0  # how long a request waits for a database connection before it is a StoreError
PING_S = 2.0  # how long ``ping`` (a health probe, which has its own deadline) waits for one
CONNECT_S = 5  # libpq's connect_timeout: an unreachable host fails within it
THREAD_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
SETUP_LOCK = 0x616D6269  # PostgreSQL advisory lock: replicas starting together create the tables once
CLAIM_S = 3600.0  # a resume claim older than this is a crashed process's, taken over (no run lasts an hour)
CLAIMS_TABLE = """CREATE TABLE IF NOT EXISTS ambigqa_resume_claims (
    thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL)"""
CLAIM = """INSERT INTO ambigqa_resume_claims (thread_id, owner, claimed_at) VALUES (%s, %s, %s)
    ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, claimed_at = excluded.claimed_at
    WHERE ambigqa_resume_claims.claimed_at < %s"""  # one row written: ours (new, or taken over from a stale claim)
RELEASE = "DELETE FROM ambigqa_resume_claims WHERE thread_id = %s AND owner = %s"


class ClarifyResult(BaseModel):
    """What ``agent.clarify`` and ``agent.resume`` return: the interpretations to pick from, or the answer."""

    thread_id: str = Field(description="resume the thread with this id")
    status: Literal["needs_choice", "answered"]
    question: str
    interpretations: list[str] = Field(
        default_factory=list, description="the interpretations to pick from, numbered from 1"
    )
    answer: str | None = None
    disambiguations: list[Disambiguation] | None = None
    route: str | None = Field(default=None, description="clarify, or the method a clear question went to")
    chosen: list[str] | None = Field(default=None, description="the interpretations answered")


@dataclass(frozen=True)
class Thread:
    """A thread: its id and its run options (the router's context values), and the LangGraph config carrying both."""

    id: str
    options: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.id}, "metadata": {OPTIONS_KEY: json.dumps(self.options)}}


class Threads:
    """The clarify threads of one database: its checkpointer and the router compiled with it."""

    def __init__(self, location: str, postgres: bool):
        self.location, self.postgres = location, postgres
        self.saver = _postgres_saver(location) if postgres else sqlite_saver(location)
        self.graph = method_module("router").build(self.saver)
        self._ready = False
        self._lock = threading.Lock()

    def start(self, options: dict[str, Any]) -> Thread:
        """A new thread for a run with ``options`` (the router's context values)."""
        self._setup()
        return Thread(id=f"clarify-{secrets.token_hex(8)}", options=options)

    @contextmanager
    def claim(self, thread_id: str) -> Iterator[tuple[Thread, ClarifyResult]]:
        """The thread ``thread_id`` and the choice it waits for, for one caller at a time: ``ThreadBusyError`` while
        another holds it, ``UnknownThreadError`` if it waits for none.

        The claim comes first: while a resume runs, the thread's state passes through steps that look answered. It is
        released after the block, whatever its outcome; after a failed resume the thread is rewound to its choice.
        """
        self._setup()
        owner, now = secrets.token_hex(8), time.time()
        if self._execute(CLAIM, (thread_id, owner, now, now - CLAIM_S)) != 1:
            raise ThreadBusyError(
                f"clarify thread '{thread_id}' is already being resumed by another request: wait for its answer,"
                " or resume it again if that one fails"
            )
        try:
            latest, asked = self._snapshots(thread_id)
            metadata: dict[str, Any] = dict(asked.metadata or {})  # LangGraph's TypedDict lacks the keys a run adds
            options = metadata[OPTIONS_KEY]
            if asked is not latest:  # a failed resume ran past the choice: branch off where it was asked
                self.graph.update_state({**asked.config, "metadata": {OPTIONS_KEY: options}}, None)
            thread = Thread(id=thread_id, options=json.loads(options))
            yield thread, clarify_result(thread_id, asked.values, asked.interrupts)
        finally:
            self._execute(RELEASE, (thread_id, owner))

    def ping(self) -> None:
        """``StoreError`` when the checkpointer's database cannot be used (for /health): one cheap read."""
        with self.reachable():
            if isinstance(self.saver, SqliteSaver):
                with self.saver.lock:
                    self.saver.conn.execute("SELECT count(*) FROM sqlite_master")
            else:
                with _pool(self.saver).connection(timeout=PING_S) as conn:
                    conn.execute("SELECT 1")

    @contextmanager
    def reachable(self) -> Iterator[None]:
        """Database failures inside the block become one ``StoreError`` naming where the threads live."""
        try:
            yield
        except sqlite3.DatabaseError as exc:  # locked, unwritable, or not a database
            raise StoreError(f"the clarify threads' file {self.location} cannot be used: {exc}") from None
        except _postgres_errors(self.postgres) as exc:
            raise StoreError(
                f"the clarify threads' PostgreSQL at {self.where()} cannot be reached ({_why_down(self.location, exc)}):"
                " check that it runs and that AMBIGQA_DATABASE_URL names it"
            ) from None

    def where(self) -> str:
        """The database without its password: host:port for PostgreSQL, the file for SQLite."""
        if not self.postgres:
            return self.location
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.location)
        return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}"

    def _snapshots(self, thread_id: str) -> tuple[StateSnapshot, StateSnapshot]:
        """The thread's latest checkpoint and the one asking for its choice: the same, or an earlier one when a resume
        failed after the choice; ``UnknownThreadError`` if it asks for none."""
        probe = {"configurable": {"thread_id": thread_id}}
        latest = self.graph.get_state(probe) if THREAD_ID.fullmatch(thread_id) else None
        if latest is None or OPTIONS_KEY not in (latest.metadata or {}):
            raise UnknownThreadError(f"no clarify thread '{thread_id}' to resume (threads live in {self.where()})")
        if latest.interrupts:
            return latest, latest
        asked = next((s for s in self.graph.get_state_history(probe) if s.interrupts), None) if latest.next else None
        if asked is None:
            why = "it stopped on an error before its choice" if latest.next else "it has been answered"
            raise UnknownThreadError(f"no clarify thread '{thread_id}' to resume: {why}")
        return latest, asked

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement on the checkpointer's database and commit it; the rows it changed."""
        if isinstance(self.saver, SqliteSaver):
            with self.saver.lock:
                rows = self.saver.conn.execute(sql.replace("%s", "?"), params).rowcount
                self.saver.conn.commit()
                return rows
        with _pool(self.saver).connection() as conn:
            return conn.execute(sql, params).rowcount

    def _setup(self) -> None:
        """Create the checkpoint and claim tables once per process (PostgreSQL: one replica at a time)."""
        if self._ready:
            return
        with self._lock, self.reachable():
            if isinstance(self.saver, SqliteSaver):
                self._execute(CLAIMS_TABLE)  # SqliteSaver creates its own tables
            else:
                from langgraph.checkpoint.postgres import PostgresSaver

                with _pool(self.saver).connection() as conn:
                    conn.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
                    try:
                        PostgresSaver(conn).setup()
                        conn.execute(CLAIMS_TABLE)
                    finally:
                        conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
            self._ready = True


def clarify_result(thread_id: str, values: dict[str, Any], interrupts: tuple[Any, ...]) -> ClarifyResult:
    """A thread's state as a ``ClarifyResult``: its pending choice (``interrupts``), or its answer."""
    common = {"thread_id": thread_id, "question": values["question"]}
    if interrupts:
        return ClarifyResult(status="needs_choice", interpretations=interrupts[0].value["interpretations"], **common)
    return ClarifyResult(
        status="answered", interpretations=values.get("interpretations", []), answer=values.get("answer", ""),
        disambiguations=values.get("disambiguations", []), route=values.get("route"), chosen=values.get("chosen"),
        **common,
    )  # fmt: skip


def open_threads() -> Threads:
    """The clarify threads of this process's settings (one checkpointer and connection pool per database)."""
    settings = get_settings()
    if settings.database_url:
        return _threads(settings.database_url, True)
    settings.home.mkdir(parents=True, exist_ok=True)
    return _threads(str(settings.home / "checkpoints.sqlite"), False)


@lru_cache(maxsize=8)
def _threads(location: str, postgres: bool) -> Threads:
    return Threads(location, postgres)


def _postgres_saver(url: str) -> PostgresSaver:
    """A saver over a connection pool: connections are checked before use, and remade when the database returns."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from agent.retrieval.postgres_store import RECONNECT_S

    pool: ConnectionPool[Connection[DictRow]] = ConnectionPool(
        url, min_size=1, max_size=8, open=False, timeout=WAIT_S, check=ConnectionPool.check_connection,
        reconnect_timeout=RECONNECT_S, name="ambigqa-threads",
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row, "connect_timeout": CONNECT_S},
    )  # fmt: skip
    pool.open(wait=False)
    atexit.register(pool.close)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # its retry warnings repeat what the StoreError says
    return threaded_postgres_saver()(pool, serde=checkpoint_serde())


def _pool(saver: PostgresSaver) -> ConnectionPool[Connection[DictRow]]:
    """The connection pool ``_postgres_saver`` gave ``saver`` (its ``conn`` is typed as a pool or one connection)."""
    return cast("ConnectionPool[Connection[DictRow]]", saver.conn)


def _postgres_errors(postgres: bool) -> tuple[type[Exception], ...]:
    if not postgres:
        return ()
    import psycopg

    return (psycopg.OperationalError,)


def _why_down(url: str, exc: Exception) -> str:
    """The connection error's first line, password hidden; behind a pool timeout, the error of one direct try."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        try:
            psycopg.connect(url, connect_timeout=CONNECT_S).close()
        except psycopg.OperationalError as direct:
            exc = direct
    reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    password = conninfo_to_dict(url).get("password")
    return reason.replace(str(password), "***") if password else reason
