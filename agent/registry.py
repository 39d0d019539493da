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
    "closed_book": "Answer a question from the model's own knowledge, covering its possible interpretations.",
    "rag": "Answer a possibly ambiguous question from retrieved passages, listing each interpretation with its answer.",
    "diva": "Answer an ambiguous question with DIVA: infer its interpretations, retrieve and verify passages, answer all.",
    "toc": "Answer an ambiguous question with Tree of Clarifications: explore its interpretations as a tree, then answer all.",
    "verdict": "Answer an ambiguous question with VerDICt: one interpretation per verified passage, consolidated.",
    "sunar": "Answer a complex multi-hop question by decomposing it and retrieving evidence hop by hop.",
    "madam": "Answer from documents that may conflict: one agent per document, debating rounds, an aggregator.",
    "router": "Answer a question, routing clear ones to simple RAG and ambiguous ones to a disambiguation method.",
}
METHODS = tuple(DESCRIPTIONS)
COSTS = {  # what a call costs (docs/methods.md, ASQA dev, local model): helps a person or a model choose
    "closed_book": "1 LLM call, no retrieval; fastest, knows only what the model knows",
    "rag": "2 LLM calls over 5 retrieved passages",
    "diva": "about 6 LLM calls; best when the question clearly has several interpretations",
    "toc": "about 7 LLM calls exploring a tree of interpretations",
    "verdict": "about 22 LLM calls, one per retrieved passage; most thorough, slowest",
    "sunar": "a few calls per hop; for multi-hop questions, not ambiguity",
    "madam": "one call per document per round (up to 3 rounds) plus one per round to aggregate",
    "router": "1 call to judge ambiguity, then rag or a disambiguation method",
}


def describe(method: str) -> str:
    """What ``method`` is good for and what it costs: the tool, MCP and Studio description."""
    return f"{DESCRIPTIONS[method]} Cost: {COSTS[method]}."


def known_method(method: str) -> str:
    """``method``, or an ``UnknownMethodError`` that lists the methods (without importing any graph)."""
    if method not in METHODS:
        raise UnknownMethodError(f"unknown method '{method}': choose one of {', '.join(METHODS)}")
    return method


def method_module(method: str) -> ModuleType:
    """The module ``graphs.<method>``: its graph, context schema and nodes."""
    method = known_method(method)
    return importlib.import_module(f"graphs.{method}")


def load_graph(method: str) -> Any:
    """The compiled graph of ``method``."""
    return method_module(method).graph


def checkpoint_types() -> list[tuple[str, str]]:
    """(module, class) of every pydantic model of ours that a method's checkpointed state may hold: what a checkpoint
    serializer should give back as that class (LangGraph returns a type it was not told of as a bare dict). Found by
    walking each method's state annotations into the models' fields (``Conflict``, ``Draft`` and ``AnswerReview``
    live outside the graph modules), and every model defined in ``agent.schemas`` or a method module."""
    import inspect
    from typing import get_args, get_type_hints

    from pydantic import BaseModel

    import agent.schemas

    modules = [agent.schemas, *(method_module(m) for m in METHODS)]
    found = {
        cls
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseModel) and cls.__module__ in (m.__name__ for m in modules)
    }

    def walk(annotation: object) -> None:
        for arg in get_args(annotation):
            walk(arg)
        if not (inspect.isclass(annotation) and issubclass(annotation, BaseModel)) or annotation in seen:
            return
        if annotation.__module__.split(".")[0] in ("agent", "graphs"):
            seen.add(annotation)
            for field in annotation.model_fields.values():
                walk(field.annotation)

    seen: set[type[BaseModel]] = set()
    for m in METHODS:
        for hint in get_type_hints(method_module(m).graph.builder.state_schema, include_extras=True).values():
            walk(hint)
    return sorted({(cls.__module__, cls.__name__) for cls in found | seen})
