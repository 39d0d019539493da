"""Ingest a JSONL corpus ``{id, title, text}`` into a collection: validated first, then streamed in batches; a sync.

Passages are stored under a hash of their content with their document id beside it, so re-ingesting an unchanged
file is a no-op, an edited passage (same id, new text) replaces its old version, an unchanged one under a new id is
relabelled, and ``prune`` removes passages whose id left the file. Document ids are unique in a collection: an id
the file lists with several texts (ASQA's pool has 214) is stored as ``ID``, ``ID#2``, … in the file's order, so
retrieval, fusion and citations never mistake one passage for another. A text is stored once: a later id with the
same title and text as an earlier one is left out, and the report names it. Each batch removes every stored version
of its ids other than the file's (in the same transaction as the new ones on PostgreSQL), so an old version a killed
run left beside its new one goes with the next run. Nothing proportional to the corpus is held in
memory: the file is read twice (validation, then one batch at a time), each batch asks the store which of its
passages are stored already, and ``prune`` keeps the file's ids in a temporary SQLite file. A killed ingest resumes
where it stopped: a re-run skips what is stored. One ingest per collection at a time (``Writer.locked``). With
``vectors`` (Parquet ``id, vector`` in the corpus's order, e.g. computed on a GPU elsewhere) nothing is embedded
here.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from agent.errors import IngestError
from agent.retrieval.embeddings import EMBEDDING_DIM, Backend, embed, usable
from agent.retrieval.store import Row, Writer, check_name, content_id
from agent.retrieval.writers import open_writer
from agent.schemas import titled_text
from agent.settings import Settings, get_settings

VECTOR_CHECK = 0.9  # mean cosine of precomputed vectors against our own encoder's, over a batch's first passages


class CorpusRecord(BaseModel):
    id: str
    title: str = ""
    text: str
    source: str = ""


class IngestReport(BaseModel):
    collection: str
    records: int
    added: int
    skipped: int
    seconds: float
    updated: int = 0  # of the added: new versions of passages already stored under the same id
    renamed: int = 0  # passages stored as ID#2, ID#3, …: their id is listed earlier in the file with another text
    relabelled: int = 0  # stored passages given a new id (nothing re-embedded)
    removed: int = 0  # old versions replaced, and with prune, passages that left the file
    dropped: int = 0  # records left out: an earlier id of the file has the same title and text
    dropped_ids: list[tuple[str, str]] = []  # (id left out, the id its text is stored under), the first few
    backend: Backend = "torch"  # the encoder the collection is embedded with
    index_seconds: float = 0.0  # of the seconds: building indexes after the load (PostgreSQL's first load)

    @property
    def passages_per_s(self) -> float:
        return self.added / self.seconds if self.seconds and self.added else 0.0

    def id_changes(self) -> list[str]:
        """What happened to ids, where anything did: passages relabelled, and texts stored as ``ID#2``, …"""
        changes = []
        if self.relabelled:
            changes.append(f"{self.relabelled} given a new id")
        if self.renamed:
            changes.append(f"{self.renamed} stored as ID#2, … (an id listed before with another text)")
        if self.dropped:
            pairs = ", ".join(f"{left!r} as {kept!r}" for left, kept in self.dropped_ids)
            more = ", …" if self.dropped > len(self.dropped_ids) else ""
            changes.append(f"{self.dropped} left out, their title and text stored under an earlier id ({pairs}{more})")
        return changes

    def summary(self) -> str:
        """One line for a run's log: what was added, kept, relabelled and renamed."""
        return ", ".join([f"{self.added} added", f"{self.skipped} already stored", *self.id_changes()])


def records(path: Path) -> Iterator[CorpusRecord]:
    """Every record of ``path``, parsed and validated one line at a time; the first bad line is an ``IngestError``."""
    if not path.is_file():
        raise IngestError(f"corpus file {path} does not exist")
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IngestError(
                    f"{path}:{number}: not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                    "nothing was ingested"
                ) from None
            if not line.strip():
                continue
            try:
                record = CorpusRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError) as exc:
                reason = str(exc).splitlines()[0]
                raise IngestError(
                    f"{path}:{number}: not a {{id, title, text}} JSON record ({reason}); nothing was ingested"
                ) from None
            if not record.text.strip():
                raise IngestError(f"{path}:{number}: passage '{record.id}' has empty text; nothing was ingested")
            yield record


def read_corpus(path: Path) -> list[CorpusRecord]:
    """Every record of a (small) corpus file, validated."""
    found = list(records(path))
    if not found:
        raise IngestError(f"corpus file {path} holds no passages")
    return found


def count_records(path: Path) -> int:
    """Validate the whole file before anything is written, so a bad file changes nothing."""
    total = sum(1 for _ in records(path))
    if not total:
        raise IngestError(f"corpus file {path} holds no passages")
    return total


def vector_batches(path: Path, batch_size: int) -> Iterator[tuple[list[str], np.ndarray]]:
    """(ids, vectors) of a Parquet file with columns ``id`` and ``vector``, one batch at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise IngestError("--vectors needs the package 'pyarrow': pip install pyarrow") from None
    if not path.is_file():
        raise IngestError(f"vectors file {path} does not exist")
    try:
        source = pq.ParquetFile(path)
    except Exception as exc:
        raise IngestError(f"{path}: not a Parquet file ({exc})") from None
    missing = {"id", "vector"} - set(source.schema_arrow.names)
    if missing:
        raise IngestError(f"{path}: no column {', '.join(sorted(missing))} (expected columns id, vector)")
    for batch in source.iter_batches(batch_size=batch_size, columns=["id", "vector"]):
        ids = [str(i) for i in batch.column("id").to_pylist()]
        vectors = np.asarray(batch.column("vector").to_pylist(), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != EMBEDDING_DIM:
            raise IngestError(f"{path}: vectors must have {EMBEDDING_DIM} dimensions (all-MiniLM-L6-v2)")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        yield ids, vectors / np.maximum(norms, 1e-12)


def ingest(
    path: Path | str,
    collection: str,
    *,
    settings: Settings | None = None,
    batch_size: int = 128,
    progress: bool = True,
    prune: bool = False,
    vectors: Path | str | None = None,
    check_vectors: bool = True,
) -> IngestReport:
    """Sync ``path`` into ``collection``; with ``vectors``, store those instead of embedding (``check_vectors``: the
    first batch's vectors must agree with our encoder's, a guard against vectors from another model)."""
    start = time.perf_counter()
    path = Path(path)
    check_name(collection)
    total = count_records(path)
    settings = settings or get_settings()
    writer = open_writer(collection, usable(settings.embeddings), settings)
    tally: dict[str, Any] = {"added": 0, "skipped": 0, "updated": 0, "removed": 0, "renamed": 0, "relabelled": 0,
                             "dropped": 0, "dropped_ids": []}  # fmt: skip
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="passage", desc=f"ingest → {collection} ({writer.backend})")
    try:
        with writer.locked(), tempfile.TemporaryDirectory() as folder:
            scratch = _Scratch(Path(folder) / "scratch.sqlite")
            batches = _batches(records(path), batch_size)
            given = vector_batches(Path(vectors), batch_size) if vectors else None
            for number, batch in enumerate(batches):
                supplied = _match(next(given, None), batch, Path(vectors)) if given and vectors else None
                if supplied is not None and check_vectors and number == 0:
                    _check_vectors(batch, supplied, writer.backend)
                batch, kept = scratch.distinct(batch, tally)
                _sync(writer, batch, None if supplied is None else supplied[kept], tally)
                if prune:
                    scratch.add([r.id for r in batch])
                if bar:
                    bar.update(len(batch))
            if given and next(given, None) is not None:
                raise IngestError(f"{vectors} holds more rows than {path}: the files must list the same passages")
            if prune:
                tally["removed"] += _prune(writer, scratch)
            began = time.perf_counter()
            writer.finish()
            tally["index_seconds"] = time.perf_counter() - began
    finally:
        if bar:
            bar.close()
    tally["index_seconds"] = round(tally.get("index_seconds", 0.0), 3)
    return IngestReport(
        collection=collection, records=total, seconds=round(time.perf_counter() - start, 3), backend=writer.backend,
        **tally,
    )  # fmt: skip


def _batches(items: Iterator[CorpusRecord], size: int) -> Iterator[list[CorpusRecord]]:
    batch: list[CorpusRecord] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _match(given: tuple[list[str], np.ndarray] | None, batch: list[CorpusRecord], source: Path) -> np.ndarray:
    ids = [r.id for r in batch]
    if given is None or given[0] != ids:
        got = "no more rows" if given is None else f"ids {given[0][:2]}…"
        raise IngestError(
            f"{source} does not line up with the corpus at passage '{ids[0]}' ({got}): the Parquet file must list the "
            "corpus's passages in the same order"
        )
    return given[1]


def _check_vectors(batch: list[CorpusRecord], vectors: np.ndarray, backend: Backend, sample: int = 8) -> None:
    ours = embed([titled_text(r.title, r.text) for r in batch[:sample]], backend=backend)
    agreement = float(np.mean(np.sum(ours * vectors[:sample], axis=1)))
    if agreement < VECTOR_CHECK:
        raise IngestError(
            f"the precomputed vectors do not match all-MiniLM-L6-v2 on the titled text ('title | text'): mean cosine "
            f"{agreement:.2f} against ours over the first {len(ours)} passages (need ≥ {VECTOR_CHECK})"
        )


def _sync(writer: Writer, batch: list[CorpusRecord], supplied: np.ndarray | None, tally: dict[str, Any]) -> None:
    """Store the batch's new passages and remove every other stored version of its ids (``Writer.replace``: the new
    first, so a reader never sees a gap); a stored passage whose id changed is relabelled. Old versions are looked up
    for every id of the batch, new text or not: one a killed run left beside its new version goes now."""
    unique = {content_id(r.title, r.text): i for i, r in enumerate(batch)}  # a repeated record collapses
    stored = writer.stored_ids(list(unique))
    moved = {key: batch[i].id for key, i in unique.items() if key in stored and stored[key] != batch[i].id}
    writer.relabel(moved)
    tally["relabelled"] += len(moved)
    todo = [(key, i) for key, i in unique.items() if key not in stored]
    tally["skipped"] += len(batch) - len(todo)
    current = {batch[i].id: key for key, i in unique.items()}
    stale = [(key, doc) for key, doc in writer.versions(list(current)) if current[doc] != key]
    if not todo and not stale:
        return
    new = [batch[i] for _, i in todo]
    vectors = _vectors(new, None if supplied is None else supplied[[i for _, i in todo]], writer.backend)
    rows = [Row(key, r.id, r.title, r.text, r.source, vector) for (key, _), r, vector in zip(todo, new, vectors)]
    writer.replace(rows, [key for key, _ in stale])
    tally["added"] += len(todo)
    tally["updated"] += len({doc for _, doc in stale} & {r.id for r in new})
    tally["removed"] += len(stale)


def _vectors(new: list[CorpusRecord], supplied: np.ndarray | None, backend: Backend) -> np.ndarray:
    """The new passages' vectors: the ones given, else embedded (their titled text)."""
    if supplied is not None:
        return supplied
    if not new:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    return embed([titled_text(r.title, r.text) for r in new], backend=backend)


class _Scratch:
    """What one ingest remembers, on disk: the id each (file id, content) got, and for ``prune`` the file's ids and
    the keys to remove."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path)
        for table, column in (("ids", "id"), ("gone", "key")):
            self.db.execute(f"CREATE TABLE {table} ({column} TEXT PRIMARY KEY) WITHOUT ROWID")
        self.db.execute("CREATE TABLE names (name TEXT PRIMARY KEY, id TEXT, key TEXT) WITHOUT ROWID")
        self.db.execute("CREATE INDEX given ON names (id, key)")
        self.db.execute("CREATE INDEX holder ON names (key)")

    def distinct(self, batch: list[CorpusRecord], tally: dict[str, Any]) -> tuple[list[CorpusRecord], list[int]]:
        """The batch's records under their ids in the collection, and their positions in it: the file's id, or for a
        text that id was already given earlier in the file, the first of ``ID#2``, ``ID#3``, … not yet taken (a
        repeated record keeps the name it got). A record whose title and text another id holds is left out (one
        content key, one stored passage) and counted in ``tally``."""
        out, kept = [], []
        with self.db:
            for position, record in enumerate(batch):
                key = content_id(record.title, record.text)
                given = self.db.execute("SELECT name FROM names WHERE id = ? AND key = ?", (record.id, key)).fetchone()
                if not given and self._held(record.id, key, tally):
                    continue
                name = given[0] if given else self._free(record.id)
                if not given:
                    self.db.execute("INSERT INTO names VALUES (?, ?, ?)", (name, record.id, key))
                if name != record.id:
                    tally["renamed"] += 1
                    record = record.model_copy(update={"id": name})
                out.append(record)
                kept.append(position)
        return out, kept

    def _held(self, id_: str, key: str, tally: dict[str, Any], examples: int = 3) -> bool:
        """Whether an earlier id of the file holds this content; if so, counted in ``tally`` as left out."""
        holder = self.db.execute("SELECT name FROM names WHERE key = ? LIMIT 1", (key,)).fetchone()
        if holder is None:
            return False
        tally["dropped"] += 1
        if len(tally["dropped_ids"]) < examples:
            tally["dropped_ids"].append((id_, holder[0]))
        return True

    def _free(self, id_: str) -> str:
        name, copy = id_, 1
        while self.db.execute("SELECT 1 FROM names WHERE name = ?", (name,)).fetchone():
            copy += 1
            name = f"{id_}#{copy}"
        return name

    def add(self, ids: list[str]) -> None:
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)", [(i,) for i in ids])

    def missing(self, ids: list[str]) -> set[str]:
        marks = ",".join("?" * len(ids))
        present = {r[0] for r in self.db.execute(f"SELECT id FROM ids WHERE id IN ({marks})", ids)}
        return set(ids) - present

    def mark_gone(self, keys: list[str]) -> None:
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO gone VALUES (?)", [(k,) for k in keys])

    def gone(self, page_size: int) -> Iterator[list[str]]:
        after = ""
        while page := [r[0] for r in self.db.execute(
            "SELECT key FROM gone WHERE key > ? ORDER BY key LIMIT ?", (after, page_size)
        )]:  # fmt: skip
            yield page
            after = page[-1]


def _prune(writer: Writer, seen: _Scratch, page_size: int = 5000) -> int:
    """Remove stored passages whose document id is not in the file (found first, then removed: no paging under
    deletion)."""
    for page in writer.stored(page_size):
        absent = seen.missing(sorted({doc for _, doc in page}))
        seen.mark_gone([key for key, doc in page if doc in absent])
    removed = 0
    for keys in seen.gone(page_size):
        writer.delete(keys)
        removed += len(keys)
    return removed
