"""``bench --suite scale`` end to end at toy sizes on both stores: real passages plus generated distractors through
the real ingest path, timings, HNSW recall against exact search, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agent.eval.scale import _chunk, exact_top, format_scale, scale_suite


def test_distractors_are_deterministic_and_stay_near_their_source():
    rows = [{"id": f"r{i}", "title": f"T{i}", "text": f"word{i} " * 20} for i in range(5)]
    vectors = np.eye(5, 384, dtype=np.float32)
    first, first_vectors = _chunk(rows, vectors, 3, 12)
    again, again_vectors = _chunk(rows, vectors, 3, 12)
    assert [r["id"] for r in first] == ["r3", "r4", *(f"synthetic:{i}" for i in range(5, 12))]
    assert first == again and np.array_equal(first_vectors, again_vectors)
    cosine_to_source = first_vectors[2:].max(axis=1)  # each source is a one-hot vector
    assert np.all((cosine_to_source > 0.55) & (cosine_to_source < 0.8))
    assert np.allclose(np.linalg.norm(first_vectors, axis=1), 1.0, atol=1e-5)


def test_exact_top_is_the_brute_force_answer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(25_000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"id": [f"p{i}" for i in range(len(vectors))], "vector": list(vectors)}), path)
    queries = vectors[[3, 20_001]] + 0.01
    expected = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    assert exact_top(queries, path, 10) == [[f"p{i}" for i in row] for row in expected]  # across two chunks


def test_the_scale_suite_measures_each_store_and_resumes(home, postgres_url, tmp_path):
    demo = Path(__file__).resolve().parents[1] / "data" / "demo"
    lines = (demo / "corpus.jsonl").read_text().splitlines(keepends=True)
    corpora = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]  # the suite reads several corpora
    corpora[0].write_text("".join(lines[:150]))
    corpora[1].write_text("".join(lines[150:]))
    questions = [json.loads(x)["question"] for x in (demo / "questions.jsonl").read_text().splitlines()] * 2
    folder = tmp_path / "scale"
    lines: list[str] = []
    results = scale_suite(folder, corpora, questions, sizes=(600,), database_url=postgres_url, clients=(1, 2),
                          queries=12, log=lines.append)  # fmt: skip
    assert set(results) == {"chroma-600", "postgres-600"}
    for result in results.values():
        assert result["rows"] == result["added"] == 600 and result["ingest_rows_per_s"] > 0
        assert 0.8 <= result["hnsw_recall@10"] <= 1.0
        for key in ("dense@1", "sparse@2", "hybrid@2"):
            assert 0 < result[key]["p50_ms"] <= result[key]["p95_ms"]
        assert result["rss_mb"] > 0
    assert results["postgres-600"]["hnsw_mb"] > 0 and results["chroma-600"]["fts_mb"] > 0
    table = format_scale(results)
    assert "| chroma | 600 |" in table and "| postgres | 600 |" in table
    lines.clear()
    assert scale_suite(folder, corpora, questions, sizes=(600,), database_url=postgres_url, log=lines.append) == results
    assert not any("ingest" in line for line in lines)  # measured already: nothing is loaded again
