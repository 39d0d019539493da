"""The LangServe app over real HTTP: uvicorn on 127.0.0.1 in a subprocess, the scripted (`fake`) LLM."""

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.heavy  # a uvicorn server process for the module

QUESTION = "When did the Harry Potter film come out?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(home, collection, *args, env_extra=None):
    port = _free_port()
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), **(env_extra or {})}
    cmd = [sys.executable, "-m", "agent", "serve", "--port", str(port), "--llm", "fake", "-c", collection, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read())
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.fixture(scope="module")
def server(served_home):
    proc, base = _start(served_home, "tiny", "--api-key", "sesame", "--max-body-bytes", "4000")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


KEY = {"X-API-Key": "sesame"}


def test_health_tells_anonymous_callers_only_ok_and_key_holders_the_setup(server):
    from agent.registry import METHODS

    assert httpx.get(f"{server}/health").json() == {"status": "ok"}
    body = httpx.get(f"{server}/health", headers=KEY).json()
    assert body["status"] == "ok" and body["methods"] == list(METHODS) and body["llm"] == "fake"


def test_invoke_returns_the_output_contract(server):
    r = httpx.post(f"{server}/rag/invoke", json={"input": {"question": QUESTION}}, headers=KEY, timeout=60)
    assert r.status_code == 200, r.text
    output = r.json()["output"]
    assert output["answer"] and len(output["passages"]) == 5 and output["usage"]["total"]["calls"] == 2


def test_per_request_options_through_configurable(server):
    payload = {"input": {"question": QUESTION}, "config": {"configurable": {"top_k": 2}}}
    r = httpx.post(f"{server}/rag/invoke", json=payload, headers=KEY, timeout=60)
    assert len(r.json()["output"]["passages"]) == 2


def test_batch_answers_each_question(server):
    payload = {"inputs": [{"question": QUESTION}, {"question": "Where is Mount Etna?"}]}
    r = httpx.post(f"{server}/closed_book/batch", json=payload, headers=KEY, timeout=60)
    assert r.status_code == 200 and len(r.json()["output"]) == 2


def _stream(server: str, method: str) -> list[dict]:
    """The ``data`` events of a LangServe stream (``metadata`` and ``end`` left out)."""
    chunks, event = [], ""
    with httpx.stream(
        "POST", f"{server}/{method}/stream", json={"input": {"question": QUESTION}}, headers=KEY, timeout=120
    ) as r:
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "data":
                chunks.append(json.loads(line[5:]))
    return chunks


def test_stream_sends_node_updates_as_they_happen_then_the_output(server):
    chunks = _stream(server, "rag")
    assert [c["node"] for c in chunks[:-1]] == [
        "retrieve",
        "rag_extract",
        "rag_generate",
        "check_answer",
        "finish_answer",
    ]
    assert set(chunks[-1]) == {
        "answer",
        "disambiguations",
        "passages",
        "retrieved",
        "usage",
        "answer_review",
        "messages",
    }  # what the playground shows


def test_stream_includes_the_nodes_of_tocs_expansion_subgraph(server):
    *events, output = _stream(server, "toc")
    assert any(e["namespace"] for e in events), [e["node"] for e in events]  # inner nodes of the expansion subgraph
    assert events[-1]["node"] == "finish_answer" and events[-1]["update"]["answer"]
    assert output["tree"] and output["stop_reason"] and output["answer"] == events[-1]["update"]["answer"]


def test_invoke_returns_the_methods_own_fields_and_nothing_internal(server):
    r = httpx.post(f"{server}/toc/invoke", json={"input": {"question": QUESTION}}, headers=KEY, timeout=120)
    output = r.json()["output"]
    assert {"tree", "stop_reason", "expansions"} <= set(output) and not {"pool", "frontier", "finished"} & set(output)
    assert set(output) <= set(httpx.get(f"{server}/toc/output_schema", headers=KEY).json()["properties"])


def test_schemas_are_served(server):
    schema = httpx.get(f"{server}/rag/input_schema", headers=KEY).json()
    assert schema["properties"]["question"]["maxLength"] == 2000
    assert "answer" in httpx.get(f"{server}/rag/output_schema", headers=KEY).json()["properties"]


def test_api_key_is_enforced(server):
    assert httpx.post(f"{server}/rag/invoke", json={"input": {"question": QUESTION}}).status_code == 401
    bad = httpx.post(f"{server}/rag/invoke", json={"input": {"question": QUESTION}}, headers={"X-API-Key": "no"})
    assert bad.status_code == 401


@pytest.mark.parametrize("question", ["", "   ", "x" * 2001])
def test_empty_or_oversized_questions_are_rejected(server, question):
    r = httpx.post(f"{server}/rag/invoke", json={"input": {"question": question}}, headers=KEY)
    assert r.status_code in (413, 422)


def test_oversized_bodies_get_413(server):
    r = httpx.post(
        f"{server}/rag/invoke", content=b"{" + b" " * 5000 + b"}", headers={**KEY, "content-type": "application/json"}
    )
    assert r.status_code == 413


def test_saturated_server_answers_503_and_stays_up(served_home):
    proc, base = _start(
        served_home,
        "tiny",
        "--max-concurrent",
        "1",
        "--queue-timeout",
        "0.2",
        env_extra={"AMBIGQA_FAKE_LATENCY": "1.0"},
    )
    try:

        def call(_):
            return httpx.post(
                f"{base}/closed_book/invoke", json={"input": {"question": QUESTION}}, timeout=60
            ).status_code

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(call, range(4)))
        assert sorted(set(codes)) == [200, 503] and codes.count(200) >= 1
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_load_burst_of_50_concurrent_requests_all_succeed_or_get_503(served_home):
    from agent.surfaces.loadtest import run_load

    proc, base = _start(served_home, "tiny", "--max-concurrent", "4", "--queue-timeout", "30")
    try:
        report = run_load(base, "closed_book", requests=50, concurrency=50)
        assert report.other == 0 and report.ok + report.busy_503 == 50 and report.ok >= 1
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_load_refuses_targets_off_this_machine():
    from agent.errors import ConfigError
    from agent.surfaces.loadtest import run_load

    with pytest.raises(ConfigError, match="only target this machine"):
        run_load("http://10.0.0.1:8000")


def test_load_at_a_port_where_no_server_listens_says_so():
    from agent.errors import ConfigError
    from agent.surfaces.loadtest import run_load

    with pytest.raises(ConfigError, match="no server answers at http://127.0.0.1:.*start one with `ambigqa serve`"):
        run_load(f"http://127.0.0.1:{_free_port()}", requests=2)


def test_serve_passes_its_options_to_the_app_as_settings_not_through_the_environment(home, monkeypatch):
    import anyio
    import uvicorn
    from typer.testing import CliRunner

    from agent.settings import get_settings
    from agent.surfaces.cli import app

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app_, **kwargs: served.update(app=app_, **kwargs))
    monkeypatch.setattr("signal.signal", lambda *args: None)
    before = dict(os.environ)
    args = ["serve", "--llm", "fake", "-c", "tiny", "--collections", "other", "--api-key", "k", "--no-store-server"]
    port = _free_port()  # serve checks that its port is free before it starts
    args += ["--port", str(port)]
    try:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert {k: v for k, v in os.environ.items() if k.startswith("AMBIGQA_")} == {
            k: v for k, v in before.items() if k.startswith("AMBIGQA_")
        }

        async def health():
            transport = httpx.ASGITransport(app=served["app"])
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return (await client.get("/health", headers={"X-API-Key": "k"})).json()

        body = anyio.run(health)
        assert body["llm"] == "fake" and body["collections"] == ["tiny", "other"] and served["port"] == port
    finally:
        get_settings.cache_clear()


def test_a_request_brings_its_own_passages_and_bad_ones_get_a_422(server):
    given = [
        {"id": "mine-1", "text": "Harry Potter and the Philosopher's Stone premiered in London on 4 November 2001."},
        {"id": "mine-2", "text": "The film reached US cinemas on 16 November 2001."},
    ]
    payload = {"input": {"question": QUESTION}, "config": {"configurable": {"passages": given}}}
    r = httpx.post(f"{server}/madam/invoke", json=payload, headers=KEY, timeout=60)
    assert r.status_code == 200, r.text
    output = r.json()["output"]
    assert {p["id"] for p in output["passages"]} == {"mine-1", "mine-2"} and output["answers"]
    for bad, fragment in (([], "at least one passage"), ([{"text": " "}], "passage 1 has no text")):
        payload = {"input": {"question": QUESTION}, "config": {"configurable": {"passages": bad}}}
        r = httpx.post(f"{server}/rag/invoke", json=payload, headers=KEY, timeout=60)
        assert r.status_code == 422 and fragment in r.json()["detail"]


def test_passages_returns_the_cited_passages_whole_and_names_an_unknown_id(server):
    from tests.conftest import PASSAGES

    answer = httpx.post(f"{server}/rag/invoke", json={"input": {"question": QUESTION}}, headers=KEY, timeout=60)
    cited = [i for d in answer.json()["output"]["disambiguations"] for i in d["passage_ids"]]
    r = httpx.post(f"{server}/passages", json={"ids": cited}, headers=KEY, timeout=60)
    assert r.status_code == 200, r.text
    texts = {p["id"]: p["text"] for p in PASSAGES}
    assert cited and [(p["id"], p["text"]) for p in r.json()] == [(i, texts[i]) for i in cited]
    assert "score" not in r.json()[0]
    unknown = httpx.post(f"{server}/passages", json={"ids": ["hp-us", "atlantis"]}, headers=KEY, timeout=60)
    assert unknown.status_code == 404 and "'atlantis'" in unknown.json()["detail"]
    other = httpx.post(f"{server}/passages", json={"ids": ["hp-us"], "collection": "asqa"}, headers=KEY, timeout=60)
    assert other.status_code == 422 and "not served" in other.json()["detail"]
    assert httpx.post(f"{server}/passages", json={"ids": []}, headers=KEY, timeout=60).status_code == 422
    assert httpx.post(f"{server}/passages", json={"ids": ["hp-us"]}, timeout=60).status_code == 401
