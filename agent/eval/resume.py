"""How eval and bench runs resume: finished work is written down as it finishes, and a re-run skips it.

Rows: a JSONL file, one finished unit a line, appended and flushed at once (``RowLog``). Each row carries what
identifies it (method or configuration, question id) and the settings it was made with; a re-run reads the rows
(``read_rows``; a line cut by a crash is skipped and its work runs again), keeps those made with its own settings
(``made_with``) and skips what they cover. The harness's ``results.jsonl`` (settings: the provenance key), the
retrieval suite's ``.retrieval.jsonl`` and SUNAR recall's ``.nar.jsonl`` (settings: the fields they were run with).

Arrays: the ingest suite keeps each batch's vectors, too large for JSON, as ``batch-START.npz`` in a folder named by
its passages and encoder (``save_batch``, ``saved_batches``). The scale suite's per-(store, size) JSON files are its
results and its resume at once (``agent.eval.scale``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def read_rows(path: Path | None) -> list[dict[str, Any]]:
    """The file's rows (none when there is no file); a line cut by a crash is skipped."""
    if not path or not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def made_with(rows: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows whose fields equal ``settings``."""
    return [row for row in rows if all(row.get(name) == value for name, value in settings.items())]


class RowLog:
    """Appends rows to a JSONL file as they finish, one line each, closed after each; nothing when ``path`` is None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, row: dict[str, Any]) -> None:
        if not self.path:
            return
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def saved_batches(folder: Path | None) -> dict[int, dict[str, np.ndarray]]:
    """The batches ``save_batch`` kept in ``folder``: start → its named arrays."""
    if not folder or not folder.is_dir():
        return {}
    done = {}
    for path in folder.glob("batch-*.npz"):
        with np.load(path) as saved:
            done[int(path.stem.split("-")[1])] = {name: saved[name] for name in saved.files}
    return done


def save_batch(folder: Path, start: int, arrays: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".batch-{start}.tmp"
    with tmp.open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stubs match **arrays against allow_pickle: bool
    tmp.replace(folder / f"batch-{start}.npz")  # a run stopped mid-write leaves no half batch behind
