"""Write notebooks/walkthrough.ipynb; with --execute (``make notebook``) also run it and store its outputs.

Cells stay short and runnable. Executing needs nothing online: the scripted model answers, graph pictures are drawn
locally (``agent/surfaces/picture.py``), and the demo corpus is embedded on first use.
"""

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# Walkthrough: every method on one ambiguous question\n\n"
        "Each method is a LangGraph state machine in `graphs/`. This notebook draws each graph and runs it on a demo "
        'question with the scripted model (`llm="fake"`: instant, offline, deterministic). Switch `LLM` to '
        '`"local"` for the embedded Qwen2.5 model (minutes per question on 2 cores) or `"openai"` for any '
        "OpenAI-compatible endpoint."
    ),
    new_code_cell(
        "import os, sys\n"
        "from pathlib import Path\n"
        "ROOT = Path.cwd().parent if Path.cwd().name == 'notebooks' else Path.cwd()\n"
        "sys.path.insert(0, str(ROOT))\n"
        "import agent\n"
        "from agent.registry import load_graph\n"
        "from agent.registry import METHODS\n"
        "LLM = 'fake'\n"
        "QUESTION = 'When was the first pirates of the caribbean movie released?'\n"
        "METHODS"
    ),
    new_markdown_cell(
        "## The graphs\n\nDrawn offline (`agent.surfaces.picture`: a grandalf layout drawn by matplotlib; "
        "`draw_mermaid_png()` would call an online service). Dashed arrows are conditional edges; the router draws the "
        "method it delegates to as a framed subgraph. `get_graph(xray=True).draw_mermaid()` gives Mermaid text."
    ),
    new_code_cell(
        "from IPython.display import Image, display\n"
        "from agent.surfaces.picture import graph_png\n"
        "for method in METHODS:\n"
        "    display(Image(graph_png(load_graph(method).get_graph(xray=True), title=method)))"
    ),
    new_markdown_cell(
        "## Running each method\n\nEvery result carries the answer, the interpretations with their supporting passage ids, the passages and per-node usage."
    ),
    new_code_cell(
        "results = {}\n"
        "for method in METHODS:\n"
        "    results[method] = result = agent.run(QUESTION, method=method, llm=LLM)\n"
        "    print(f'=== {method}: {result.usage.total.calls} LLM calls, {len(result.passages)} passages')\n"
        "    print(result.answer[:300])\n"
        "    for d in result.disambiguations[:3]:\n"
        "        print('  -', d.question, '→', d.answer, d.passage_ids)"
    ),
    new_markdown_cell("## Usage per node"),
    new_code_cell("{method: {node: u.calls for node, u in r.usage.by_node.items()} for method, r in results.items()}"),
]
nb = new_notebook(
    cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
)
path = Path(__file__).with_name("walkthrough.ipynb")
if "--execute" in sys.argv[1:]:
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
nbformat.write(nb, path)
print(f"wrote {path}" + (" with its outputs" if "--execute" in sys.argv[1:] else ""))
