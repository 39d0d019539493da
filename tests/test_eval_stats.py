"""Summary statistics with hand-computed expectations: means, corpus-level ratios, bootstrap and paired intervals."""

import pytest

from agent.eval.stats import excludes_zero, paired_difference, summarize_metrics


def row(qid, metrics=None, **grounded):
    r = {"id": qid, "metrics": metrics or {}}
    if grounded:
        r["grounded"] = grounded
    return r


def counts(predictions, verified, pool, recalled, distinct=0, matched=0, gold=2, gold_recalled=0):
    return {
        "predictions": predictions, "verified": verified, "matched": matched, "gold": gold,
        "gold_recalled": gold_recalled, "grounded_pool": pool, "grounded_recalled": recalled, "distinct": distinct,
    }  # fmt: skip


ROWS = [
    row("a", {"str_em": 1.0}, **counts(3, 3, 4, 3, distinct=5, matched=2, gold=3, gold_recalled=2)),
    row("b", {"str_em": 0.0}, **counts(0, 0, 2, 0, distinct=0, gold=2)),  # predicts nothing
    row("c", {"str_em": 0.5}, **counts(1, 0, 2, 1, distinct=1, matched=1, gold=3, gold_recalled=1)),
]


def test_grounded_metrics_come_from_counts_summed_over_every_question():
    metrics, _ = summarize_metrics(ROWS)
    assert metrics["str_em"] == 0.5
    assert metrics["g_precision"] == 0.75  # 3 / 4; a per-question mean dropping "b" would give (1 + 0) / 2
    assert metrics["g_recall"] == 0.5  # (3 + 0 + 1) / (4 + 2 + 2): "b" counts with recall 0
    assert metrics["g_f1"] == pytest.approx(0.6)  # 2 · 0.75 · 0.5 / 1.25
    assert metrics["precision"] == 0.75  # ungrounded, Eq. 14: 3 / 4
    assert metrics["interp_recall"] == 0.375  # 3 / 8
    assert metrics["sufficient"] == pytest.approx(0.3333, abs=1e-4)  # one question of three has ≥ 5 distinct


def test_a_method_that_never_predicts_has_recall_zero_and_no_precision():
    metrics, _ = summarize_metrics([ROWS[1]])
    assert metrics["g_recall"] == 0.0 and "g_precision" not in metrics and "g_f1" not in metrics


def test_intervals_hold_the_estimate_and_are_reproducible():
    rows = [row(str(i), {"str_em": float(i % 3 == 0)}) for i in range(30)]
    metrics, ci = summarize_metrics(rows)
    assert ci["str_em"][0] < metrics["str_em"] < ci["str_em"][1]
    assert 0.15 < ci["str_em"][1] - ci["str_em"][0] < 0.5  # 30 questions: wide, as it should be
    assert summarize_metrics(rows) == (metrics, ci)


def test_a_constant_metric_has_a_zero_width_interval():
    _, ci = summarize_metrics([row(str(i), {"rouge_l": 0.4}) for i in range(10)])
    assert ci["rouge_l"] == [0.4, 0.4]


def test_paired_difference_uses_the_shared_questions_and_the_same_draws():
    base = [row(str(i), {"str_em": i / 20}) for i in range(20)]
    better = [row(str(i), {"str_em": i / 20 + 0.1}) for i in range(20)] + [row("extra", {"str_em": 1.0})]
    diff = paired_difference(better, base)["str_em"]
    assert diff["diff"] == 0.1 and diff["questions"] == 20  # "extra" has no baseline row
    assert diff["ci95"] == [pytest.approx(0.1), pytest.approx(0.1)] and excludes_zero(diff["ci95"])


def test_noise_gives_an_interval_around_zero():
    base = [row(str(i), {"str_em": float(i % 2)}) for i in range(30)]
    other = [row(str(i), {"str_em": float((i // 2) % 2)}) for i in range(30)]
    diff = paired_difference(other, base)["str_em"]
    assert diff["ci95"][0] < 0 < diff["ci95"][1] and not excludes_zero(diff["ci95"])
