"""Few-shot demonstrations kept as JSONL in ``data/fewshot/``, chosen per question by nearest neighbour or fixed.

DIVA (A.4) and ToC pick the k demonstrations whose questions are closest to the actual one; ``fixed`` takes the
first k, which keeps the prompt prefix identical across questions (the local model's prefix cache then reuses it).
"""

from __future__ import annotations

from functools import cache
from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from agent.errors import ConfigError
from agent.resources import data_file
from agent.retrieval.embeddings import embed

Selection = Literal["nearest", "fixed"]


class Demo(BaseModel):
    question: str


D = TypeVar("D", bound=Demo)


@cache
def load_demos(name: str, model: type[D]) -> tuple[D, ...]:
    path = data_file("fewshot", f"{name}.jsonl")
    if not path.is_file():
        raise ConfigError(f"few-shot file {path} is missing: restore it from the repository")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        return tuple(model.model_validate_json(line) for line in lines)
    except ValidationError as exc:
        raise ConfigError(f"few-shot file {path} has a malformed row: {str(exc).splitlines()[0]}") from None


@cache
def _question_vectors(name: str, model: type[D]) -> np.ndarray:
    return embed([demo.question for demo in load_demos(name, model)])


def select_demos(question: str, name: str, model: type[D], k: int, selection: Selection = "nearest") -> list[D]:
    """Up to ``k`` demonstrations; nearest ones are ordered most similar last, next to the actual question."""
    demos = load_demos(name, model)
    if k <= 0:
        return []
    if selection == "fixed":
        return list(demos[:k])
    similarity = _question_vectors(name, model) @ embed([question])[0]
    nearest = np.argsort(-similarity, kind="stable")[:k]
    return [demos[i] for i in reversed(nearest)]
