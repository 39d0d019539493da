"""What an eval row was made with: the LLM, the method's resolved options, the dataset, the code.

``key`` hashes everything that changes a result except the commit (a fix to a README must not throw away hours of
runs); the commit is recorded on every row and ``summary.json`` lists the commits its rows come from.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.settings import get_settings


class Provenance(BaseModel):
    llm: dict[str, Any]
    options: dict[str, Any]
    dataset_sha256: str
    judge: dict[str, Any] | None = None
    reader: str | None = None
    replay: dict[str, Any] | None = None  # a replay's source run and node (``agent.eval.checkpoints``)
    commit: str | None = None

    @property
    def key(self) -> str:
        keyed = self.model_dump(exclude={"commit"} | ({"replay"} if self.replay is None else set()))
        return hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:16]


def llm_provenance(name: str | None) -> dict[str, Any]:
    """Provider, model and what pins it: the GGUF's sha256 for the local model, the endpoint for a remote one."""
    settings = get_settings()
    name = name or settings.llm
    if name == "local":
        from agent.llm.gguf import MODELS

        model = MODELS[settings.local_model]
        return {"provider": "local", "model": model.filename, "sha256": model.sha256, "n_ctx": settings.local_ctx}
    if name == "openai":
        endpoint = settings.openai_base_url or "https://api.openai.com/v1"
        return {"provider": "openai", "model": settings.openai_model, "endpoint": endpoint}
    if name == "fake":
        return {"provider": "fake", "model": "scripted demo replies"}
    from agent.llm.factory import get_chat_model

    chat = get_chat_model(name)
    return {"provider": name, "model": getattr(chat, "model_name", None) or type(chat).__name__}


def resolved_options(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """Every context field of ``method`` as the run will see it: the caller's values over the method's defaults."""
    from agent.context import make_context
    from agent.registry import load_graph

    context = make_context(load_graph(method).context_schema, options, strict=True, owner=method)
    return context.model_dump(mode="json")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def git_commit() -> str | None:
    """The checkout's commit (``+dirty`` with uncommitted changes), or None for an installed package."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def row_key(row: dict[str, Any]) -> str | None:
    """The provenance key an eval row was made with (None for a row without one)."""
    return (row.get("provenance") or {}).get("key")
