"""Ambiguity-aware retrieval-augmented QA on LangGraph: shared building blocks, ``run``, ``arun`` and ``search``.

Heavy modules load on first use so ``python -m agent --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.runner import arun, run, search
    from agent.schemas import RunResult

__all__ = ["run", "arun", "search", "RunResult"]


def __getattr__(name: str) -> Any:
    if name in ("run", "arun", "search"):
        from agent import runner

        return getattr(runner, name)
    if name == "RunResult":
        from agent.schemas import RunResult

        return RunResult
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
