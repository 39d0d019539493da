"""Write notebooks/walkthrough.ipynb (run: python notebooks/make_walkthrough.py). Cells stay short and runnable."""

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
        "## The graphs\n\nMermaid text (paste into any Mermaid viewer; `draw_mermaid_png()` would call an online service)."
    ),
    new_code_cell(
        "for method in METHODS:\n"
        "    print(f'--- {method}')\n"
        "    print(load_graph(method).get_graph(xray=True).draw_mermaid())"
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
nbformat.write(nb, path)
print(f"wrote {path}")
