"""The summary of an eval's results file and its reports: ``summary.json``, ``summary.md`` and ``quality_vs_time.png``.

Metrics are aggregated the way the papers aggregate them, with 95% bootstrap intervals and paired differences to a
baseline (``agent.eval.stats``); costs are means per question, per method and per node.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from agent.eval.provenance import Provenance, row_key
from agent.eval.resume import read_rows
from agent.eval.stats import excludes_zero, paired_difference, summarize_metrics

METRIC_ORDER = ["str_em", "rouge_l", "disambig_f1", "dr", "mrecall@5", "coverage", "precision", "interp_recall",
                "sufficient", "g_precision", "g_recall", "g_f1", "em", "em_text", "f1", "cover_em", "acc_substring",
                "gold_recall", "misinfo_stated", "reject_precision", "reject_recall", "support_recall@5",
                "support_recall@10", "narrates", "copies"]  # fmt: skip


def summarize(
    results_path: Path,
    methods: list[str],
    keys: dict[str, str] | None = None,
    baseline: str | None = None,
    made_with: dict[str, Provenance] | None = None,
    method_options: dict[str, dict[str, Any]] | None = None,
    samples: int = 1000,
) -> dict[str, Any]:
    """Per method: questions, metrics with 95% intervals, the paired difference to ``baseline``, costs, provenance.

    Only rows made with ``keys[method]`` count (all rows when ``keys`` is None).
    """
    rows = read_rows(results_path)
    current = {
        method: [r for r in rows if r["method"] == method and (keys is None or row_key(r) == keys.get(method))]
        for method in methods
    }
    ok = {method: [r for r in current[method] if "error" not in r] for method in methods}
    summary: dict[str, Any] = {}
    for method in methods:
        if not ok[method]:
            continue
        entry = _entry(ok[method], current[method], samples)
        if baseline and method != baseline and ok.get(baseline):
            entry["vs_baseline"] = {"baseline": baseline, **paired_difference(ok[method], ok[baseline], samples)}
        entry |= _costs(ok[method])
        if method_options and method_options.get(method):
            entry["options"] = method_options[method]
        if made_with:
            entry["provenance"] = {"key": made_with[method].key, **made_with[method].model_dump(exclude={"commit"})}
            entry["provenance"]["commits"] = sorted({r["provenance"].get("commit") or "unknown" for r in ok[method]})
        summary[method] = entry
    return summary


def _entry(finished: list[dict[str, Any]], current: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """Questions answered, questions that only failed, and the metrics with their intervals."""
    failed = len({r["id"] for r in current if "error" in r} - {r["id"] for r in finished})
    metrics, ci95 = summarize_metrics(finished, samples)
    return {"questions": len(finished), "failed": failed, "metrics": metrics, "ci95": ci95}


def _costs(finished: list[dict[str, Any]]) -> dict[str, Any]:
    """Cost per question overall and by node, and the method's own figures per question."""
    return {
        "cost_per_question": {
            k: _mean([r["cost"][k] for r in finished if k in r["cost"]]) for k in finished[0]["cost"]
        },
        "cost_by_node": _cost_by_node(finished),
        "details_per_question": {
            "interpretations": _mean([len(r["disambiguations"]) for r in finished]),
            **_mean_details(finished),
        },
        "details_distribution": _distributions(finished),
    }


def _mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def _cost_by_node(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean per question of each node's calls, tokens and seconds (a node a run skipped counts 0 for it)."""
    nodes = dict.fromkeys(node for r in rows for node in r.get("cost_by_node", {}))
    fields = ("calls", "input_tokens", "cached_tokens", "output_tokens", "seconds")
    means = {
        node: {
            f: round(sum(r.get("cost_by_node", {}).get(node, {}).get(f, 0) for r in rows) / len(rows), 3)
            for f in fields
        }
        for node in nodes
    }
    for mean in means.values():
        mean["prefilled_tokens"] = round(mean["input_tokens"] - mean.pop("cached_tokens"), 3)
    return means


def _mean_details(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = {
        k
        for r in rows
        for k, v in r.get("details", {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    return {
        k: round(statistics.fmean(r["details"][k] for r in rows if k in r.get("details", {})), 4) for k in sorted(keys)
    }


def _distributions(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """How often each value occurs in the list-valued details over all rows (e.g. ``hops.semantic_sets``: how many
    NAR batches had 1, 2, ... semantic sets)."""
    counts: dict[str, Counter[int | float]] = {}
    for r in rows:
        for k, v in r.get("details", {}).items():
            if isinstance(v, list):
                counts.setdefault(k, Counter()).update(v)
    return {k: {f"{value:g}": c[value] for value in sorted(c)} for k, c in sorted(counts.items())}


def write_reports(summary: dict[str, Any], out: Path) -> None:
    """``summary.json``, ``summary.md`` (quality, differences, cost, details, provenance) and the plot in ``out``."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if not summary:
        (out / "summary.md").write_text("No finished runs yet.\n")
        return
    metric_keys = _keys(s["metrics"] for s in summary.values())
    lines = _quality_table(summary, metric_keys) + _difference_table(summary, metric_keys) + _cost_tables(summary)
    detailed = {method: s["details_per_question"] for method, s in summary.items() if s.get("details_per_question")}
    if detailed:
        lines += ["", "## Method details (mean per question)", ""]
        lines += [f"- **{method}**: " + ", ".join(f"{k} {v:g}" for k, v in d.items()) for method, d in detailed.items()]
    spread = {method: s["details_distribution"] for method, s in summary.items() if s.get("details_distribution")}
    if spread:
        lines += ["", "## Method details (how often each value occurs)", ""]
        lines += [
            f"- **{method}** {key}: " + ", ".join(f"{value}: {n}" for value, n in counts.items())
            for method, d in spread.items()
            for key, counts in d.items()
        ]
    lines += _provenance_lines(summary)
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(summary, out / "quality_vs_time.png")


def _keys(dicts: Any) -> list[str]:
    """Every metric of ``dicts`` in table order (a metric is missing where it is undefined, e.g. G-Precision without
    predictions)."""
    seen = dict.fromkeys(k for d in dicts for k in d)
    return sorted(seen, key=lambda k: METRIC_ORDER.index(k) if k in METRIC_ORDER else len(METRIC_ORDER))


def _label(method: str, s: dict[str, Any]) -> str:
    if s.get("options"):
        return f"{method} ({', '.join(f'{k}={json.dumps(v)}' for k, v in s['options'].items())})"
    return method


def _cell(value: float | None, ci: list[float] | None, sign: bool = False) -> str:
    if value is None:
        return "–"
    text = f"{value:+.3f}" if sign else f"{value:.3f}"
    return f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else text


def _header(metric_keys: list[str]) -> list[str]:
    return ["| method | n | " + " | ".join(metric_keys) + " |", "|---" * (len(metric_keys) + 2) + "|"]


def _quality_table(summary: dict[str, Any], metric_keys: list[str]) -> list[str]:
    lines = [
        "## Quality [95% bootstrap interval over questions]",
        "",
        "Means per question; precision / interp_recall (ungrounded) and G-Precision / G-Recall / G-F1 from counts summed"
        " over questions; sufficient: share with ≥ 5 distinct interpretations.",
        "",
        *_header(metric_keys),
    ]
    for method, s in summary.items():
        cells = [_cell(s["metrics"].get(k), s["ci95"].get(k)) for k in metric_keys]
        lines.append(f"| {_label(method, s)} | {s['questions']} | " + " | ".join(cells) + " |")
    return lines


def _difference_table(summary: dict[str, Any], metric_keys: list[str]) -> list[str]:
    """Each method minus the baseline, paired; none without a baseline."""
    compared = {method: s["vs_baseline"] for method, s in summary.items() if s.get("vs_baseline")}
    if not compared:
        return []
    baseline = next(iter(compared.values()))["baseline"]
    lines = [
        "",
        f"## Difference to {baseline} (paired over the questions both answered; * = the 95% interval excludes 0)",
        "",
        *_header(metric_keys),
    ]
    for method, diffs in compared.items():
        cells = []
        for k in metric_keys:
            d = diffs.get(k)
            cells.append(
                "–"
                if d is None
                else _cell(d["diff"], d["ci95"], sign=True) + (" *" if excludes_zero(d["ci95"]) else "")
            )
        n = max((d["questions"] for k, d in diffs.items() if isinstance(d, dict)), default=0)
        lines.append(f"| {_label(method, summary[method])} | {n} | " + " | ".join(cells) + " |")
    return lines


def _cost_tables(summary: dict[str, Any]) -> list[str]:
    """Cost per question by method, then by node."""
    cost_keys = list(next(iter(summary.values()))["cost_per_question"])
    lines = ["", "## Cost (mean per question)", "", "| method | " + " | ".join(cost_keys) + " |"]
    lines.append("|---" * (len(cost_keys) + 1) + "|")
    for method, s in summary.items():
        lines.append(f"| {method} | " + " | ".join(f"{s['cost_per_question'][k]:,.1f}" for k in cost_keys) + " |")
    lines += [
        "",
        "## Cost by node (mean per question)",
        "",
        "Prefilled: prompt tokens the model evaluated, i.e. less those the endpoint reports served from its prefix cache"
        " (an endpoint that reports none counts every prompt token).",
        "",
        "| method | node | calls | input tokens | prefilled tokens | output tokens | LLM seconds |",
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for method, s in summary.items():
        for node, c in s.get("cost_by_node", {}).items():
            prefilled = c.get("prefilled_tokens", c["input_tokens"])
            lines.append(
                f"| {method} | {node} | {c['calls']:.2f} | {c['input_tokens']:,.0f} | {prefilled:,.0f} |"
                f" {c['output_tokens']:,.0f} | {c['seconds']:.1f} |"
            )
    return lines


def _provenance_lines(summary: dict[str, Any]) -> list[str]:
    made = {method: s["provenance"] for method, s in summary.items() if s.get("provenance")}
    if not made:
        return []
    first = next(iter(made.values()))
    llm = ", ".join(f"{k} {v}" for k, v in first["llm"].items())
    lines = ["", "## Provenance", "", f"- LLM: {llm}", f"- dataset sha256: {first['dataset_sha256']}"]
    if first.get("judge"):
        lines.append("- judge: " + ", ".join(f"{k} {v}" for k, v in first["judge"].items()))
    commits = sorted({c for p in made.values() for c in p["commits"]})
    lines.append(f"- commit{'s' if len(commits) > 1 else ''}: {', '.join(commits)}")
    if replay := first.get("replay"):
        lines.append(f"- replayed from node {replay['at']} on: the stored runs of {replay['source']}")
    for method, p in made.items():
        lines.append(f"- {method}: options key {p['key']}")
    return lines


def _quality_key(summary: dict[str, Any]) -> str:
    keys = next(iter(summary.values()))["metrics"].keys() if summary else []
    return next((k for k in ("dr", "str_em", "f1") if k in keys), "str_em")


def _plot(summary: dict[str, Any], path: Path) -> None:
    """Quality vs seconds per question with 95% intervals, circle size ∝ tokens per question (cf. DIVA Figure 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    quality = _quality_key(summary)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    tokens = [
        s["cost_per_question"]["input_tokens"] + s["cost_per_question"]["output_tokens"] for s in summary.values()
    ]
    biggest = max(tokens) or 1
    for (method, s), n_tokens in zip(summary.items(), tokens):
        x, y = s["cost_per_question"]["seconds"], s["metrics"].get(quality, 0.0)
        points = ax.scatter(x, y, s=60 + 900 * n_tokens / biggest, alpha=0.5)
        ci = s.get("ci95", {}).get(quality)
        if ci:
            ax.errorbar(x, y, yerr=[[y - ci[0]], [ci[1] - y]], fmt="none", capsize=4, color=points.get_facecolor()[0])
        ax.annotate(method, (x, y), textcoords="offset points", xytext=(6, 6))
    ax.set_xlabel("seconds per question")
    ax.set_ylabel(f"{quality} (95% interval)")
    ax.set_title("Quality vs time (circle size: tokens per question)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
