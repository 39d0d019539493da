"""Ambiguity-aware retrieval-augmented QA on LangGraph: shared building blocks and the ``run`` entry point.

Heavy modules load on first use so ``python -m agent --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.runner import run
    from agent.schemas import RunResult

__all__ = ["run", "RunResult"]


def __getattr__(name: str) -> Any:
    if name == "run":
        from agent.runner import run

        return run
    if name == "RunResult":
        from agent.schemas import RunResult

        return RunResult
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
