"""Ingest a JSONL corpus ``{id, title, text}`` into a collection: validated first, batched, with progress; a sync.

Passages are stored under a hash of their content with their document id in the metadata, so re-ingesting an
unchanged file is a no-op, an edited passage (same id, new text) replaces its old version, and ``prune`` removes
passages whose id left the file. One ingest per collection at a time (a file lock): two concurrent ingests of one
corpus store it once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent.errors import IngestError
from agent.retrieval.embeddings import Backend, MiniLMEmbeddingFunction, collection_backend, embed, usable
from agent.retrieval.store import PAGE_SIZE, content_id, get_client
from agent.schemas import titled_text
from agent.settings import Settings, get_settings


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
    removed: int = 0  # old versions replaced, and with prune, passages that left the file
    backend: Backend = "torch"  # the encoder the collection is embedded with

    @property
    def passages_per_s(self) -> float:
        return self.added / self.seconds if self.seconds and self.added else 0.0


def read_corpus(path: Path) -> list[CorpusRecord]:
    """Parse and validate every line before anything is written, so a bad file changes nothing."""
    if not path.is_file():
        raise IngestError(f"corpus file {path} does not exist")
    records = []
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
            records.append(record)
    if not records:
        raise IngestError(f"corpus file {path} holds no passages")
    return records


@contextmanager
def _one_ingest_at_a_time(settings: Settings, collection: str) -> Iterator[None]:
    """An exclusive lock per collection, across processes (``fcntl``; no-op where it does not exist)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    folder = settings.home / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"ingest-{collection}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stored(coll: Any) -> dict[str, str]:
    """Content id → document id of every stored passage."""
    stored: dict[str, str] = {}
    offset = 0
    while True:
        page = coll.get(include=["metadatas"], limit=PAGE_SIZE, offset=offset)
        stored.update({i: str((m or {}).get("doc_id", "")) for i, m in zip(page["ids"], page["metadatas"])})
        if len(page["ids"]) < PAGE_SIZE:
            return stored
        offset += PAGE_SIZE


def ingest(
    path: Path | str,
    collection: str,
    *,
    settings: Settings | None = None,
    batch_size: int = 128,
    progress: bool = True,
    prune: bool = False,
) -> IngestReport:
    if len(collection) < 3:
        raise IngestError(f"collection name '{collection}' is too short: Chroma needs at least 3 characters")
    start = time.perf_counter()
    records = read_corpus(Path(path))
    unique = {content_id(r.title, r.text): r for r in records}  # duplicates within the file collapse
    settings = settings or get_settings()
    with _one_ingest_at_a_time(settings, collection):
        client = get_client(settings)
        coll = client.get_or_create_collection(
            collection,
            embedding_function=MiniLMEmbeddingFunction(usable(settings.embeddings)),  # recorded when it is new
            configuration={"hnsw": {"space": "cosine"}},
        )
        stored = _stored(coll)
        todo = [k for k in unique if k not in stored]
        changed = {unique[k].id for k in todo}
        in_file = {r.id for r in unique.values()}
        stale = [
            k for k, doc in stored.items() if k not in unique and (doc in changed or (prune and doc not in in_file))
        ]
        backend = collection_backend(coll)
        added = _add(coll, [(k, unique[k]) for k in todo], backend, batch_size, progress)
        for i in range(0, len(stale), PAGE_SIZE):  # after the new versions are in: a reader never sees a gap
            coll.delete(ids=stale[i : i + PAGE_SIZE])
    stored_docs = set(stored.values())
    return IngestReport(
        collection=collection,
        records=len(records),
        added=added,
        skipped=len(unique) - len(todo) + (len(records) - len(unique)),
        seconds=round(time.perf_counter() - start, 3),
        updated=sum(unique[k].id in stored_docs for k in todo),
        removed=len(stale),
        backend=backend,
    )


def _add(coll: Any, items: list[tuple[str, CorpusRecord]], backend: Backend, batch_size: int, progress: bool) -> int:
    """Embed with the collection's own backend (an existing collection keeps the one it was built with) and store."""
    bar = None
    if progress and items:
        from tqdm import tqdm

        bar = tqdm(total=len(items), unit="passage", desc=f"ingest → {coll.name} ({backend})")
    added = 0
    try:
        for i in range(0, len(items), batch_size):
            batch = items[i : i + batch_size]
            coll.add(
                ids=[k for k, _ in batch],
                documents=[r.text for _, r in batch],
                embeddings=list(embed([titled_text(r.title, r.text) for _, r in batch], backend=backend)),
                metadatas=[{"doc_id": r.id, "title": r.title, "source": r.source} for _, r in batch],
            )
            added += len(batch)
            if bar:
                bar.update(len(batch))
    finally:
        if bar:
            bar.close()
    return added
