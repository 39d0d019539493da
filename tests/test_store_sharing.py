"""One store, two processes: a running server and an `ingest` beside it (Chroma's embedded store is single-process,
so `serve` runs it as a loopback Chroma server that other processes find and use)."""

import json
import os
import subprocess
import sys

import httpx

from tests.test_server import _start

FRESH = [
    {"id": "z1", "title": "Zorblax", "text": "Zorblax is a moon of the planet Quennel, discovered in 1911."},
    {"id": "z2", "title": "Zorblax", "text": "The Zorblax observatory opened in 1964."},
]


def _ingest(home, corpus, collection, *extra):
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "agent", "ingest", str(corpus), "-c", collection, *extra]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _passage_ids(base, collection, k):
    payload = {"input": {"question": "When was Zorblax discovered?"},
               "config": {"configurable": {"collection": collection, "top_k": k}}}  # fmt: skip
    r = httpx.post(f"{base}/rag/invoke", json=payload, timeout=60)
    assert r.status_code == 200, r.text
    return [p["id"] for p in r.json()["output"]["passages"]]


def test_a_running_server_answers_from_collections_another_process_ingests(served_home, tmp_path):
    registration = served_home / "chroma" / ".server.json"
    proc, base = _start(served_home, "tiny", "--collections", "tiny,fresh,twice")
    try:
        assert json.loads(registration.read_text())["url"].startswith("http://127.0.0.1:")
        corpus = tmp_path / "fresh.jsonl"
        corpus.write_text(json.dumps(FRESH[0]) + "\n")
        first = _ingest(served_home, corpus, "fresh")
        assert first.wait(timeout=300) == 0, first.stderr.read()
        assert _passage_ids(base, "fresh", 1) == ["z1"]  # no restart
        corpus.write_text("".join(json.dumps(p) + "\n" for p in FRESH))
        second = _ingest(served_home, corpus, "fresh")
        assert second.wait(timeout=300) == 0 and "1 added" in second.stdout.read()
        assert sorted(_passage_ids(base, "fresh", 5)) == ["z1", "z2"]  # added to an open collection: visible
        both = [_ingest(served_home, corpus, "twice") for _ in range(2)]  # at the same time
        outputs = [p.communicate(timeout=300)[0] for p in both]
        assert all(p.returncode == 0 for p in both)
        assert sorted(o.split(" added")[0].split()[-1] for o in outputs) == ["0", "2"]  # stored once
        assert sorted(_passage_ids(base, "twice", 5)) == ["z1", "z2"]
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not registration.exists()  # the Chroma server stopped with the app


COLD_BURST = """
import asyncio
from agent.context import make_context
from agent.registry import load_graph

graph = load_graph("rag")

async def main():
    context = make_context(graph.context_schema, {"llm": "fake", "collection": "tiny"})
    runs = [graph.ainvoke({"question": "When did the film come out?"}, context=context) for _ in range(6)]
    return await asyncio.gather(*runs)

print(sum(bool(r["answer"]) for r in asyncio.run(main())))
"""


def test_a_cold_process_survives_a_first_concurrent_burst(served_home):
    env = {**os.environ, "AMBIGQA_HOME": str(served_home), "PYTHONPATH": os.getcwd()}
    for _ in range(2):  # a fresh process meets its first burst cold: twice, as a race need not show every time
        proc = subprocess.run([sys.executable, "-c", COLD_BURST], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "6", proc.stderr[-2000:]
