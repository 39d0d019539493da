"""Ingest a JSONL corpus ``{id, title, text}`` into a collection: validated first, idempotent, batched, with progress."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from agent.errors import IngestError
from agent.retrieval.embeddings import MiniLMEmbeddingFunction, embed
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

    @property
    def passages_per_s(self) -> float:
        return self.added / self.seconds if self.seconds and self.added else 0.0


def read_corpus(path: Path) -> list[CorpusRecord]:
    """Parse and validate every line before anything is written, so a bad file changes nothing."""
    if not path.is_file():
        raise IngestError(f"corpus file {path} does not exist")
    records = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
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


def ingest(
    path: Path | str, collection: str, *, settings: Settings | None = None, batch_size: int = 128, progress: bool = True
) -> IngestReport:
    if len(collection) < 3:
        raise IngestError(f"collection name '{collection}' is too short: Chroma needs at least 3 characters")
    start = time.perf_counter()
    records = read_corpus(Path(path))
    unique = {content_id(r.title, r.text): r for r in records}  # duplicates within the file collapse
    client = get_client(settings or get_settings())
    coll = client.get_or_create_collection(
        collection, embedding_function=MiniLMEmbeddingFunction(), configuration={"hnsw": {"space": "cosine"}}
    )
    keys = list(unique)
    existing: set[str] = set()
    for i in range(0, len(keys), PAGE_SIZE):
        existing.update(coll.get(ids=keys[i : i + PAGE_SIZE], include=[])["ids"])
    todo = [k for k in keys if k not in existing]

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="passage", desc=f"ingest → {collection}")
    added = 0
    try:
        for i in range(0, len(todo), batch_size):
            batch = [unique[k] for k in todo[i : i + batch_size]]
            coll.add(
                ids=todo[i : i + batch_size],
                documents=[r.text for r in batch],
                embeddings=list(embed([titled_text(r.title, r.text) for r in batch])),
                metadatas=[{"doc_id": r.id, "title": r.title, "source": r.source} for r in batch],
            )
            added += len(batch)
            if bar:
                bar.update(len(batch))
    finally:
        if bar:
            bar.close()
    return IngestReport(
        collection=collection,
        records=len(records),
        added=added,
        skipped=len(keys) - len(todo) + (len(records) - len(keys)),
        seconds=round(time.perf_counter() - start, 3),
    )
