"""Grounded evaluation of interpretations (VerDICt §4.3, Appendix A) with an LLM judge (prompts I_V, I_M, I_D).

- V(q̂, p̂) (I_V, ``eval_verify``): does the passage support the answer to the question? A prediction without a
  supporting passage id is judged against all of the method's passages (the paper's proxy U_q).
- G-Precision (Eq. 11) = share of predictions with V(q̂, p̂) = Yes.
- Grounded gold set Q̄ (Eq. 22) = gold interpretations their evidence grounds, plus verified predictions that match
  no grounded gold one (counted after I_D deduplication). A grounded gold interpretation is recalled when a
  *verified* prediction matches it (I_M, ``eval_match``); the extra verified predictions are recalled by
  construction. G-Recall (Eq. 12) = recalled / |Q̄|; G-F1 = their harmonic mean.
- Ungrounded precision (Eq. 14) = share of predictions that match a gold interpretation; ungrounded recall (Eq. 18) =
  share of gold interpretations that any prediction matches (both I_M).
- ``counts()``: the per-question counts the harness sums over questions (corpus-level metrics, no question dropped).
- ``distinct``: predictions left after I_D (``eval_dedup``) removes near-duplicates (|Q̂| and Sufficient%).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from agent.llm.calls import LLMOptions, Reply, ask, run_concurrently
from agent.llm.factory import model_name
from agent.llm.parsing import parse_decisions, parse_numbered_list, parse_yes_no
from agent.retrieval.store import Store
from agent.schemas import Decisions, Disambiguation, NodeUsage, Passage, QAPair, YesNo
from agent.text import passage_text, render_passages


class GroundedScores(BaseModel):
    predictions: int = Field(description="|Q̂|: interpretations the method returned")
    distinct: int = Field(description="interpretations left after I_D deduplication")
    verified: list[bool] = Field(description="V(q̂, p̂) per prediction")
    gold_grounded: list[bool] = Field(description="V(q̃, evidence) per gold interpretation")
    gold_recalled: list[bool] = Field(description="per gold interpretation: matched by any prediction (ungrounded)")
    prediction_matched: list[bool] = Field(description="per prediction: matches a gold interpretation (ungrounded)")
    grounded_gold_recalled: list[bool] = Field(
        description="per grounded gold interpretation: matched by a verified one"
    )
    extra_grounded: int = Field(description="distinct verified predictions that match no grounded gold one")
    recall: float | None = Field(description="ungrounded recall, Eq. 18; None without gold")
    precision: float | None = Field(description="ungrounded precision, Eq. 14; None without predictions")
    g_precision: float | None = Field(description="Eq. 11; None without predictions")
    g_recall: float | None = Field(description="Eq. 12 over Q̄; None when Q̄ is empty")
    g_f1: float | None
    judge_failures: int = Field(default=0, description="judge replies that stayed unusable (counted as No)")
    usage: NodeUsage = Field(default_factory=NodeUsage, description="the judge's calls and tokens")

    def counts(self) -> dict[str, int]:
        """Numerators and denominators of every grounded metric, to be summed over questions."""
        return {
            "predictions": self.predictions,
            "verified": sum(self.verified),
            "matched": sum(self.prediction_matched),
            "gold": len(self.gold_recalled),
            "gold_recalled": sum(self.gold_recalled),
            "grounded_pool": sum(self.gold_grounded) + self.extra_grounded,  # |Q̄|
            "grounded_recalled": sum(self.grounded_gold_recalled) + self.extra_grounded,
            "distinct": self.distinct,
        }


def judge_options(judge: str | None = None, max_tokens: int = 200, retries: int = 2) -> LLMOptions:
    """Options for the judge (a provider name), greedy decoding."""
    return LLMOptions(llm=judge or None, temperature=0.0, max_tokens=max_tokens, structured=True, retries=retries)


def gold_pairs(row: dict) -> list[QAPair]:
    """An ASQA row's gold interpretations; the answer lists every accepted short answer."""
    return [QAPair(question=p["question"], answer=" / ".join(p["short_answers"])) for p in row["qa_pairs"]]


def gold_evidence(store: Store, gold: Sequence[QAPair], k: int = 5) -> list[list[Passage]]:
    """Top-k corpus passages for each gold question (one batched search): the corpus proxy that grounds Q̃."""
    return store.search_many([g.question for g in gold], k)


def verify(question: str, answer: str, passages: Sequence[Passage], options: LLMOptions) -> Reply[bool]:
    """V(q, p) with I_V; an unusable reply counts as No."""
    return ask(
        "eval_verify",
        options,
        parse=parse_yes_no,
        schema=YesNo,
        fallback=False,
        question=question,
        answer=answer,
        passage=render_passages(list(passages)) if len(passages) > 1 else passage_text(passages[0]),
    )


def match(question: str, generated: Sequence[str], reference: Sequence[str], options: LLMOptions) -> Reply[list[bool]]:
    """I_M: for each reference question, whether a generated one covers it (one call for the whole list)."""
    if not generated or not reference:
        return Reply([False] * len(reference), "")
    return ask(
        "eval_match",
        options,
        parse=lambda text: parse_decisions(text, len(reference)),
        schema=Decisions,
        fallback=[False] * len(reference),
        question=question,
        generated="\n".join(f"- {q}" for q in generated),
        reference="\n".join(f"{i}. {q}" for i, q in enumerate(reference, 1)),
    )


def distinct(question: str, questions: Sequence[str], options: LLMOptions) -> Reply[int]:
    """I_D: how many of ``questions`` remain after near-duplicates are removed (never more than given)."""
    if len(questions) < 2:
        return Reply(len(questions), "")
    reply = ask(
        "eval_dedup",
        options,
        parse=parse_numbered_list,
        fallback=list(questions),
        question=question,
        questions="\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1)),
    )
    return reply.with_value(min(len(reply.value), len(questions)))


def _ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def evaluate_grounded(
    question: str,
    predictions: Sequence[Disambiguation],
    passages: Sequence[Passage],
    gold: Sequence[QAPair],
    judge: str | BaseChatModel | None = None,
    evidence: Sequence[Sequence[Passage]] | None = None,
    max_concurrency: int = 4,
) -> GroundedScores:
    """Score one question's predicted interpretations; ``evidence[j]`` grounds gold j (default: ``passages``)."""
    with model_name(judge) as name:
        return _score(question, predictions, passages, gold, judge_options(name), evidence, max_concurrency)


def _score(
    question: str,
    predictions: Sequence[Disambiguation],
    passages: Sequence[Passage],
    gold: Sequence[QAPair],
    options: LLMOptions,
    evidence: Sequence[Sequence[Passage]] | None,
    max_concurrency: int,
) -> GroundedScores:
    """The judge's verdicts, matches and deduplications for one question, and the scores they give."""
    by_id = {p.id: p for p in passages}
    jobs = [(d.question, d.answer, _grounding(d, by_id, passages)) for d in predictions]
    jobs += [(g.question, g.answer, list(evidence[j]) if evidence else list(passages)) for j, g in enumerate(gold)]
    verdicts = run_concurrently(
        lambda job: verify(*job, options) if job[2] else Reply(False, "", parsed=False), jobs, max_concurrency
    )  # V for each prediction, then for each gold interpretation against its evidence
    verified = [r.value for r in verdicts[: len(predictions)]]
    grounded = [r.value for r in verdicts[len(predictions) :]]

    asked = [d.question for d in predictions]
    kept = [q for q, ok in zip(asked, verified) if ok]
    grounded_gold = [g.question for g, ok in zip(gold, grounded) if ok]
    ungrounded = match(question, asked, [g.question for g in gold], options)  # Eq. 17
    matched = match(question, [g.question for g in gold], asked, options)  # Eq. 14: which predictions a gold covers
    covered = match(question, kept, grounded_gold, options)
    known = match(question, grounded_gold, kept, options)  # which verified predictions a grounded gold one covers
    extra = distinct(question, [q for q, hit in zip(kept, known.value) if not hit], options)  # Eq. 22's additions
    unique = distinct(question, asked, options)
    replies: list[Reply[Any]] = [*verdicts, ungrounded, matched, covered, known, extra, unique]

    g_precision = _ratio(sum(verified), len(predictions))
    g_recall = _ratio(sum(covered.value) + extra.value, len(grounded_gold) + extra.value)
    return GroundedScores(
        predictions=len(predictions),
        distinct=unique.value,
        verified=verified,
        gold_grounded=grounded,
        gold_recalled=ungrounded.value,
        prediction_matched=matched.value,
        grounded_gold_recalled=covered.value,
        extra_grounded=extra.value,
        recall=_ratio(sum(ungrounded.value), len(gold)),
        precision=_ratio(sum(matched.value), len(predictions)),
        g_precision=g_precision,
        g_recall=g_recall,
        g_f1=_f1(g_precision, g_recall),
        judge_failures=sum(not r.parsed for r in replies if r.text or r.usage.calls),
        usage=sum((r.usage for r in replies), NodeUsage()),
    )


def _grounding(d: Disambiguation, by_id: dict[str, Passage], passages: Sequence[Passage]) -> list[Passage]:
    """p̂, the first passage the prediction cites, or U_q for one without a passage (Eq. 19 note)."""
    cited = [by_id[i] for i in d.passage_ids if i in by_id]
    return cited[:1] or list(passages)


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0
