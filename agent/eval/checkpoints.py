"""Eval checkpoints: each run's graph state after every step (``ambigqa eval --checkpoints``), so that a later eval can
run a method again from one node on over the stored runs (``--replay RUN --at NODE``).

A replay measures a change to a late step (an answer prompt, a text rule, an answer option) on the very passages and
interpretations the stored runs had: the steps before NODE are not run again, so they cost no LLM call and bring none
of the local server's run-to-run differences into the comparison.

The states live in ``OUT/checkpoints.sqlite`` (LangGraph's SQLite saver), one thread a run, named in its results row
(``checkpoint_thread``). A replay copies the source run's file into its own OUT and forks each thread at the
checkpoint before NODE's first step (LangGraph's time travel); the source run stays as it was.
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from agent.errors import ConfigError, ReplayError

FILE = "checkpoints.sqlite"


@dataclass(frozen=True)
class RunCheckpoint:
    """Where one run keeps its states: a saver and a thread; with ``at``, a replay from the checkpoint before the
    first step of node ``at``."""

    saver: Any
    thread_id: str
    at: str | None = None

    def start(self, graph: Any, inputs: Any, config: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        """The graph compiled with the saver, what to stream into it and its config: the inputs on a new thread, or
        nothing from the stored checkpoint before ``at``."""
        graph = graph.copy(update={"checkpointer": self.saver})
        config = {**config, "configurable": {"thread_id": self.thread_id}}
        if self.at is None:
            return graph, inputs, config
        return graph, None, {**config, **before(graph, config, self.at)}


def before(graph: Any, config: dict[str, Any], node: str) -> dict[str, Any]:
    """The config of the thread's checkpoint whose next step is ``node``'s first (the stored run's, not a fork's)."""
    found = [snapshot.config for snapshot in graph.get_state_history(config) if node in snapshot.next]
    if not found:
        thread = config["configurable"]["thread_id"]
        raise ReplayError(f"the stored run {thread} never reached node '{node}': it cannot be replayed from there")
    return found[-1]  # the history is newest first


@dataclass
class Checkpoints:
    """The checkpoint file of one eval."""

    path: Path

    @cached_property
    def saver(self) -> Any:
        from agent.savers import sqlite_saver

        return sqlite_saver(str(self.path))

    def new_run(self, method: str, question_id: str) -> RunCheckpoint:
        """A fresh thread for one run (a retried run gets another, so no state of a failed try leaks into it)."""
        return RunCheckpoint(self.saver, f"{method}/{question_id}/{secrets.token_hex(4)}")

    def replay(self, thread_id: str, at: str) -> RunCheckpoint:
        return RunCheckpoint(self.saver, thread_id, at)

    def close(self) -> None:
        """Close the file, its write-ahead log folded in, so the folder can be copied as it is."""
        if "saver" in self.__dict__:
            self.saver.conn.close()


def copy_checkpoints(source: Path, target: Path) -> None:
    """``source``'s checkpoints into ``target`` unless it has them already (a resumed replay keeps its own forks)."""
    if target.exists():
        return
    if not source.is_file():
        raise ConfigError(f"{source} does not exist: replay a run made with --checkpoints")
    target.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
