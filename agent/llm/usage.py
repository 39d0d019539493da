"""Usage accounting: every LLM call's tokens and seconds, summed per graph node by the state reducer.

``ask``/``aask`` ``record`` each call (its retries included) toward the node running it; ``agent.nodes.llm_node``
opens that node's ``calls`` and adds them to the node's state update, so nodes never account usage themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import AIMessage

from agent.schemas import NodeUsage, UsageReport


def call_usage(message: AIMessage, seconds: float) -> NodeUsage:
    meta: dict[str, Any] = dict(message.usage_metadata or {})
    if not meta:  # some servers report only response_metadata.token_usage
        token_usage = (message.response_metadata or {}).get("token_usage") or {}
        meta = {
            "input_tokens": token_usage.get("prompt_tokens", 0),
            "output_tokens": token_usage.get("completion_tokens", 0),
            "input_token_details": {
                "cache_read": (token_usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            },
        }
    cached = (meta.get("input_token_details") or {}).get("cache_read")
    return NodeUsage(
        calls=1,
        input_tokens=int(meta.get("input_tokens") or 0),
        cached_tokens=int(cached or 0),
        output_tokens=int(meta.get("output_tokens") or 0),
        seconds=round(seconds, 3),
    )


def merge_usage(left: UsageReport | dict | None, right: UsageReport | dict | None) -> UsageReport:
    """State reducer: add ``right``'s per-node usage to ``left`` and recompute the total."""
    left = UsageReport.model_validate(left or {})
    right = UsageReport.model_validate(right or {})
    by_node = dict(left.by_node)
    for node, usage in right.by_node.items():
        by_node[node] = by_node.get(node, NodeUsage()) + usage
    total = sum(by_node.values(), NodeUsage())
    return UsageReport(total=total, by_node=by_node)


def node_usage(node: str, *usages: NodeUsage) -> UsageReport:
    total = sum(usages, NodeUsage())
    return UsageReport(total=total, by_node={node: total})


_node_calls: ContextVar[list[NodeUsage] | None] = ContextVar("ambigqa_node_calls", default=None)


def record(usage: NodeUsage) -> None:
    """Count one call toward the node running it; outside a node (a plain ``ask``) nothing counts it."""
    calls = _node_calls.get()
    if calls is not None:
        calls.append(usage)


@contextmanager
def node_calls() -> Iterator[list[NodeUsage]]:
    """The usage of every call made inside the block, its concurrent tasks and worker threads included (they copy
    this context, and with it the list)."""
    calls: list[NodeUsage] = []
    token = _node_calls.set(calls)
    try:
        yield calls
    finally:
        _node_calls.reset(token)
