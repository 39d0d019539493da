"""Summary statistics of eval rows: each metric as the papers aggregate it, with 95% bootstrap intervals over questions.

A metric is one of
- a **mean** of a per-question value (``row["metrics"][name]``: STR-EM, ROUGE-L, MRecall@5, ...);
- a **ratio** of sums of per-question counts (``row["grounded"]``: VerDICt's G-Precision = Σ verified / Σ predictions,
  so a question with no predictions adds nothing to precision and its gold interpretations still count for recall);
- an **F1** of two ratios (G-F1 from corpus G-Precision and G-Recall).

Intervals are percentile bootstraps: questions are resampled with replacement and every metric recomputed the way it
is aggregated. A paired difference resamples the questions both methods answered, the same draw for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

RATIOS = {
    "g_precision": ("verified", "predictions"),  # Eq. 11 / 19
    "g_recall": ("grounded_recalled", "grounded_pool"),  # Eq. 12 over Q̄ (Eq. 22)
    "precision": ("matched", "predictions"),  # Eq. 14, ungrounded
    "interp_recall": ("gold_recalled", "gold"),  # Eq. 18, ungrounded
}
F1S = {"g_f1": ("g_precision", "g_recall")}
SUFFICIENT_AT = 5  # Sufficient%: questions with at least 5 distinct interpretations (the official code's largest k)

Columns = dict[str, np.ndarray]


def columns(rows: Sequence[dict[str, Any]]) -> Columns:
    """Per-question values as arrays (NaN where a row lacks one): ``metrics`` by name, ``grounded`` counts prefixed."""
    keys = {k for r in rows for k in r.get("metrics", {})}
    out = {k: np.array([r["metrics"].get(k, np.nan) for r in rows], dtype=float) for k in keys}
    counts = {k for r in rows for k in r.get("grounded", {})}
    out |= {f"#{k}": np.array([r.get("grounded", {}).get(k, np.nan) for r in rows], dtype=float) for k in counts}
    if "#distinct" in out:
        out["sufficient"] = np.where(np.isnan(out["#distinct"]), np.nan, out["#distinct"] >= SUFFICIENT_AT)
    return out


def metric_names(cols: Columns) -> list[str]:
    names = [k for k in cols if not k.startswith("#")]
    names += [m for m, (num, den) in RATIOS.items() if f"#{num}" in cols and f"#{den}" in cols]
    names += [m for m, (p, r) in F1S.items() if p in names and r in names]
    return names


def aggregate(cols: Columns, index: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric over the questions ``index`` picks; a 2-D index gives one value per row (a bootstrap draw)."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in metric_names(cols):
            if name in RATIOS:
                num, den = RATIOS[name]
                a, b = cols[f"#{num}"][index], cols[f"#{den}"][index]
                out[name] = np.nansum(a, axis=-1) / np.nansum(b, axis=-1)
            elif name in F1S:
                p, r = (out[m] for m in F1S[name])
                out[name] = np.where(p + r > 0, 2 * p * r / (p + r), np.where(np.isnan(p + r), np.nan, 0.0))
            else:
                values = cols[name][index]
                present = (~np.isnan(values)).sum(axis=-1)
                out[name] = np.where(present > 0, np.nansum(values, axis=-1) / np.maximum(present, 1), np.nan)
    return out


def _draws(n: int, samples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


def _value(x: float | np.ndarray) -> float | None:
    return None if np.isnan(x) else round(float(x), 4)


def _interval(values: np.ndarray) -> list[float] | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def summarize_metrics(
    rows: Sequence[dict[str, Any]], samples: int = 1000, seed: int = 0
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(metric → value, metric → 95% interval) over ``rows``, one per question; undefined metrics are left out."""
    if not rows:
        return {}, {}
    cols = columns(rows)
    point = aggregate(cols, np.arange(len(rows)))
    boot = aggregate(cols, _draws(len(rows), samples, seed))
    metrics = {k: v for k, v in ((k, _value(point[k])) for k in point) if v is not None}
    ci95 = {k: ci for k in metrics if (ci := _interval(boot[k])) is not None}
    return metrics, ci95


def paired_difference(
    rows: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], samples: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """metric → {diff, ci95, questions} of ``rows`` minus ``baseline`` on the questions both answered (paired draws)."""
    base = {r["id"]: r for r in baseline}
    ours = [r for r in rows if r["id"] in base]
    if not ours:
        return {}
    theirs = [base[r["id"]] for r in ours]
    a, b = columns(ours), columns(theirs)
    everything, draws = np.arange(len(ours)), _draws(len(ours), samples, seed)
    point_a, point_b = aggregate(a, everything), aggregate(b, everything)
    boot_a, boot_b = aggregate(a, draws), aggregate(b, draws)
    out = {}
    for name in point_a.keys() & point_b.keys():
        diff = _value(point_a[name] - point_b[name])
        if diff is not None:
            out[name] = {"diff": diff, "ci95": _interval(boot_a[name] - boot_b[name]), "questions": len(ours)}
    return out


def excludes_zero(ci95: list[float] | None) -> bool:
    return ci95 is not None and (ci95[0] > 0 or ci95[1] < 0)
