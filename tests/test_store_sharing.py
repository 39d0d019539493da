"""One store, two processes: a running server and an `ingest` beside it (Chroma's embedded store is single-process,
so `serve` runs it as a loopback Chroma server that other processes find and use, and that answers only the holders of
its per-run token)."""

import json
import os
import stat
import subprocess
import sys

import httpx
import pytest

from tests.test_server import _start

pytestmark = pytest.mark.heavy  # a serve process beside ingest processes

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
        entry = json.loads(registration.read_text())
        assert entry["url"].startswith("http://127.0.0.1:") and stat.S_IMODE(registration.stat().st_mode) == 0o600
        listed = f"{entry['url']}/api/v2/tenants/default_tenant/databases/default_database/collections"
        assert httpx.get(listed, timeout=10).status_code == 403  # a local process without the token
        assert httpx.get(listed, headers={"X-Chroma-Token": "guess"}, timeout=10).status_code == 403
        held = httpx.get(listed, headers={"X-Chroma-Token": entry["token"]}, timeout=10)
        assert held.status_code == 200 and "tiny" in {c["name"] for c in held.json()}
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


OPEN = {f"/api/{v}{end}" for v in ("v1", "v2") for end in ("", "/version", "/heartbeat", "/pre-flight-checks")}
BODIES = {  # a valid body for each kind of write or read, so a refusal cannot be a validation error's
    "add": {"ids": ["planted"], "embeddings": [[0.0, 0.0, 1.0]], "documents": ["planted text"]},
    "upsert": {"ids": ["a"], "embeddings": [[0.0, 0.0, 1.0]], "documents": ["planted text"]},
    "update": {"ids": ["a"], "documents": ["planted text"]},
    "get": {"ids": ["a"], "include": ["documents"]},
    "delete": {"ids": ["a"]},
    "query": {"query_embeddings": [[0.1, 0.2, 0.3]], "n_results": 1, "include": ["documents"]},
}


def test_the_store_server_answers_no_request_without_its_token(tmp_path):
    """Every route of the store server, with a valid request and no token: a 403 from all but the heartbeat, version
    and pre-flight routes; the collection is unchanged and its text never leaves the server."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings
    from chromadb.errors import ChromaAuthError

    from agent.retrieval.store_server import TOKEN_HEADER, StoreServer

    with StoreServer(tmp_path / "chroma") as server:
        port = int(server.url.rsplit(":", 1)[1])
        settings = ChromaSettings(anonymized_telemetry=False)
        owner = chromadb.HttpClient(
            host="127.0.0.1", port=port, headers={TOKEN_HEADER: server.token}, settings=settings
        )
        kept = owner.create_collection("kept", embedding_function=None)
        kept.add(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["secret text"])
        names = {"tenant": "default_tenant", "database": "default_database", "database_name": "default_database",
                 "collection_id": str(kept.id), "collection_name": "kept", "function_name": "f"}  # fmt: skip
        answered = {}
        for path, operations in httpx.get(f"{server.url}/openapi.json", timeout=10).json()["paths"].items():
            for method in operations:
                body = BODIES.get(path.rsplit("/", 1)[-1], {"name": "planted"})
                r = httpx.request(method, server.url + path.format(**names), json=body, timeout=30)
                answered[method.upper(), path] = r.status_code
                assert "secret text" not in r.text, (method, path)
        assert {key: status for key, status in answered.items() if key[1] not in OPEN and status != 403} == {}
        assert {status for (_, path), status in answered.items() if path in OPEN} == {200}
        with pytest.raises(ChromaAuthError):  # Chroma's own client, without the token
            chromadb.HttpClient(host="127.0.0.1", port=port, settings=settings).list_collections()
        got = kept.get(include=["documents"])
        assert got["ids"] == ["a"] and got["documents"] == ["secret text"]
        assert [c.name for c in owner.list_collections()] == ["kept"]
        # stored vectors come back (ToC and DIVA rank with them rather than embed again)
        assert [round(x, 3) for x in kept.get(include=["embeddings"])["embeddings"][0]] == [0.1, 0.2, 0.3]
        nearest = kept.query(query_embeddings=[[0.1, 0.2, 0.3]], n_results=1, include=["embeddings"])
        assert [round(x, 3) for x in nearest["embeddings"][0][0]] == [0.1, 0.2, 0.3]
