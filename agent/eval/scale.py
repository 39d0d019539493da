"""``ambigqa bench --suite scale``: each store at 100k and 1M passages — ingest, index build, latency, recall, memory.

The corpus is the real ASQA and HotpotQA passages (about 12.7k, embedded once and cached) plus generated distractors
up to the size. A distractor takes half its words from one real passage and half from another, shuffled, so the
sparse index sees the real vocabulary and term frequencies; its vector is its first source's vector plus Gaussian
noise, σ = 0.057 per dimension: cosine ≈ 0.67 to the source, the median cosine of a real passage to its nearest real
neighbour here, and ≈ 0.45 between two distractors of one source, near the real tenth neighbour's 0.43. So dense
neighbourhoods fill the way a larger corpus on the same topics fills them, without hours of embedding. Both files are
written once per size (JSONL and Parquet, deterministic) and loaded through the real ``ingest --vectors`` path.

Per store and size: ingest rows/s; index build seconds (PostgreSQL builds HNSW and the BM25 postings after the
load; Chroma grows its HNSW during the load, so its build is inside the ingest time) and size on disk; p50/p95 of dense, sparse and
hybrid first-stage retrieval (top 10, the query embedded each time) at 1 and 8 concurrent clients, from a fresh
process whose resident memory is reported; HNSW recall@10 against exact search over the same vectors. Each finished
(store, size) is saved and skipped on a re-run.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from agent.settings import Settings

SIZES = (100_000, 1_000_000)
STORES = ("chroma", "postgres")
NOISE = 0.057  # per dimension: |noise|² ≈ 384 · 0.057² ≈ 1.25, so cosine to the source ≈ 1 / √2.25 ≈ 0.67
CHUNK = 10_000  # rows generated, written and scanned at a time
MODES = ("dense", "sparse", "hybrid")


def real_passages(corpora: list[Path], folder: Path) -> tuple[list[dict], np.ndarray]:
    """The real passages of ``corpora`` (deduplicated by content) and their vectors, embedded once and cached."""
    from agent.retrieval.embeddings import embed
    from agent.retrieval.ingest import records
    from agent.retrieval.store import content_id
    from agent.schemas import titled_text

    rows = list({content_id(r.title, r.text): r.model_dump() for path in corpora for r in records(path)}.values())
    cache = folder / f"real-{len(rows)}.npy"
    if cache.is_file():
        return rows, np.load(cache)
    vectors = np.concatenate(
        [embed([titled_text(r["title"], r["text"]) for r in rows[i : i + 512]]) for i in range(0, len(rows), 512)]
    )
    folder.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return rows, vectors


def _chunk(rows: list[dict], vectors: np.ndarray, start: int, stop: int) -> tuple[list[dict], np.ndarray]:
    """Rows ``start``..``stop`` of the synthetic corpus: the real passages first, then distractors (seeded by position,
    so every chunk is the same on every run)."""
    real = [(rows[i], vectors[i]) for i in range(start, min(stop, len(rows)))]
    out_rows = [dict(r, source="real") for r, _ in real]
    out_vectors = [v for _, v in real]
    first = max(start, len(rows))
    if first < stop:
        rng = np.random.default_rng([7, first])
        sources = rng.integers(0, len(rows), size=(stop - first, 2))
        noise = rng.normal(scale=NOISE, size=(stop - first, vectors.shape[1])).astype(np.float32)
        for offset, (a, b) in enumerate(sources):
            wa, wb = rows[a]["text"].split(), rows[b]["text"].split()
            words = wa[: len(wa) // 2 + 1] + wb[: len(wb) // 2 + 1]
            rng.shuffle(words)
            out_rows.append({"id": f"synthetic:{first + offset}", "title": rows[a]["title"], "text": " ".join(words),
                             "source": "synthetic"})  # fmt: skip
            vector = vectors[a] + noise[offset]
            out_vectors.append(vector / np.linalg.norm(vector))
    return out_rows, np.asarray(out_vectors, dtype=np.float32)


def write_corpus(rows: list[dict], vectors: np.ndarray, size: int, folder: Path) -> tuple[Path, Path]:
    """The corpus JSONL and its Parquet vectors for ``size`` passages, written once (named by the noise level)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus, parquet = folder / f"corpus-{size}-s{NOISE}.jsonl", folder / f"vectors-{size}-s{NOISE}.parquet"
    if corpus.is_file() and parquet.is_file():
        return corpus, parquet
    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32()))])
    with corpus.with_suffix(".tmp").open("w") as text, pq.ParquetWriter(parquet.with_suffix(".tmp"), schema) as out:
        for start in range(0, size, CHUNK):
            chunk, chunk_vectors = _chunk(rows, vectors, start, min(start + CHUNK, size))
            text.write("".join(json.dumps(r) + "\n" for r in chunk))
            out.write_table(pa.table({"id": [r["id"] for r in chunk], "vector": list(chunk_vectors)}, schema=schema))
    corpus.with_suffix(".tmp").replace(corpus)
    parquet.with_suffix(".tmp").replace(parquet)
    return corpus, parquet


def _vectors(parquet: Path) -> Iterator[tuple[list[str], np.ndarray]]:
    from agent.retrieval.ingest import vector_batches

    yield from vector_batches(parquet, CHUNK)


def exact_top(queries: np.ndarray, parquet: Path, k: int = 10) -> list[list[str]]:
    """Exact cosine top-k ids per query over every vector of ``parquet``, a chunk at a time."""
    best_ids = np.empty((len(queries), 0), dtype=object)
    best = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    for ids, vectors in _vectors(parquet):
        scores = np.concatenate([best, queries @ vectors.T], axis=1)
        names = np.concatenate([best_ids, np.broadcast_to(np.asarray(ids, dtype=object), (len(queries), len(ids)))],
                               axis=1)  # fmt: skip
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        best, best_ids = np.take_along_axis(scores, top, axis=1), np.take_along_axis(names, top, axis=1)
    return [list(row) for row in best_ids]


def _disk_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def load(kind: str, size: int, corpus: Path, parquet: Path, settings: Settings) -> dict[str, Any]:
    """Ingest the corpus with its vectors; time the index build and measure what is on disk."""
    from agent.retrieval.ingest import ingest

    name = f"scale-{size}"
    report = ingest(corpus, name, settings=settings, vectors=parquet, check_vectors=False, batch_size=2000)
    result: dict[str, Any] = {
        "rows": report.records, "added": report.added, "ingest_s": round(report.seconds, 1),
        "ingest_rows_per_s": round(report.added / max(report.seconds - report.index_seconds, 1e-9)),
        "index_build_s": round(report.index_seconds, 1),
    }  # fmt: skip
    if kind == "postgres":
        from agent.retrieval.postgres_store import relation, run

        def sizes(c: Any) -> dict[str, float]:
            def mb(function: str, kind: str) -> float:
                query = f"SELECT round({function}(%s::regclass) / 1048576.0, 1)"
                return float(c.execute(query, (f'"{relation(name, kind)}"',)).fetchone()[0])

            return {
                "table_mb": mb("pg_total_relation_size", "table"),
                "hnsw_mb": mb("pg_relation_size", "dense"),
                "postings_mb": mb("pg_total_relation_size", "postings"),
            }

        result |= run(settings.database_url or "", sizes)
    else:
        result |= {
            "store_mb": _disk_mb(settings.chroma_path),
            "fts_mb": _disk_mb(settings.chroma_path.parent / "sparse"),
        }
    return result


def _latencies(kind_settings: dict[str, Any], name: str, questions: list[str], clients: tuple[int, ...],
               queries: int, out: Any) -> None:  # fmt: skip
    """In a fresh process: open the store, run each mode at each client count, report latencies and memory."""
    import os

    from agent.retrieval.collections import open_collection
    from agent.retrieval.pipeline import first_stage

    settings = Settings(**kind_settings)
    os.environ["AMBIGQA_HOME"] = str(settings.home)
    store = open_collection(name, settings)
    first_stage(store, questions[:3], 10, "hybrid")  # encoder, connections, caches: warm before timing
    stage = {"dense": "dense", "sparse": "bm25", "hybrid": "hybrid"}
    figures: dict[str, Any] = {}
    for mode in MODES:
        for count in clients:

            def one(question: str, mode: str = mode) -> float:
                began = time.perf_counter()
                first_stage(store, [question], 10, stage[mode])  # type: ignore[arg-type]
                return (time.perf_counter() - began) * 1000

            asked = [questions[i % len(questions)] for i in range(queries)]
            began = time.perf_counter()
            with ThreadPoolExecutor(count) as pool:
                times = sorted(pool.map(one, asked))
            wall = time.perf_counter() - began
            figures[f"{mode}@{count}"] = {
                "p50_ms": round(statistics.median(times), 1), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
                "qps": round(len(times) / wall, 1),
            }  # fmt: skip
    with open(f"/proc/{os.getpid()}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    figures["rss_mb"] = round(rss / 1024)  # (not ru_maxrss: a spawned child inherits the parent's peak)
    out.put(figures)


def latencies(settings: Settings, name: str, questions: list[str], clients: tuple[int, ...], queries: int) -> dict:
    """``_latencies``' figures from a spawned process, so its memory is the serving store's alone."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    values = {"home": settings.home, "database_url": settings.database_url, "embeddings": settings.embeddings}
    worker = context.Process(target=_latencies, args=(values, name, questions, clients, queries, results))
    worker.start()
    found = results.get(timeout=3600)
    worker.join(timeout=60)
    return found


def hnsw_recall(settings: Settings, name: str, questions: list[str], parquet: Path, k: int = 10) -> float:
    """Mean share of the exact top-k that the store's approximate nearest-neighbour search finds."""
    from agent.retrieval.collections import open_collection

    store = open_collection(name, settings)
    vectors = store.embed(questions)
    exact = exact_top(vectors, parquet, k)
    found = [[p.id for p in ranked] for ranked in store.nearest(vectors, k)]
    return round(statistics.fmean(len(set(f) & set(e)) / k for f, e in zip(found, exact)), 4)


def scale_suite(
    folder: Path,
    corpora: list[Path],
    questions: list[str],
    sizes: tuple[int, ...] = SIZES,
    stores: tuple[str, ...] = STORES,
    database_url: str | None = None,
    clients: tuple[int, ...] = (1, 8),
    queries: int = 200,
    remeasure: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every (store, size) not measured yet in ``folder``; returns all of them. PostgreSQL: ``database_url``, else a
    local one started in ``folder`` (pgserver). ``remeasure``: latency, memory and recall again over the stores
    already loaded (on a quieter machine), keeping their load figures."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, vectors = real_passages(corpora, folder / "data")
    log(f"{len(rows):,} real passages; distractors up to {max(sizes):,}")
    with _database(folder, database_url, "postgres" in stores) as url:
        for size in sizes:
            corpus, parquet = write_corpus(rows, vectors, size, folder / "data")
            for kind in stores:
                target = folder / f"{kind}-{size}.json"
                if target.is_file() and not remeasure:
                    continue
                settings = Settings(home=folder / f"{kind}-{size}", database_url=url if kind == "postgres" else None)
                if target.is_file():
                    result: dict[str, Any] = json.loads(target.read_text())
                else:
                    log(f"{kind} at {size:,}: ingest …")
                    result = {"store": kind, "size": size, **load(kind, size, corpus, parquet, settings)}
                log(f"{kind} at {size:,}: {result['ingest_rows_per_s']} rows/s; latency …")
                result |= latencies(settings, f"scale-{size}", questions, clients, queries)
                result["hnsw_recall@10"] = hnsw_recall(settings, f"scale-{size}", questions[:100], parquet)
                target.write_text(json.dumps(result, indent=2))
                log(json.dumps(result))
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*-*.json"))}


@contextmanager
def _database(folder: Path, database_url: str | None, needed: bool) -> Iterator[str | None]:
    """``database_url``; without one, where a store needs it, a local PostgreSQL in ``folder`` for the run."""
    if database_url or not needed:
        yield database_url
        return
    from agent.retrieval.local_postgres import start

    local = start(folder / "postgres")
    try:
        yield local.url
    finally:
        local.stop()


def format_scale(results: dict[str, Any]) -> str:
    """A markdown table: one row per store and size; latency at one client and at the most clients measured."""
    rows = sorted(results.values(), key=lambda r: (r["store"], r["size"]))
    most = max((int(key.split("@")[1]) for r in rows for key in r if key.startswith("dense@")), default=1)
    lines = [
        "| store | passages | ingest rows/s | index build s | on disk MB | dense p50/p95 @1 | sparse p50/p95 @1 "
        f"| hybrid p50/p95 @1 | dense p95 @{most} | sparse p95 @{most} | hybrid p95 @{most} | HNSW recall@10 | RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        disk = r.get("table_mb", 0) + r.get("postings_mb", 0) or r.get("store_mb", 0) + r.get("fts_mb", 0)
        cells = [f"{r[f'{m}@1']['p50_ms']:.0f}/{r[f'{m}@1']['p95_ms']:.0f}" for m in MODES]
        cells += [f"{r[f'{m}@{most}']['p95_ms']:.0f}" for m in MODES]
        lines.append(
            f"| {r['store']} | {r['size']:,} | {r['ingest_rows_per_s']:,} | {r['index_build_s']} | {disk:,.0f} | "
            + " | ".join(cells) + f" | {r['hnsw_recall@10']} | {r['rss_mb']} |"
        )  # fmt: skip
    return "\n".join(lines)
