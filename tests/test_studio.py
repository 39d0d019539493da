"""LangGraph Studio's server (`langgraph dev`) starts offline from langgraph.json and runs every graph."""

import json
from pathlib import Path

import httpx
import pytest

from agent.registry import METHODS, load_graph
from tests.conftest import langgraph_dev

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_json_lists_every_method():
    from agent.registry import describe

    config = json.loads((ROOT / "langgraph.json").read_text())
    assert set(config["graphs"]) == set(METHODS)
    for method, entry in config["graphs"].items():  # Studio shows each assistant's description
        assert entry == {"path": f"./graphs/{method}.py:graph", "description": describe(method)}


@pytest.fixture(scope="module")
def studio(served_home):
    env = {"AMBIGQA_HOME": str(served_home), "AMBIGQA_LLM": "fake", "AMBIGQA_COLLECTION": "tiny", "AMBIGQA_API_KEY": ""}
    with langgraph_dev(env) as base:
        yield base


@pytest.mark.heavy  # langgraph dev
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


@pytest.mark.heavy  # langgraph dev
def test_studio_assistants_carry_their_descriptions(studio):
    from agent.registry import describe

    r = httpx.post(f"{studio}/assistants/search", json={"graph_id": "diva", "limit": 5}, timeout=60)
    assert r.status_code == 200, r.text
    assert describe("diva") in [a.get("description") for a in r.json()]
