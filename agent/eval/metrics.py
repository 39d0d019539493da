"""Evaluation metrics for ASQA (STR-EM, ROUGE-L, Disambig-F1, DR, MRecall@k) and HotpotQA (EM, F1, support recall).

Definitions follow ALCE (STR-EM: share of gold disambiguations whose short answer appears in the response),
ASQA (ROUGE-L against the best long answer; Disambig-F1 from an extractive QA reader; DR = sqrt(D-F1 × ROUGE-L)),
ToC/DIVA (MRecall@k) and SQuAD/HotpotQA (token F1).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from agent.llm.parsing import sentences
from agent.text import normalize_answer, spelled_dates

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer

Reader = Callable[[str, str], str]  # (question, context) → extracted answer span


def _present(answer: str, text: str) -> bool:
    needle = normalize_answer(answer)
    return bool(needle) and needle in normalize_answer(text)


def str_em(response: str, short_answers: Sequence[Sequence[str]]) -> float:
    """Share of gold disambiguations (each a list of acceptable short answers) found in the response."""
    if not short_answers:
        return 0.0
    return sum(any(_present(a, response) for a in answers) for answers in short_answers) / len(short_answers)


@lru_cache(maxsize=1)
def _rouge() -> RougeScorer:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)


def _sentences(text: str) -> str:
    """rougeLsum splits summaries on newlines: one sentence per line."""
    return "\n".join(s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s)


def rouge_l(response: str, long_answers: Sequence[str]) -> float:
    """ROUGE-Lsum F-measure (stemmed) against the best-matching reference."""
    if not long_answers or not response.strip():
        return 0.0
    prediction = _sentences(response)
    return max(_rouge().score(_sentences(ref), prediction)["rougeLsum"].fmeasure for ref in long_answers)


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def disambig_f1(response: str, qa_pairs: Sequence[tuple[str, Sequence[str]]], reader: Reader) -> float:
    """ASQA's D-F1: the reader answers each gold disambiguated question from the response; mean best token F1."""
    if not qa_pairs:
        return 0.0
    scores = []
    for question, answers in qa_pairs:
        predicted = reader(question, response)
        scores.append(max((token_f1(predicted, a) for a in answers), default=0.0))
    return sum(scores) / len(scores)


def dr_score(d_f1: float, rouge: float) -> float:
    return math.sqrt(max(d_f1, 0.0) * max(rouge, 0.0))


def answer_coverage(passages_text: Sequence[str], short_answers: Sequence[Sequence[str]]) -> float:
    """Share of gold disambiguations with an acceptable answer in any passage."""
    if not short_answers:
        return 0.0
    blob = " ".join(passages_text)
    return sum(any(_present(a, blob) for a in answers) for answers in short_answers) / len(short_answers)


def mrecall_at_k(passages_text: Sequence[str], short_answers: Sequence[Sequence[str]], k: int = 5) -> float:
    """1 if the top-k passages hold the answers of all gold disambiguations (of at least k when there are more)."""
    if not short_answers:
        return 0.0
    blob = " ".join(passages_text[:k])
    found = sum(any(_present(a, blob) for a in answers) for answers in short_answers)
    return float(found >= min(k, len(short_answers)))


def best_over(metric: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    return max((metric(prediction, g) for g in golds), default=0.0)


def answer_accuracy(response: str, golds: Sequence[str]) -> float:
    """1 if any gold answer appears in the response as a substring, inside words too ("no" in "unknown"): kept, and
    reported as ``acc_substring``, beside ``cover_em``."""
    return float(any(_present(g, response) for g in golds))


def cover_em(response: str, golds: Sequence[str]) -> float:
    """1 if any gold answer appears in the response as whole words once both are normalised."""
    text = f" {normalize_answer(response)} "
    return float(any(needle.strip() and f" {needle} " in text for needle in map(normalize_answer, golds)))


YES_NO = {"yes", "no", "noanswer"}


def hotpot_f1(prediction: str, gold: str) -> float:
    """HotpotQA's F1: token F1, except that a yes/no answer on either side scores only when both are the same."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in YES_NO or ref in YES_NO) and pred != ref:
        return 0.0
    return token_f1(prediction, gold)


def support_recall(passage_ids: Sequence[str], supporting_ids: Sequence[str]) -> float:
    if not supporting_ids:
        return 0.0
    return len(set(passage_ids) & set(supporting_ids)) / len(set(supporting_ids))


def hf_reader(model_dir: str, max_answer_tokens: int = 30) -> Reader:
    """An extractive QA reader from a local Hugging Face model directory (e.g. a RoBERTa SQuAD model): the best span
    of the context (start and end logits summed) over windows of 384 tokens, 128 overlapping. Transformers 5 dropped
    the ``question-answering`` pipeline, so the span search is ours."""
    from pathlib import Path

    from agent.errors import ConfigError

    if not (Path(model_dir) / "config.json").is_file():
        raise ConfigError(f"QA reader directory {model_dir} has no config.json: give a local extractive QA model")
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir).eval()

    def read(question: str, context: str) -> str:
        if not context.strip():
            return ""
        windows = tokenizer(
            question, context, truncation="only_second", max_length=384, stride=128,
            return_overflowing_tokens=True, return_offsets_mapping=True, padding=True, return_tensors="pt",
        )  # fmt: skip
        offsets = windows.pop("offset_mapping").tolist()
        windows.pop("overflow_to_sample_mapping", None)
        with torch.no_grad():
            out = model(**windows)
        best, span = float("-inf"), (0, 0)
        for w, (starts, ends) in enumerate(zip(out.start_logits.tolist(), out.end_logits.tolist())):
            part = windows.sequence_ids(w)  # 1: a token of the context
            for i in (k for k, of in enumerate(part) if of == 1):
                for j in range(i, min(i + max_answer_tokens, len(part))):
                    if part[j] != 1:
                        break
                    if starts[i] + ends[j] > best:
                        best, span = starts[i] + ends[j], (offsets[w][i][0], offsets[w][j][1])
        return context[span[0] : span[1]]

    return read


REJECTING = re.compile(
    r"\b(?:incorrect|wrong|false|erroneous|misinformation|mistaken|inaccurate|outdated|unreliable|disputed|"
    r"contradict\w*|claim\w*|rather than|instead of|not (?:correct|accurate|true|supported|reliable))\b",
    re.IGNORECASE,
)


def asserted_text(answer: str) -> str:
    """What an answer asserts: its sentences without those that reject or merely report a claim ("Agent 3 says 1998,
    which is wrong"), so naming a rejected answer does not count as stating it."""
    return " ".join(s for s in sentences(answer) if not REJECTING.search(s))


def conflict_em(text: str, golds: Sequence[str], wrongs: Sequence[str]) -> float:
    """RAMDocs' exact match: every gold answer present and no wrong answer stated (``states_wrong``); dates match in
    either order (``agent.text.spelled_dates``)."""
    return float(
        all(_present(spelled_dates(g), spelled_dates(text)) for g in golds) and not states_wrong(text, golds, wrongs)
    )


def real_wrongs(golds: Sequence[str], wrongs: Sequence[str]) -> list[str]:
    """The wrong answers that are not also gold ones: RAMDocs lists some valid answers among the wrong ones too
    (``ramdocs-203``: 1860 is gold and wrong), and stating a gold answer is not misinformation."""
    gold = {normalize_answer(spelled_dates(g)) for g in golds}
    return [w for w in wrongs if (said := normalize_answer(spelled_dates(w))) and said not in gold]


def states_wrong(text: str, golds: Sequence[str], wrongs: Sequence[str]) -> float:
    """1 if a real wrong answer is present outside the gold answers that contain it ("football" is not stated by
    "American football" when that is gold); dates match in either order (``agent.text.spelled_dates``)."""
    normalised = normalize_answer(spelled_dates(text))
    gold = [normalize_answer(spelled_dates(g)) for g in golds]
    for wrong in (normalize_answer(spelled_dates(w)) for w in real_wrongs(golds, wrongs)):
        rest = normalised
        for container in sorted((g for g in gold if wrong in g), key=len, reverse=True):
            rest = rest.replace(container, "|")
        if wrong in rest:
            return 1.0
    return 0.0


def gold_recall(text: str, golds: Sequence[str]) -> float:
    """Share of the gold answers present in ``text``, dates in either order (``agent.text.spelled_dates``)."""
    return sum(_present(spelled_dates(g), spelled_dates(text)) for g in golds) / len(golds) if golds else 0.0


def rejection_scores(rejected: set[str], bad: set[str]) -> dict[str, float]:
    """Precision and recall of the passages a method rejected against the ones labelled misinformation or noise;
    each left out where it is undefined (nothing rejected, nothing bad)."""
    scores = {}
    if rejected:
        scores["reject_precision"] = len(rejected & bad) / len(rejected)
    if bad:
        scores["reject_recall"] = len(rejected & bad) / len(bad)
    return scores
