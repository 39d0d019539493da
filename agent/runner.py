"""``agent.run``: validate the question, pick the graph, run it with per-run options, return a ``RunResult``."""

from __future__ import annotations

import contextvars
import importlib
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel

from agent.errors import InvalidQuestionError, UnknownMethodError
from agent.llm.factory import prewarm, register_model
from agent.schemas import RunResult, UsageReport
from agent.settings import get_settings
from agent.llm.usage import merge_usage
from graphs import METHODS

CONTRACT = {"question", "answer", "disambiguations", "passages", "usage"}
_model_ids = itertools.count(1)

NodeCallback = Callable[[str, dict[str, Any], float], None]


def validate_question(question: Any) -> str:
    if not isinstance(question, str) or not question.strip():
        raise InvalidQuestionError("the question is empty: ask something, e.g. 'When did the Harry Potter film come out?'")
    question = " ".join(question.split())
    limit = get_settings().max_question_chars
    if len(question) > limit:
        raise InvalidQuestionError(f"the question has {len(question):,} characters; the limit is {limit:,}")
    return question


def load_graph(method: str) -> Any:
    if method not in METHODS:
        raise UnknownMethodError(f"unknown method '{method}': choose one of {', '.join(METHODS)}")
    return importlib.import_module(f"graphs.{method}").graph


def run(
    question: str,
    method: str = "rag",
    llm: str | BaseChatModel | None = None,
    collection: str | None = None,
    *,
    on_node: NodeCallback | None = None,
    **options: Any,
) -> RunResult:
    """Answer ``question`` with ``method``; ``options`` override the method's context fields (e.g. ``top_k=10``).

    ``on_node(node, update, seconds)`` is called as each node finishes (live progress).
    """
    question = validate_question(question)
    graph = load_graph(method)
    if isinstance(llm, BaseChatModel):
        name = f"model-{next(_model_ids)}"
        register_model(name, llm)
        llm = name
    context = graph.context_schema(llm=llm or "", collection=collection or "", **options)
    prewarm(context.llm or None)
    state: dict[str, Any] = {}
    usage = UsageReport()
    start = last = time.perf_counter()
    for node, update, inner in _node_updates(graph, {"question": question}, context):
        now = time.perf_counter()
        if on_node:
            on_node(node, update, now - last)
        last = now
        if inner:  # a subgraph's node: its parent node's update carries the change
            continue
        for key, value in update.items():
            if key == "usage":
                usage = merge_usage(usage, value)
            else:
                state[key] = value
    return RunResult(
        question=question,
        method=method,
        answer=state.get("answer", ""),
        disambiguations=state.get("disambiguations", []),
        passages=state.get("passages", []),
        usage=usage,
        seconds=round(time.perf_counter() - start, 3),
        extra={k: v for k, v in state.items() if k not in CONTRACT},
    )


def _node_updates(graph: Any, inputs: dict, context: Any) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(node, update, inside a subgraph) as nodes finish; subgraph nodes are named ``parent/node``.

    The run gets a fresh context: called from inside another graph (a tool in an agent), LangGraph would otherwise
    take it for a subgraph of that run and send its updates to the parent's stream instead of ours.
    """
    fresh = contextvars.Context()
    chunks = graph.stream(inputs, context=context, stream_mode="updates", subgraphs=True)
    for namespace, chunk in iter(lambda: fresh.run(next, chunks, None), None):
        prefix = "/".join(part.split(":")[0] for part in namespace)
        for node, update in chunk.items():
            if isinstance(update, dict):
                yield (f"{prefix}/{node}" if prefix else node), update, bool(namespace)
