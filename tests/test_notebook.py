"""The walkthrough notebook executes top to bottom offline with the scripted model."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "walkthrough.ipynb"


def test_walkthrough_runs_every_method(home, collection, monkeypatch):
    monkeypatch.setenv("AMBIGQA_COLLECTION", collection)
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
    assert "graph TD" in outputs or "flowchart" in outputs
    assert not any(o.get("output_type") == "error" for cell in nb.cells for o in cell.get("outputs", []))
