"""Per-question metrics of one run's result: the answer and retrieval metrics, and VerDICt's grounded counts."""

from __future__ import annotations

from agent.eval import metrics as m
from agent.eval.datasets import Example
from agent.schemas import RunResult
from agent.text import narrates


def score(example: Example, result: RunResult, reader: m.Reader | None = None) -> dict[str, float]:
    """Per-question metrics; retrieval ones score what the method retrieved (none for a method that retrieves nothing)."""
    retrieved = None if result.retrieved is None else [p.full_text for p in result.retrieved[:5]]
    if example.kind == "asqa":
        golds = example.short_answers
        scores = {"str_em": m.str_em(result.answer, golds), "rouge_l": m.rouge_l(result.answer, example.long_answers)}
        scores["narrates"] = float(narrates(result.answer, [p.full_text for p in result.passages]))
        if retrieved is not None:
            scores["mrecall@5"] = m.mrecall_at_k(retrieved, golds, 5)
            scores["coverage"] = m.answer_coverage(retrieved, golds)
        if reader is not None:
            pairs = [(p.question, p.short_answers) for p in example.qa_pairs]
            scores["disambig_f1"] = m.disambig_f1(result.answer, pairs, reader)
            scores["dr"] = m.dr_score(scores["disambig_f1"], scores["rouge_l"])
        return scores
    scores = {
        "em": m.best_over(m.exact_match, result.answer, example.answers),
        "f1": m.best_over(m.token_f1, result.answer, example.answers),
        "acc": m.answer_accuracy(result.answer, example.answers),
    }
    if result.retrieved is not None:
        scores["support_recall@10"] = m.support_recall([p.id for p in result.retrieved[:10]], example.supporting_ids)
    return scores


def grounded_metrics(
    example: Example, result: RunResult, judge: str, collection: str | None
) -> tuple[dict[str, int], dict[str, int]]:
    """The counts behind VerDICt's grounded and ungrounded metrics for one run, and the judge's usage.

    Each gold interpretation is grounded in the corpus passages its own question retrieves (top 5); Q̄ follows Eq. 22
    for each method and question: the grounded gold interpretations plus that method's verified predictions. The
    summary divides sums of these counts over questions (``agent.eval.stats``).
    """
    from agent.eval.grounded import evaluate_grounded, gold_evidence
    from agent.retrieval.collections import open_store
    from agent.schemas import QAPair

    gold = [QAPair(question=p.question, answer=" / ".join(p.short_answers)) for p in example.qa_pairs]
    evidence = gold_evidence(open_store(collection), gold)
    scores = evaluate_grounded(result.question, result.disambiguations, result.passages, gold, judge, evidence)
    usage = {
        "llm_calls": scores.usage.calls,
        "input_tokens": scores.usage.input_tokens,
        "output_tokens": scores.usage.output_tokens,
    }
    return scores.counts(), usage
