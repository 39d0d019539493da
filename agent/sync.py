"""The one bridge from synchronous callers to the graphs, whose LLM nodes are coroutines (``agent.nodes``).

A graph runs only under LangGraph's async API. ``agent.run``, ``clarify``/``resume``, the CLI, the eval harness and the
server's sync routes drive it from here: on one background event loop shared by the process, in a copy of the
caller's context (so tracing and ``get_config`` still work), while the calling thread waits. This works where the
thread already runs a loop (Jupyter), and an interrupt of the wait cancels the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """The process's loop, started on first use; ``RuntimeError`` when called from a coroutine on it (which must
    await, not block its own loop)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_serve, args=(_loop,), name="ambigqa-async-nodes", daemon=True)
            _thread.start()
        if threading.current_thread() is _thread:
            raise RuntimeError("a synchronous API called from a coroutine on the background loop: await it instead")
        return _loop


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
    """Run ``coroutine`` to completion on the background loop, in a copy of this thread's context. Interrupting the
    wait cancels the coroutine; whatever it raises, even ``KeyboardInterrupt``, is raised here and the loop goes on."""
    try:
        loop = _background_loop()
    except RuntimeError:
        coroutine.close()
        raise
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


def iterate_sync(stream: AsyncIterator[T], context: contextvars.Context | None = None) -> Iterator[T]:
    """The items of ``stream`` as they come, consumed on the background loop in ``context`` (default: a copy of this
    thread's). Closing the iterator early, or an interrupt of the wait, cancels the stream; what it raises is raised
    here."""
    loop = _background_loop()
    items: queue.Queue[tuple[str, Any]] = queue.Queue()
    tasks: list[asyncio.Task[None]] = []
    closed = threading.Event()

    async def pump() -> None:
        try:
            async for item in stream:
                items.put(("item", item))
        except BaseException as exc:  # cancelled, failed or interrupted: the caller raises it
            items.put(("raise", exc))
        else:
            items.put(("end", None))

    def start() -> None:
        if not closed.is_set():  # interrupted before the loop got to it
            tasks.append(loop.create_task(pump()))

    loop.call_soon_threadsafe(start, context=context if context is not None else contextvars.copy_context())
    try:
        while True:
            kind, value = items.get()
            if kind == "end":
                return
            if kind == "raise":
                raise value
            yield value
    finally:
        closed.set()
        if tasks and not tasks[0].done():
            loop.call_soon_threadsafe(tasks[0].cancel)
