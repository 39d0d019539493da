"""Per-question metrics of one run's result: the answer and retrieval metrics, and VerDICt's grounded counts."""

from __future__ import annotations

from agent.eval import metrics as m
from agent.eval.datasets import Example
from agent.llm.parsing import sentences
from agent.schemas import RunResult
from agent.steps.checks import narrates
from agent.text import COPY_LIMIT, longest_copied_run, without_citations


def score(example: Example, result: RunResult, reader: m.Reader | None = None) -> dict[str, float]:
    """Per-question metrics; retrieval ones score what the method retrieved (none for a method that retrieves nothing).
    Answers are scored without their citation marks (``agent.text.without_citations``, as ALCE scores)."""
    if example.kind == "ramdocs":
        return conflict_scores(example, result)
    retrieved = None if result.retrieved is None else [p.full_text for p in result.retrieved[:5]]
    answer = without_citations(result.answer)
    if example.kind == "asqa":
        golds = example.short_answers
        scores = {"str_em": m.str_em(answer, golds), "rouge_l": m.rouge_l(answer, example.long_answers)}
        scores |= source_scores(result)
        if retrieved is not None:
            scores["mrecall@5"] = m.mrecall_at_k(retrieved, golds, 5)
            scores["coverage"] = m.answer_coverage(retrieved, golds)
        if reader is not None:
            pairs = [(p.question, p.short_answers) for p in example.qa_pairs]
            scores["disambig_f1"] = m.disambig_f1(answer, pairs, reader)
            scores["dr"] = m.dr_score(scores["disambig_f1"], scores["rouge_l"])
        return scores
    scores = {
        "em": m.best_over(m.exact_match, answer, example.answers),
        "f1": m.best_over(m.hotpot_f1, answer, example.answers),
        "cover_em": m.cover_em(answer, example.answers),
        "acc_substring": m.answer_accuracy(answer, example.answers),
    }
    if result.retrieved is not None:  # the same k for every method; @10 only where the method retrieved 10
        ids = [p.id for p in result.retrieved]
        scores["support_recall@5"] = m.support_recall(ids[:5], example.supporting_ids)
        if len(ids) >= 10:
            scores["support_recall@10"] = m.support_recall(ids[:10], example.supporting_ids)
    return scores


def conflict_scores(example: Example, result: RunResult) -> dict[str, float]:
    """RAMDocs: exact match on what the answer states and on its whole text, gold recall, whether the answer narrates
    its sources or copies a passage (as for ASQA), whether a wrong answer is stated (questions with one that is not also gold), and for
    methods that reject passages, their precision and recall against the misinformation and noise labels."""
    stated = stated_answers(result)
    golds, wrongs = example.gold_answers, example.wrong_answers
    scores = {
        "em": m.conflict_em(stated, golds, wrongs),
        "em_text": m.conflict_em(without_citations(result.answer), golds, wrongs),
        "gold_recall": m.gold_recall(stated, golds),
        **source_scores(result),
    }
    if m.real_wrongs(golds, wrongs):
        scores["misinfo_stated"] = m.states_wrong(stated, golds, wrongs)
    rejected = rejected_ids(result)
    if rejected is not None:
        bad = {example.document_id(i) for i, d in enumerate(example.documents) if d.type != "correct"}
        scores |= m.rejection_scores(rejected, bad)
    return scores


def source_scores(result: RunResult) -> dict[str, float]:
    """Whether the answer talks about its sources (a sentence the answer step's ``narrates`` check flags) and whether
    it copies ``COPY_LIMIT`` or more consecutive words of a passage it read (measured, never rewritten)."""
    return {
        "narrates": float(any(narrates(s) for s in sentences(result.answer))),
        "copies": float(longest_copied_run(result.answer, [p.full_text for p in result.passages]) >= COPY_LIMIT),
    }


def stated_answers(result: RunResult) -> str:
    """The answers a result states: MADAM's aggregated list, else the sentences of the answer that assert."""
    if "answers" in result.extra:
        return "; ".join(a.answer for a in result.extra["answers"])
    return m.asserted_text(without_citations(result.answer))


def rejected_ids(result: RunResult) -> set[str] | None:
    """The passages a method judged unreliable: MADAM's rejected documents, the conflict step's dropped passages, or
    the passages VerDICt's execute abstained on; None for a method that grades none."""
    if "rejected_ids" in result.extra:
        return set(result.extra["rejected_ids"])
    if "conflicts" in result.extra:
        return {i for c in result.extra["conflicts"] for i in c.dropped_ids}
    if "candidates" in result.extra and result.retrieved is not None:
        cited = {i for c in result.extra["candidates"] for i in c.passage_ids}
        return {p.id for p in result.retrieved} - cited
    return None


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
