"""all-MiniLM-L6-v2 as an INT8 ONNX graph, exported once from the local weights and run by ONNX Runtime.

The graph is the transformer plus what sentence-transformers stacks on it for this model (``modules.json``: mean
pooling over the attention mask, then L2 normalisation), so it returns finished sentence vectors. The exported file
is named after a hash of the source weights and ``RECIPE``: new weights or a changed recipe re-export on first use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Recipe(TypedDict):
    graph: str
    exporter: str
    opset: int
    quantization: str
    version: int


# Everything that shapes the exported file; bump "version" when the export code changes.
RECIPE: Recipe = {
    "graph": "transformer + mean pooling + L2 normalisation",
    "exporter": "torch.onnx.export(dynamo=False)",
    "opset": 17,
    "quantization": "quantize_dynamic, MatMul weights to QInt8 per channel",
    "version": 1,
}


@lru_cache(maxsize=4)
def model_file(model_dir: Path, cache_dir: Path) -> Path:
    """Where the INT8 export of ``model_dir`` lives: ``cache_dir/minilm-l6-v2-int8-<weights+recipe hash>.onnx``."""
    digest = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode())
    with (model_dir / "model.safetensors").open("rb") as weights:
        for block in iter(lambda: weights.read(1 << 20), b""):
            digest.update(block)
    return cache_dir / f"minilm-l6-v2-int8-{digest.hexdigest()[:16]}.onnx"


def export(model_dir: Path, dest: Path) -> None:
    """``torch.onnx.export`` of the pooled, normalised transformer, then INT8 weights (``quantize_dynamic``)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, transformer: torch.nn.Module):
            super().__init__()
            self.transformer = transformer

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            tokens = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    transformer = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    sample = torch.ones((2, 16), dtype=torch.int64)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".export-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        with torch.no_grad():
            torch.onnx.export(
                Pooled(transformer.eval()),
                (sample, sample, torch.zeros_like(sample)),
                str(fp32),
                dynamo=False,
                opset_version=RECIPE["opset"],
                input_names=list(INPUTS),
                output_names=["sentence_embedding"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in INPUTS}
                | {"sentence_embedding": {0: "batch"}},
            )
        root, level = logging.getLogger(), logging.getLogger().level
        root.setLevel(logging.ERROR)  # quantize_dynamic logs advice on pre-processing at WARNING
        try:  # per channel: per tensor loses 4 points of cosine to torch; the embedding lookup stays float
            quantize_dynamic(fp32, int8, op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.setLevel(level)
        int8.replace(dest)  # atomic: a concurrent reader sees no file or the whole file


class OnnxEncoder:
    """Tokenise with the model's fast tokenizer, run the INT8 graph in length-sorted batches."""

    def __init__(self, model: Path, model_dir: Path):
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.model = model
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # batches are padded here, to their longest row
        self.tokenizer.enable_truncation(config["max_seq_length"])
        self._sessions: dict[int, onnxruntime.InferenceSession] = {}
        self._lock = threading.Lock()

    def session(self, threads: int) -> onnxruntime.InferenceSession:
        with self._lock:
            if threads not in self._sessions:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                self._sessions[threads] = onnxruntime.InferenceSession(
                    str(self.model), options, providers=["CPUExecutionProvider"]
                )
            return self._sessions[threads]

    def encode(self, texts: list[str], batch_size: int = 8, threads: int = 1) -> np.ndarray:
        """Unit-length float32 vectors, row i for text i."""
        encodings = self.tokenizer.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")  # similar lengths share a batch
        session = self.session(threads)
        ranked = np.concatenate(
            [
                session.run(None, _batch([encodings[i] for i in order[start : start + batch_size]]))[0]
                for start in range(0, len(order), batch_size)
            ]
        )
        vectors = np.empty_like(ranked, dtype=np.float32)
        vectors[order] = ranked
        return vectors


def _batch(encodings: list[Encoding]) -> dict[str, np.ndarray]:
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def load(model_dir: Path, cache_dir: Path) -> OnnxEncoder:
    """The encoder for ``model_dir``, exporting it into ``cache_dir`` first if no export with today's recipe is there."""
    path = model_file(model_dir, cache_dir)
    if not path.is_file():
        export(model_dir, path)
    return OnnxEncoder(path, model_dir)
