"""Graph nodes that call the LLM are coroutines, usable from both of LangGraph's APIs.

Under ``ainvoke``/``astream`` LangGraph awaits them on the caller's event loop (concurrent questions need no threads).
Under ``invoke``/``stream`` (the CLI, the eval harness, a server's worker threads) each call is run on one background
event loop shared by the process, in the calling thread's context (so tracing and ``get_config`` still work), while
the calling thread waits: one implementation per node, and sync callers keep their API.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_config
from langgraph.runtime import get_runtime

from agent.context import RunContext, fitting
from agent.errors import ContextOverflowError
from agent.llm.usage import merge_usage, node_calls, node_usage

T = TypeVar("T")
WINDOW_RETRIES = 2  # runs of a node again after its prompt overflowed the window: one cut by the excess, one more

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _background_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_serve, args=(_loop,), name="ambigqa-async-nodes", daemon=True)
            _thread.start()
        return _loop, _thread


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run the loop for good. A task raising ``KeyboardInterrupt`` or ``SystemExit`` (a model, a callback) makes
    asyncio re-raise it out of ``run_forever``; the task holds it for its awaiter, so the loop just carries on."""
    while True:
        try:
            loop.run_forever()
            return
        except (KeyboardInterrupt, SystemExit):
            continue


def _forget_loop() -> None:  # a forked child has the loop object but not its thread
    global _loop, _thread
    _loop = _thread = None


os.register_at_fork(after_in_child=_forget_loop)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on the background loop, in a copy of this thread's context; works where this
    thread already runs a loop (Jupyter). Interrupting the wait cancels the coroutine; whatever it raises, even
    ``KeyboardInterrupt``, is raised here and the background loop goes on."""
    loop, thread = _background_loop()
    if threading.current_thread() is thread:
        coroutine.close()
        raise RuntimeError("run_sync called from a coroutine on the background loop: await it instead")
    result: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[None]] = []

    async def settle() -> None:
        try:
            result.set_result(await coroutine)
        except asyncio.CancelledError:
            result.cancel()
        except BaseException as exc:  # KeyboardInterrupt too: it is the caller's to handle
            result.set_exception(exc)

    def start() -> None:  # runs in the caller's context, which the task copies
        tasks.append(loop.create_task(settle()))

    loop.call_soon_threadsafe(start, context=contextvars.copy_context())
    try:
        return result.result()
    except BaseException:
        if tasks and not tasks[0].done():
            loop.call_soon_threadsafe(tasks[0].cancel)
        raise


def llm_node(afunc: Callable[..., Coroutine[Any, Any, dict]]) -> RunnableLambda:
    """The node for ``add_node``: ``afunc`` awaited under the async API, run by ``run_sync`` under the sync one, its
    LLM calls' usage added to its update under the node's name, run again with fewer worked examples when a prompt
    overflows the model's window (``within_window``). ``afunc`` gets ``runtime`` and ``config`` where its signature
    names them, as LangGraph gives a plain node function."""
    wanted = inspect.signature(afunc).parameters

    async def accounted(state: Any, config: RunnableConfig) -> dict:
        extra: dict[str, Any] = {"runtime": get_runtime()} if "runtime" in wanted else {}
        extra |= {"config": config} if "config" in wanted else {}
        with node_calls() as calls:
            update = await within_window(afunc, state, **extra)
        if not calls:
            return update
        return {**update, "usage": merge_usage(update.get("usage"), node_usage(_node_name(), *calls))}

    def run(state: Any, config: RunnableConfig) -> dict:
        return run_sync(accounted(state, config))

    return RunnableLambda(run, afunc=accounted, name=afunc.__name__)


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
