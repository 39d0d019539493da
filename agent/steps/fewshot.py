"""Few-shot demonstrations from the ASQA few-shot pool, chosen per question by nearest neighbour or fixed.

Every demonstration comes from ``data/fewshot/``, built from ASQA questions that no benchmark split scores:
``asqa_pool.jsonl`` (questions, gold disambiguations, human long answers, the annotators' evidence snippets) for the
extraction, generation and closed-book prompts, and ``ambiguity.jsonl`` (pool questions with ambiguity types and reasons
written for this repository) for DIVA's I_a and I_p. The papers pick the k demonstrations whose questions are closest
to the actual one (DIVA A.4, ToC A.3); ``fixed`` takes the first k, which keeps the prompt prefix identical across
questions so the local model's prefix cache reuses it. ``fit_examples`` keeps the rendered demonstrations within a
token budget: demo passages are shortened first, then the least similar demonstrations are dropped. The prompts
read them as the question's casebook (``agent.steps.casebook``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from agent.errors import ConfigError
from agent.llm.prompts import estimate_tokens
from agent.resources import data_file
from agent.retrieval.embeddings import Backend, embed, usable
from agent.schemas import Passage, QAPair
from agent.settings import get_settings

Selection = Literal["nearest", "fixed"]
PASSAGE_WORDS = (60, 30, 15)  # how far demo passages are shortened, step by step, before demos are dropped


@dataclass(frozen=True)
class Shots:
    """How many demonstrations a prompt gets, how they are chosen, and the prompt's token budget."""

    k: int = 5
    selection: Selection = "nearest"
    budget: int = 3300


class Demo(BaseModel):
    question: str


class PoolPair(BaseModel):
    question: str
    short_answers: list[str]


class Evidence(BaseModel):
    title: str = ""
    text: str


class PoolExample(Demo):
    """One row of the few-shot pool."""

    id: str
    qa_pairs: list[PoolPair]
    long_answers: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)

    @property
    def pairs(self) -> list[QAPair]:
        return [QAPair(question=p.question, answer=p.short_answers[0]) for p in self.qa_pairs if p.short_answers]

    @property
    def passages(self) -> list[Passage]:
        return [Passage(id=f"{self.id}-{i}", title=e.title, text=e.text) for i, e in enumerate(self.evidence, 1)]

    @property
    def answers(self) -> list[str]:
        """Every gold short answer, in pair order."""
        return [answer for p in self.qa_pairs for answer in p.short_answers]

    @property
    def long_answer(self) -> str:
        return " ".join(self.long_answers[0].split()) if self.long_answers else ""


D = TypeVar("D", bound=Demo)
Item = TypeVar("Item")  # anything that renders as an example


@cache
def load_demos(name: str, model: type[D]) -> tuple[D, ...]:
    path = data_file("fewshot", f"{name}.jsonl")
    if not path.is_file():
        raise ConfigError(f"few-shot file {path} is missing: reinstall the package")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        return tuple(model.model_validate_json(line) for line in lines)
    except ValidationError as exc:
        raise ConfigError(f"few-shot file {path} has a malformed row: {str(exc).splitlines()[0]}") from None


@cache
def _question_vectors(name: str, model: type[D], backend: Backend) -> np.ndarray:
    """Embeddings of the demos' questions, computed once per backend and cached under ``$AMBIGQA_HOME/fewshot``."""
    questions = [demo.question for demo in load_demos(name, model)]
    digest = hashlib.sha256("\n".join(questions).encode()).hexdigest()[:16]
    path = get_settings().home / "fewshot" / f"{name}-{backend}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    vectors = embed(questions, backend=backend)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}.npy")  # processes warming the cache together never share a file
    np.save(tmp, vectors)
    tmp.replace(path)
    return vectors


def select_demos(question: str, name: str, model: type[D], k: int, selection: Selection = "nearest") -> list[D]:
    """Up to ``k`` demonstrations; nearest ones are ordered most similar last, next to the actual question."""
    demos = load_demos(name, model)
    if k <= 0:
        return []
    if selection == "fixed":
        return list(demos[:k])
    backend = usable(get_settings().embeddings)
    similarity = _question_vectors(name, model, backend) @ embed([question], backend=backend)[0]
    nearest = np.argsort(-similarity, kind="stable")[:k]
    return [demos[i] for i in reversed(nearest)]


def pool_demos(question: str, shots: Shots) -> list[PoolExample]:
    """The pool rows to show as demonstrations for ``question``."""
    return select_demos(question, "asqa_pool", PoolExample, shots.k, shots.selection)


def fit_examples(demos: Sequence[Item], render: Callable[[Item, int], str], room: int) -> str:
    """``Example`` blocks for ``demos`` within ``room`` estimated tokens; ``render(demo, passage_words)``.

    Demo passages are shortened first (``PASSAGE_WORDS``); then demos are dropped from the front, where the least
    similar ones stand. Nothing fits: no examples.
    """
    demos = list(demos)
    while demos:
        for words in PASSAGE_WORDS:
            text = "\n\n".join(f"Example\n{render(d, words)}" for d in demos)
            if estimate_tokens(text) <= room:
                return text
        demos = demos[1:]
    return ""
