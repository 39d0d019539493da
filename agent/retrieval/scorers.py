"""Re-rankers by name, for the ``reranker`` option: ``cross-encoder`` (the default), ``colbert``, or any scorer a
caller registers with ``register_scorer``."""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.errors import ConfigError
from agent.retrieval.colbert import colbert_scorer
from agent.retrieval.rerank import Scorer, cross_encoder

DEFAULT_RERANKER = "cross-encoder"
BUILT_IN: dict[str, Callable[[], Scorer]] = {"cross-encoder": cross_encoder, "colbert": colbert_scorer}

_registry: dict[str, Scorer] = {}
_lock = threading.Lock()


def register_scorer(name: str, scorer: Scorer) -> None:
    """Make ``scorer`` selectable by name (the ``reranker`` context field), e.g. another cross-encoder."""
    with _lock:
        _registry[name] = scorer


def get_scorer(name: str = DEFAULT_RERANKER) -> Scorer:
    """The scorer called ``name``; models load on first use."""
    with _lock:
        scorer = _registry.get(name)
    if scorer is not None:
        return scorer
    if name in BUILT_IN:
        return BUILT_IN[name]()
    raise ConfigError(
        f"unknown reranker '{name}': use {' or '.join(BUILT_IN)}, or register one with "
        "agent.retrieval.scorers.register_scorer"
    )
