"""The one registry of methods: their names, what each is good for, and their compiled graphs.

The only module in ``agent/`` that imports ``graphs/`` (lazily, by name), so the building blocks never depend on the
methods built from them.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from agent.errors import UnknownMethodError

DESCRIPTIONS = {
    "closed_book": "Answer a question from the model's own knowledge, covering its possible readings.",
    "rag": "Answer a possibly ambiguous question from retrieved passages, listing each reading with its answer.",
    "diva": "Answer an ambiguous question with DIVA: infer its interpretations, retrieve and verify passages, answer all.",
    "toc": "Answer an ambiguous question with Tree of Clarifications: explore its readings as a tree, then answer all.",
    "verdict": "Answer an ambiguous question with VerDICt: one interpretation per verified passage, consolidated.",
    "sunar": "Answer a complex multi-hop question by decomposing it and retrieving evidence hop by hop.",
    "router": "Answer a question, routing clear ones to simple RAG and ambiguous ones to a disambiguation method.",
}
METHODS = tuple(DESCRIPTIONS)


def method_module(method: str) -> ModuleType:
    """The module ``graphs.<method>``: its graph, context schema and nodes."""
    if method not in METHODS:
        raise UnknownMethodError(f"unknown method '{method}': choose one of {', '.join(METHODS)}")
    return importlib.import_module(f"graphs.{method}")


def load_graph(method: str) -> Any:
    """The compiled graph of ``method``."""
    return method_module(method).graph
