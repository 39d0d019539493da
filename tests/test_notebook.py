"""The walkthrough notebook executes top to bottom offline with the scripted model."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.heavy  # a Jupyter kernel process

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "walkthrough.ipynb"


def test_walkthrough_runs_every_method(served_home, monkeypatch):
    monkeypatch.setenv("AMBIGQA_HOME", str(served_home))  # the kernel is a subprocess: never this process's store
    monkeypatch.setenv("AMBIGQA_COLLECTION", "tiny")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = "".join(
        o.get("text", "") for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    )
    from agent.registry import METHODS

    for method in METHODS:
        assert f"=== {method}:" in outputs
    pictures = [
        o
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert len(pictures) == len(METHODS)
    assert not any(o.get("output_type") == "error" for cell in nb.cells for o in cell.get("outputs", []))


def test_the_stored_notebook_carries_its_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.get("outputs") for cell in code), "run `make notebook` to store the outputs"
    assert any("image/png" in o.get("data", {}) for cell in code for o in cell["outputs"])


def test_graph_pictures_are_drawn_offline_with_subgraphs_framed():
    from agent.registry import load_graph
    from agent.surfaces.picture import graph_png

    png = graph_png(load_graph("router").get_graph(xray=True), title="router")
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
