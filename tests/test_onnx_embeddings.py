"""The INT8 ONNX encoder against the torch one, its cached export, the backend a collection records, the bench suite."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from agent.retrieval import onnx_encoder
from agent.retrieval.chroma_store import get_client
from agent.retrieval.collections import open_store
from agent.retrieval.embeddings import (
    MiniLMEmbeddingFunction,
    embed,
    load_onnx_encoder,
    model_path,
)
from agent.retrieval.ingest import ingest
from agent.settings import Settings, get_settings
from tests.conftest import PASSAGES

SENTENCES = [
    "When did the Harry Potter film come out?",
    "Mount Etna is an active stratovolcano on the east coast of Sicily.",
    "Sourdough is bread made by fermenting dough with lactobacilli and yeast.",
    "Who won the Cricket World Cup in 2011?",
    " ".join(p["text"] for p in PASSAGES) * 4,  # longer than max_seq_length: truncated the same way
]


@pytest.fixture(scope="module")
def onnx_ready():
    assert load_onnx_encoder() is not None, "the ONNX export failed (see the warning on stderr)"


def test_onnx_and_torch_vectors_agree(onnx_ready):
    onnx, torch = embed(SENTENCES, backend="onnx"), embed(SENTENCES, backend="torch")
    assert onnx.shape == torch.shape == (len(SENTENCES), 384) and onnx.dtype == np.float32
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-4)
    assert (np.sum(onnx * torch, axis=1) > 0.99).all()
    assert not np.array_equal(onnx, torch)  # two encoders, not one behind two names


def test_a_text_alone_and_in_a_batch_get_nearly_the_same_vector(onnx_ready):
    alone, batched = embed(SENTENCES[:1], backend="onnx")[0], embed(SENTENCES, backend="onnx")[0]
    assert float(alone @ batched) > 0.99  # not equal: dynamic quantisation scales activations per batch


def test_the_export_is_cached_and_reused(onnx_ready):
    path = onnx_encoder.model_file(model_path(), get_settings().model_dir)
    assert path.is_file() and path.parent == get_settings().model_dir
    written = path.stat().st_mtime_ns
    assert onnx_encoder.load(model_path(), get_settings().model_dir).model == path
    assert path.stat().st_mtime_ns == written  # loaded again, not exported again


def test_a_changed_recipe_names_a_new_export(monkeypatch):
    folder = get_settings().model_dir
    today = onnx_encoder.model_file(model_path(), folder)
    onnx_encoder.model_file.cache_clear()
    monkeypatch.setitem(onnx_encoder.RECIPE, "opset", 18)
    try:
        assert onnx_encoder.model_file(model_path(), folder) != today
    finally:
        onnx_encoder.model_file.cache_clear()


def _stored_vector(collection: str, passage: dict) -> np.ndarray:
    store = open_store(collection)
    hit = next(p for p in store.search(passage["text"], 3) if p.id == passage["id"])
    return store.embeddings([hit])[0]


def test_a_collection_records_its_backend_and_keeps_it(home, corpus_file, tmp_path, onnx_ready):
    for backend in ("onnx", "torch"):
        report = ingest(corpus_file, f"built-{backend}", settings=Settings(embeddings=backend), progress=False)
        assert report.backend == backend
        store = open_store(f"built-{backend}")
        assert store.backend == backend
        assert store.collection.configuration_json["embedding_function"]["config"] == {"backend": backend}
        as_ingested = embed([f"{p['title']} | {p['text']}" for p in PASSAGES], backend=backend)  # one batch
        assert np.allclose(_stored_vector(f"built-{backend}", PASSAGES[3]), as_ingested[3], atol=1e-5)
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "tea", "title": "Tea", "text": "Tea is an aromatic drink."}) + "\n")
    report = ingest(more, "built-torch", settings=Settings(embeddings="onnx"), progress=False)
    assert (report.added, report.backend) == (1, "torch")  # the setting only picks the encoder of new collections
    assert np.allclose(
        _stored_vector("built-torch", {"id": "tea", "text": "Tea is an aromatic drink."}),
        embed(["Tea | Tea is an aromatic drink."], backend="torch")[0],
        atol=1e-5,
    )


def test_new_collections_are_embedded_with_onnx_by_default(home, corpus_file, onnx_ready, monkeypatch):
    monkeypatch.delenv("AMBIGQA_EMBEDDINGS", raising=False)
    assert Settings().embeddings == "onnx"
    report = ingest(corpus_file, "built-default", settings=Settings(), progress=False)
    assert report.backend == "onnx" and open_store("built-default").backend == "onnx"


def test_a_collection_without_a_record_is_read_with_torch(home):
    legacy = get_client().get_or_create_collection("legacy", embedding_function=MiniLMEmbeddingFunction())
    legacy.add(ids=["a"], documents=["Mount Etna"], embeddings=list(embed(["Mount Etna"], backend="torch")))
    assert open_store("legacy").backend == "torch"


def test_a_store_embeds_queries_like_its_passages(home, corpus_file, onnx_ready):
    ingest(corpus_file, "built-onnx", settings=Settings(embeddings="onnx"), progress=False)
    store = open_store("built-onnx")
    assert store.backend == "onnx"
    assert np.allclose(store.embed(["Mount Etna"]), embed(["Mount Etna"], backend="onnx"), atol=1e-6)
    assert store.search("Mount Etna volcano", 1)[0].title  # queries go through the same encoder


def _bench(*args: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "agent", "bench", "--suite", "ingest", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_bench_ingest_suite_writes_both_rates(tmp_path, onnx_ready):
    home = tmp_path / "home"  # its own store: this process has the session's open
    folder = tmp_path / "asqa"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    question = {
        "id": "q1",
        "question": "When was the Harry Potter film released?",
        "qa_pairs": [{"question": "When was it released in the US?", "short_answers": ["16 November 2001"]}],
    }
    (folder / "dev.jsonl").write_text(json.dumps(question) + "\n")
    corpus, dataset = ["--corpus", str(folder / "corpus.jsonl")], ["--dataset", str(folder / "dev.jsonl")]

    limited = _bench(*corpus, *dataset, "--limit", "4", "--out", str(tmp_path / "limited.json"), home=home)
    assert limited.returncode == 0, limited.stderr
    figures = json.loads((tmp_path / "limited.json").read_text())["ingest"]
    assert figures["passages"] == 4 and "questions" not in figures  # MRecall@5 needs the whole corpus
    assert figures["onnx"]["passages_per_s"] > 0 and figures["torch"]["passages_per_s"] > 0
    assert figures["cosine_min"] > 0.99

    whole = _bench(*corpus, *dataset, "--out", str(tmp_path / "whole.json"), home=home)
    assert whole.returncode == 0, whole.stderr
    figures = json.loads((tmp_path / "whole.json").read_text())["ingest"]
    assert (figures["passages"], figures["questions"]) == (len(PASSAGES), 1)
    assert figures["onnx"]["mrecall@5"] == figures["torch"]["mrecall@5"] == 1.0
    assert "MRecall@5" in whole.stdout
