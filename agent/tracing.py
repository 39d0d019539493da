"""What a run tells a tracer: named after its method, tagged and described so traces can be filtered.

LangChain's tracers (LangSmith with ``LANGSMITH_TRACING=true``, an OpenTelemetry exporter, any callback handler) see
every graph run with ``run_name`` = the method, tags ``ambigqa`` and ``method:<name>``, and metadata: the method, the
collection, the LLM, the options the caller set and the package's version (docs/serving.md, "Traces").
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel


@cache
def package_version() -> str:
    try:
        return version("ambigqa")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def run_config(method: str, context: BaseModel, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """``config`` (a caller's callbacks, a thread) with the run's name, tags and metadata added to its own."""
    config = dict(config or {})
    options = context.model_dump(mode="json", exclude_unset=True, exclude={"llm", "collection", "passages"})
    given = getattr(context, "passages", None)
    metadata = {
        "ambigqa_method": method,
        "ambigqa_collection": "(given passages)" if given else getattr(context, "collection", "") or "(default)",
        "ambigqa_llm": getattr(context, "llm", "") or "(default)",
        "ambigqa_run_options": options,  # not "ambigqa_options": a clarify thread keeps its own there
        "ambigqa_version": package_version(),
    }
    config["run_name"] = config.get("run_name", method)
    config["tags"] = [*config.get("tags", []), "ambigqa", f"method:{method}"]
    config["metadata"] = {**config.get("metadata", {}), **metadata}
    return config
