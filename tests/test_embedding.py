"""Embedded in a LangChain app: the wheel installs beside the newest langchain-core, langgraph and langchain-openai this
registry serves, and a method runs as a tool inside a prebuilt ReAct agent, its run nested in the agent's trace.

The fresh virtualenv gets the wheel and the three libraries at their newest versions; the heavy dependencies that do
not move with LangChain (torch, chromadb, onnxruntime, ...) come from this environment through a ``.pth`` file, after
the virtualenv's own packages, so the versions pip resolves for the app are the ones that run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PASSAGES

pytestmark = pytest.mark.heavy
ROOT = Path(__file__).resolve().parents[1]
NEWEST = ["langchain-core", "langgraph", "langchain-openai"]

APP = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import version

    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tracers.base import BaseTracer
    from langgraph.prebuilt import create_react_agent

    import agent
    from agent.llm.scripted import ScriptedChatModel
    from agent.retrieval.ingest import ingest
    from agent.surfaces.tools import as_tool

    class Runs(BaseTracer):
        def __init__(self):
            super().__init__()
            self.runs = []

        def _persist_run(self, run):
            pass

        def _start_trace(self, run):
            super()._start_trace(run)
            self.runs.append(run)

    question = "When did the Harry Potter film come out?"
    ingest(sys.argv[1], "tiny", progress=False)
    tool = as_tool("rag", llm="fake", collection="tiny")
    call = {"name": tool.name, "args": {"question": question}, "id": "call-1"}
    model = ScriptedChatModel(default=[AIMessage(content="", tool_calls=[call]), AIMessage(content="Done.")])
    tracer = Runs()
    state = create_react_agent(model, [tool]).invoke({"messages": [("user", question)]}, {"callbacks": [tracer]})
    by_id = {r.id: r for r in tracer.runs}
    method = next(r for r in tracer.runs if r.name == "rag")
    ancestors, run = [], method
    while run.parent_run_id in by_id:
        run = by_id[run.parent_run_id]
        ancestors.append(run.name)
    answer = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    print(json.dumps({
        "versions": {name: version(name) for name in ("langchain-core", "langgraph", "langchain-openai", "ambigqa")},
        "agent_file": agent.__file__,
        "tool_answer": answer.content,
        "artifact": answer.artifact,
        "final": state["messages"][-1].content,
        "method_run_ancestors": ancestors,
    }))
    """
)


def test_the_wheel_installs_beside_the_newest_langchain_and_runs_as_a_react_agents_tool(tmp_path):
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)], check=True)
    wheel = next(dist.glob("ambigqa-*.whl"))
    venv = tmp_path / "app"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    Path(site, "heavy-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--upgrade", str(wheel), *NEWEST],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]  # a pin we declare against them is ResolutionImpossible

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"AMBIGQA_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [python, "-c", APP, str(corpus)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(report["versions"]))  # the versions this run embedded it beside (pytest -s shows them)
    assert report["agent_file"].startswith(site)  # the wheel, not the checkout
    assert report["tool_answer"] and report["artifact"]["disambiguations"]  # the method's answer reached the agent
    assert report["final"] == "Done."
    assert report["method_run_ancestors"][:2] == ["ask_rag", "tools"]  # the tool run, in the agent's tools node
    assert report["method_run_ancestors"][-1] == "LangGraph"  # one trace: the agent's run is the root
