"""LangGraph's synchronous checkpoint savers, usable by runs under the async API (``agent.sync``): each async method
runs its sync twin on a worker thread.

LangGraph's async savers would hold a connection per event loop; these keep one SQLite connection (behind the saver's
lock) or one PostgreSQL pool for both the runs and the synchronous reads beside them (``agent.threads``' claims and
``get_state``, ``agent.eval.checkpoints``' history).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

if TYPE_CHECKING:
    from langgraph.checkpoint.base import DeltaChannelHistory
    from langgraph.checkpoint.postgres import PostgresSaver


class Threaded(BaseCheckpointSaver[Any]):
    """The async half of a synchronous saver: its sync methods on worker threads."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(lambda: self.get_delta_channel_history(config=config, channels=channels))


class ThreadedSqliteSaver(Threaded, SqliteSaver):
    """``SqliteSaver`` for runs under either API."""


def checkpoint_serde() -> JsonPlusSerializer:
    """The serializer of every checkpoint we write: our own state types allowed back (``agent.registry``)."""
    from agent.registry import checkpoint_types

    return JsonPlusSerializer(allowed_msgpack_modules=checkpoint_types())


def sqlite_saver(path: str) -> ThreadedSqliteSaver:
    """A saver over the SQLite file ``path``, shared by threads (its calls take the saver's lock)."""
    return ThreadedSqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=checkpoint_serde())


@lru_cache(maxsize=1)
def threaded_postgres_saver() -> type[PostgresSaver]:
    """``PostgresSaver`` for runs under either API, its class made on first use (psycopg loads only then)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class ThreadedPostgresSaver(Threaded, PostgresSaver):
        pass

    return ThreadedPostgresSaver
