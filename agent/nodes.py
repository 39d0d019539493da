"""Graph nodes that call the LLM: plain coroutine functions, awaited by LangGraph on the caller's event loop.

Every graph therefore runs under LangGraph's async API (``ainvoke``/``astream``); synchronous callers go through
``agent.sync``, the one bridge. ``llm_node`` adds what every such node needs: its calls' usage in its update, and a
run again with fewer worked examples when a prompt overflows the model's window.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import get_runtime

from agent.context import RunContext, fitting
from agent.errors import ContextOverflowError
from agent.llm.usage import merge_usage, node_calls, node_usage

WINDOW_RETRIES = 2  # runs of a node again after its prompt overflowed the window: one cut by the excess, one more


def llm_node(afunc: Callable[..., Coroutine[Any, Any, dict]]) -> Callable[..., Coroutine[Any, Any, dict]]:
    """``afunc`` as a node for ``add_node``, still a plain coroutine function: its LLM calls' usage added to its update
    under the node's name, run again with fewer worked examples when a prompt overflows the model's window
    (``within_window``). ``afunc`` gets ``runtime`` and ``config`` where its signature names them, as LangGraph gives
    a node function."""
    wanted = inspect.signature(afunc).parameters

    async def node(state: Any, config: RunnableConfig) -> dict:
        extra: dict[str, Any] = {"runtime": get_runtime()} if "runtime" in wanted else {}
        extra |= {"config": config} if "config" in wanted else {}
        with node_calls() as calls:
            update = await within_window(afunc, state, **extra)
        if not calls:
            return update
        return {**update, "usage": merge_usage(update.get("usage"), node_usage(_node_name(), *calls))}

    node.__name__, node.__qualname__, node.__doc__ = afunc.__name__, afunc.__qualname__, afunc.__doc__
    return node


async def within_window(afunc: Callable[..., Coroutine[Any, Any, dict]], state: Any, **kwargs: Any) -> dict:
    """``afunc``'s update. A prompt that ran over the model's window (``ContextOverflowError``: given passages full of
    numbers tokenize at twice the estimate) makes the node leave out worked examples worth 1.2× the excess
    (``context.WINDOW_MARGIN``) and run again, at most ``WINDOW_RETRIES`` times; the update then carries the cut
    (``window_cut``, a maximum over nodes), so the question's later prompts share the smaller casebook. A node that
    read no worked examples, or has none left to lose, raises the error as it came."""
    ctx = getattr(kwargs.get("runtime"), "context", None)
    start = cut = state.get("window_cut", 0) if isinstance(state, dict) else 0
    retries = 0
    while True:
        with fitting(cut) as fit:
            try:
                update = await afunc(state, **kwargs)
            except ContextOverflowError as exc:
                retries += 1
                wider = ctx.wider_cut(cut, exc.excess) if isinstance(ctx, RunContext) and fit.read else None
                if wider is None or retries > WINDOW_RETRIES:
                    raise
                cut = wider
                continue
        return update if cut == start else {**update, "window_cut": cut}


def _node_name() -> str:
    try:
        return get_config().get("metadata", {}).get("langgraph_node", "llm")
    except RuntimeError:  # called outside a graph run
        return "llm"
