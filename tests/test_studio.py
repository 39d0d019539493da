"""LangGraph Studio's server (`langgraph dev`) starts offline from langgraph.json and runs every graph."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from agent.registry import METHODS, load_graph

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_json_lists_every_method():
    from agent.registry import describe

    config = json.loads((ROOT / "langgraph.json").read_text())
    assert set(config["graphs"]) == set(METHODS)
    for method, entry in config["graphs"].items():  # Studio shows each assistant's description
        assert entry == {"path": f"./graphs/{method}.py:graph", "description": describe(method)}


@pytest.fixture(scope="module")
def studio(home, collection):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "AMBIGQA_HOME": str(home),
        "AMBIGQA_LLM": "fake",
        "AMBIGQA_COLLECTION": collection,
    }
    cli = Path(os.sys.executable).with_name("langgraph")
    proc = subprocess.Popen(
        [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("langgraph dev did not start")
        yield base
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)


@pytest.mark.parametrize("method", METHODS)
def test_studio_server_runs_each_graph(studio, method):
    body = {"assistant_id": method, "input": {"question": "When did the Harry Potter film come out?"}}
    r = httpx.post(f"{studio}/runs/wait", json=body, timeout=180)
    assert r.status_code == 200, r.text
    output = r.json()
    assert output.get("answer"), output
    assert output["usage"]["total"]["calls"] >= 1
    assert set(output) <= set(load_graph(method).get_output_jsonschema()["properties"])  # the declared output, no more
    if method == "toc":
        assert output["tree"] and output["stop_reason"]


def test_studio_assistants_carry_their_descriptions(studio):
    from agent.registry import describe

    r = httpx.post(f"{studio}/assistants/search", json={"graph_id": "diva", "limit": 5}, timeout=60)
    assert r.status_code == 200, r.text
    assert describe("diva") in [a.get("description") for a in r.json()]
