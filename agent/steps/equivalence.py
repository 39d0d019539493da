"""Semantic equivalence of short answers and semantic sets (SUNAR's ASU, Eq. 3–4, after Kuhn et al. 2023).

Two answers share a semantic set when each entails the other; answers equal once normalised (case, punctuation,
articles, dates, numbers) need no judge, nor do answers holding different numbers. The paper judges with an NLI model,
and none ships in a PyPI package: the default (``token``) judges lexically, with no calls: ``a`` entails ``b`` when
``a`` covers at least ``threshold`` of ``b``'s tokens (token-F1's recall; both directions together bound its precision
too). Options: the chat model as judge (``llm``; the local 1.5B model calls different answers the same too often to be
the default, notes/2026-11-sunar-hotpotqa.md) and any local Hugging Face NLI model directory (``nli:/path/to/model``).
"""

from __future__ import annotations

import re
import string
import threading
from abc import ABC, abstractmethod
from collections import Counter
from functools import lru_cache
from pathlib import Path

from agent.errors import ConfigError
from agent.llm.calls import LLMOptions, ask
from agent.llm.parsing import parse_yes_no
from agent.schemas import YesNo
from agent.text import iso_dates

_NUMBER_WORDS = {
    word: str(i)
    for i, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
     "hundred": "100", "thousand": "1000", "first": "1", "second": "2", "third": "3", "fourth": "4", "fifth": "5"}  # fmt: skip
_PUNCT = re.compile("[" + re.escape(string.punctuation.replace("-", "")) + "]|(?<!\\d)-|-(?!\\d)")
_ARTICLES = {"a", "an", "the"}


def normalize(answer: str) -> list[str]:
    """Tokens of an answer with case, punctuation, articles, dates (ISO) and numbers (digits) made canonical."""
    text = answer.lower()
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 → 1000
    text = iso_dates(text)
    text = re.sub(r"\b(\d+)(?:st|nd|rd|th)\b", r"\1", text)
    text = _PUNCT.sub(" ", text)
    return [_NUMBER_WORDS.get(token, token) for token in text.split() if token not in _ARTICLES]


def _numbers(tokens: list[str]) -> set[str]:
    return {token for token in tokens if any(ch.isdigit() for ch in token)}


def coverage(premise: list[str], hypothesis: list[str]) -> float:
    """Share of the hypothesis' tokens found in the premise (token-F1's recall)."""
    if not hypothesis:
        return 1.0 if not premise else 0.0
    common = sum((Counter(premise) & Counter(hypothesis)).values())
    return common / len(hypothesis)


class Equivalence(ABC):
    """Bidirectional entailment between two answers to ``question`` (Eq. 4); subclasses define ``entails``."""

    @abstractmethod
    def entails(self, question: str, premise: str, hypothesis: str) -> bool: ...

    def equivalent(self, question: str, a: str, b: str) -> bool:
        """Each entails the other. Without asking the judge: answers equal once normalised are equivalent, and answers
        that both hold numbers (dates included) but not the same ones are not (a small LLM judge calls 1996 and 1997
        the same answer)."""
        tokens_a, tokens_b = normalize(a), normalize(b)
        if tokens_a == tokens_b:
            return True
        numbers_a, numbers_b = _numbers(tokens_a), _numbers(tokens_b)
        if numbers_a and numbers_b and numbers_a != numbers_b:
            return False
        return self.entails(question, a, b) and self.entails(question, b, a)


class TokenEquivalence(Equivalence):
    """Lexical entailment over normalised tokens: fast, offline, no model (the default)."""

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold

    def entails(self, question: str, premise: str, hypothesis: str) -> bool:
        return coverage(normalize(premise), normalize(hypothesis)) >= self.threshold


class LLMEquivalence(Equivalence):
    """The chat model judges whether one answer implies the other (prompt ``sunar_entails``)."""

    def __init__(self, options: LLMOptions):
        self.options = LLMOptions(
            llm=options.llm, temperature=0.0, max_tokens=16, structured=options.structured, retries=1
        )

    def entails(self, question: str, premise: str, hypothesis: str) -> bool:
        reply = ask(
            "sunar_entails", self.options, parse=parse_yes_no, schema=YesNo, fallback=False,
            question=question, premise=premise, hypothesis=hypothesis,
        )  # fmt: skip
        return reply.value


class NLIEquivalence(Equivalence):
    """A local Hugging Face NLI model (e.g. DeBERTa-MNLI) on "question answer" pairs, as in Kuhn et al."""

    def __init__(self, model_dir: Path):
        if not (model_dir / "config.json").is_file():
            raise ConfigError(f"no Hugging Face model at {model_dir}: give nli:<directory with config.json>")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        self.model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), local_files_only=True).eval()
        labels = {i: label.lower() for i, label in self.model.config.id2label.items()}
        entailment = [i for i, label in labels.items() if label.startswith("entail")]
        if not entailment:
            raise ConfigError(f"the model at {model_dir} has no 'entailment' label (labels: {sorted(labels.values())})")
        self.entailment = entailment[0]
        self._lock = threading.Lock()

    def entails(self, question: str, premise: str, hypothesis: str) -> bool:
        import torch

        inputs = self.tokenizer(
            f"{question} {premise}", f"{question} {hypothesis}", return_tensors="pt", truncation=True
        )
        with self._lock, torch.no_grad():
            logits = self.model(**inputs).logits[0]
        return int(logits.argmax()) == self.entailment


@lru_cache(maxsize=4)
def _nli(path: str) -> NLIEquivalence:
    return NLIEquivalence(Path(path))


def get_equivalence(spec: str, options: LLMOptions) -> Equivalence:
    """``token`` (SUNAR's default) | ``llm`` | ``nli:/path/to/model``."""
    if spec == "token":
        return TokenEquivalence()
    if spec == "llm":
        return LLMEquivalence(options)
    if spec.startswith("nli:"):
        return _nli(str(Path(spec[4:]).expanduser()))
    raise ConfigError(f"unknown equivalence '{spec}': use token, llm or nli:/path/to/model")


def semantic_sets(question: str, answers: list[str], equivalence: Equivalence) -> list[list[str]]:
    """Cluster answers: each joins the first set whose representative it is equivalent to (Eq. 3), else opens one."""
    sets: list[list[str]] = []
    for answer in answers:
        for members in sets:
            if equivalence.equivalent(question, members[0], answer):
                members.append(answer)
                break
        else:
            sets.append([answer])
    return sets
