"""Ambiguity-aware retrieval-augmented QA on LangGraph: shared building blocks, ``run``, ``arun``, ``search``,
``lookup`` (passages by id), and ``clarify`` / ``resume`` (with ``aclarify`` / ``aresume``) for the router's clarify
threads.

Heavy modules load on first use so ``python -m agent --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.runner import aclarify, aresume, arun, clarify, lookup, resume, run, search
    from agent.schemas import RunResult
    from agent.threads import ClarifyResult

__all__ = ["run", "arun", "search", "lookup", "clarify", "aclarify", "resume", "aresume", "RunResult", "ClarifyResult"]
RUNNER = __all__[:8]


def __getattr__(name: str) -> Any:
    if name in RUNNER:
        from agent import runner

        return getattr(runner, name)
    if name == "RunResult":
        from agent.schemas import RunResult

        return RunResult
    if name == "ClarifyResult":
        from agent.threads import ClarifyResult

        return ClarifyResult
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
