"""``ambigqa eval``: every method on the same questions with the same LLM; resumable, with a summary and a plot.

Each finished (method, question) is appended to ``OUT/results.jsonl`` at once, with its provenance (LLM, the method's
resolved options, dataset hash, commit), so a crash or Ctrl-C loses nothing and a re-run skips what is done with the
same settings (failed runs are retried; a changed option makes new rows). ``summary.json``/``summary.md``/
``quality_vs_time.png`` are rewritten from the results file at the end: metrics as the papers aggregate them, 95%
bootstrap intervals, and paired differences to a baseline (``agent.eval.stats``).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent.errors import AgentError, CollectionError, ConfigError, LLMCrashError, LLMUnavailableError, ModelFileError
from agent.eval import metrics as m
from agent.eval.datasets import Example, load_examples
from agent.eval.provenance import Provenance, file_sha256, git_commit, llm_provenance, resolved_options
from agent.eval.stats import excludes_zero, paired_difference, summarize_metrics
from agent.schemas import RunResult
from agent.text import narrates

FATAL = (LLMUnavailableError, ConfigError, CollectionError, ModelFileError)  # every later run would fail too
# but not a crash of the embedded server: the next call starts a fresh one


class EvalConfig(BaseModel):
    dataset: Path
    methods: list[str]
    out: Path
    corpus: Path | None = None
    collection: str | None = None
    limit: int | None = None
    llm: str | None = None
    reader: str | None = Field(default=None, description="local extractive QA model dir for Disambig-F1 / DR")
    judge: str | None = Field(default=None, description="LLM judge for VerDICt's grounded metrics (opt-in)")
    options: dict[str, Any] = Field(default_factory=dict, description="context fields for every method")
    method_options: dict[str, dict[str, Any]] = Field(default_factory=dict, description="context fields per method")
    concurrency: int = Field(default=1, ge=1, le=64, description="questions run at once (the local model serialises)")
    baseline: str | None = Field(default=None, description="method the others are compared to; None: rag if run")
    bootstrap_samples: int = Field(default=1000, ge=100, le=100_000, description="resamples for the 95% intervals")

    def options_for(self, method: str) -> dict[str, Any]:
        return {**self.options, **self.method_options.get(method, {})}


def parse_setting(text: str) -> tuple[str, str, Any]:
    """``METHOD.FIELD=VALUE`` (e.g. ``sunar.asu=false``) → (method, field, value); VALUE is read as JSON, else text."""
    target, sep, raw = text.partition("=")
    method, dot, field = target.strip().partition(".")
    if not sep or not dot or not method or not field:
        raise ConfigError(f"setting '{text}' is not METHOD.FIELD=VALUE (e.g. sunar.asu=false)")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return method, field.strip(), value


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


class CriticalPath:
    """Sequential LLM time and rounds, from top-level node updates as they arrive (an ``agent.run`` callback).

    An update that made LLM calls adds the time since the previous top-level update (calls within one node, or the
    branches of one fan-out, overlap). Consecutive updates of the same node — the branches of one fan-out, e.g. ToC's
    expansions of a BFS level — are one round.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.rounds = 0
        self._last = time.perf_counter()
        self._previous: tuple[str, bool] | None = None

    def __call__(self, node: str, update: dict[str, Any], _seconds: float) -> None:
        if "/" in node:  # a subgraph's node: its parent node's update covers it
            return
        now = time.perf_counter()
        usage = update.get("usage")
        called = bool(usage is not None and getattr(usage, "total", None) is not None and usage.total.calls)
        if called:
            self.seconds += now - self._last
            if self._previous != (node, True):
                self.rounds += 1
        self._previous = (node, called)
        self._last = now


def run_one(
    example: Example, method: str, config: EvalConfig, reader: m.Reader | None, provenance: Provenance
) -> dict[str, Any]:
    from agent.runner import run

    critical = CriticalPath()
    result = run(
        example.question,
        method=method,
        llm=config.llm,
        collection=config.collection,
        on_node=critical,
        **config.options_for(method),
    )
    total = result.usage.total
    row: dict[str, Any] = {
        "method": method,
        "id": example.id,
        "question": example.question,
        "answer": result.answer,
        "disambiguations": [d.model_dump() for d in result.disambiguations],
        "passage_ids": [p.id for p in result.passages],
        "retrieved_ids": None if result.retrieved is None else [p.id for p in result.retrieved],
        "metrics": score(example, result, reader),
        "details": details(result),
        "cost": {
            "llm_calls": total.calls,
            "input_tokens": total.input_tokens,
            "prefilled_tokens": total.prefilled_tokens,
            "output_tokens": total.output_tokens,
            "seconds": result.seconds,
            "critical_path_s": round(critical.seconds, 3),
            "llm_rounds": critical.rounds,
        },
        "cost_by_node": {node: usage.model_dump() for node, usage in result.usage.by_node.items()},
    }
    if config.judge and example.kind == "asqa":
        row["grounded"], row["judge_usage"] = grounded_metrics(example, result, config.judge, config.collection)
    row["provenance"] = {"key": provenance.key, **provenance.model_dump()}
    return row


def details(result: RunResult) -> dict[str, Any]:
    """Method-specific figures from the final state: numbers and short labels as they are, lists as their length."""
    out: dict[str, Any] = {}
    for key, value in result.extra.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 80):
            out[key] = value
        elif isinstance(value, list):
            out[f"{key}_count"] = len(value)
    return out


def read_rows(results_path: Path) -> list[dict[str, Any]]:
    """The results file's rows; a line cut by a crash is skipped (and its run retried)."""
    if not results_path.is_file():
        return []
    rows = []
    for line in results_path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _key(row: dict[str, Any]) -> str | None:
    return (row.get("provenance") or {}).get("key")


def provenances(config: EvalConfig) -> dict[str, Provenance]:
    """Each method's provenance; resolving the options rejects unknown or bad ones before any work."""
    from agent.registry import load_graph

    for method in config.methods:
        load_graph(method)  # unknown methods fail first
    for method in config.method_options:
        if method not in config.methods:
            raise ConfigError(
                f"options given for {method}, which is not among the methods ({', '.join(config.methods)})"
            )
    if config.baseline is not None and config.baseline not in config.methods:
        raise ConfigError(f"baseline {config.baseline} is not among the methods ({', '.join(config.methods)})")
    llm = llm_provenance(config.llm)
    judge = llm_provenance(config.judge) if config.judge else None
    dataset = file_sha256(config.dataset) if config.dataset.is_file() else ""
    common = {"llm": llm, "judge": judge, "reader": config.reader, "dataset_sha256": dataset, "commit": git_commit()}
    return {
        method: Provenance(
            options=resolved_options(
                method, {"llm": config.llm or "", "collection": config.collection or "", **config.options_for(method)}
            ),
            **common,
        )
        for method in config.methods
    }


def evaluate(config: EvalConfig, progress: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    made_with = provenances(config)
    examples = load_examples(config.dataset, config.limit)
    if config.corpus is not None:
        from agent.retrieval.ingest import ingest

        config.collection = config.collection or config.corpus.parent.name
        report = ingest(config.corpus, config.collection, progress=progress)
        log(f"collection {config.collection}: {report.added} added, {report.skipped} already stored")
        made_with = provenances(config)  # the collection is now named
    reader = m.hf_reader(config.reader) if config.reader else None
    if reader is None and examples and examples[0].kind == "asqa":
        log("Disambig-F1 and DR skipped: no extractive QA reader configured (--reader MODEL_DIR)")
    if examples and examples[0].kind == "asqa" and not config.judge:
        log("grounded metrics (G-Precision/G-Recall/G-F1) off: name an LLM judge to turn them on (--judge LLM)")
    config.out.mkdir(parents=True, exist_ok=True)
    results_path = config.out / "results.jsonl"
    keys = {method: p.key for method, p in made_with.items()}
    rows = read_rows(results_path)
    done = {(r["method"], r["id"]) for r in rows if "error" not in r and _key(r) == keys.get(r["method"])}
    todo = [(e, method) for e in examples for method in config.methods if (method, e.id) not in done]
    if done:
        log(f"resuming: {len(done)} runs already in {results_path}, {len(todo)} to go")
    other = sum(r["method"] in keys and _key(r) != keys[r["method"]] for r in rows)
    if other:
        log(f"{other} rows in {results_path} were made with other settings: kept, not reused or summarised")
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="run", desc="eval")
    try:
        with results_path.open("a", encoding="utf-8") as out:
            write = _writer(out, bar)
            if config.concurrency == 1:
                for example, method in todo:
                    if bar:
                        bar.set_postfix_str(f"{method} · {example.id}")
                    write(_attempt(example, method, config, reader, made_with[method]))
            else:
                _run_concurrently(todo, config, reader, made_with, write)
    finally:
        if bar:
            bar.close()
        baseline = config.baseline or ("rag" if "rag" in config.methods else None)
        summary = summarize(
            results_path, config.methods, keys, baseline, made_with, config.method_options, config.bootstrap_samples
        )
        write_reports(summary, config.out)
    return summary


def _attempt(
    example: Example, method: str, config: EvalConfig, reader: m.Reader | None, provenance: Provenance
) -> dict[str, Any]:
    """One run's row; a run-level error becomes an error row (retried on resume), a fatal one is raised."""
    try:
        return run_one(example, method, config, reader, provenance)
    except LLMCrashError as exc:
        return _error_row(example, method, provenance, exc)
    except FATAL:
        raise
    except AgentError as exc:
        return _error_row(example, method, provenance, exc)


def _error_row(example: Example, method: str, provenance: Provenance, exc: Exception) -> dict[str, Any]:
    error = {"method": method, "id": example.id, "question": example.question, "error": str(exc)}
    return error | {"provenance": {"key": provenance.key}}


def _writer(out: Any, bar: Any) -> Callable[[dict[str, Any]], None]:
    lock = threading.Lock()

    def write(row: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(row) + "\n")
            out.flush()
            if bar:
                bar.set_postfix_str(f"{row['method']} · {row['id']}")
                bar.update(1)

    return write


def _run_concurrently(
    todo: list[tuple[Example, str]],
    config: EvalConfig,
    reader: m.Reader | None,
    made_with: dict[str, Provenance],
    write: Callable[[dict[str, Any]], None],
) -> None:
    """``config.concurrency`` runs at once; rows are written as they finish; a fatal error stops the rest."""
    pending = iter(todo)
    with ThreadPoolExecutor(config.concurrency, thread_name_prefix="eval") as pool:
        running: set[Future] = set()
        try:
            while True:
                for example, method in pending:
                    running.add(pool.submit(_attempt, example, method, config, reader, made_with[method]))
                    if len(running) >= config.concurrency:
                        break
                if not running:
                    return
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    write(future.result())
        finally:
            for future in running:
                future.cancel()


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
        method: [r for r in rows if r["method"] == method and (keys is None or _key(r) == keys.get(method))]
        for method in methods
    }
    ok = {method: [r for r in current[method] if "error" not in r] for method in methods}
    summary: dict[str, Any] = {}
    for method in methods:
        finished = ok[method]
        if not finished:
            continue
        failed = len({r["id"] for r in current[method] if "error" in r} - {r["id"] for r in finished})
        metrics, ci95 = summarize_metrics(finished, samples)
        entry: dict[str, Any] = {"questions": len(finished), "failed": failed, "metrics": metrics, "ci95": ci95}
        if baseline and method != baseline and ok.get(baseline):
            entry["vs_baseline"] = {"baseline": baseline, **paired_difference(finished, ok[baseline], samples)}
        entry["cost_per_question"] = {
            k: _mean([r["cost"][k] for r in finished if k in r["cost"]]) for k in finished[0]["cost"]
        }
        entry["cost_by_node"] = _cost_by_node(finished)
        entry["details_per_question"] = {
            "interpretations": _mean([len(r["disambiguations"]) for r in finished]),
            **_mean_details(finished),
        }
        if method_options and method_options.get(method):
            entry["options"] = method_options[method]
        if made_with:
            entry["provenance"] = {"key": made_with[method].key, **made_with[method].model_dump(exclude={"commit"})}
            entry["provenance"]["commits"] = sorted({r["provenance"].get("commit") or "unknown" for r in finished})
        summary[method] = entry
    return summary


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


METRIC_ORDER = ["str_em", "rouge_l", "disambig_f1", "dr", "mrecall@5", "coverage", "precision", "interp_recall",
                "sufficient", "g_precision", "g_recall", "g_f1", "em", "f1", "acc", "support_recall@10",
                "narrates"]  # fmt: skip
NOTES = {  # options that change what a metric means, shown in summary.md when set
    ("verdict", "append_uncited", True): "readings the answer did not cite are appended to it (lifts STR-EM)",
}


def _keys(dicts: Any) -> list[str]:
    """Every metric of ``dicts`` in table order (a metric is missing where it is undefined, e.g. G-Precision without
    predictions)."""
    seen = dict.fromkeys(k for d in dicts for k in d)
    return sorted(seen, key=lambda k: METRIC_ORDER.index(k) if k in METRIC_ORDER else len(METRIC_ORDER))


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


def _quality_key(summary: dict[str, Any]) -> str:
    keys = next(iter(summary.values()))["metrics"].keys() if summary else []
    return next((k for k in ("dr", "str_em", "f1") if k in keys), "str_em")


def _label(method: str, s: dict[str, Any]) -> str:
    if s.get("options"):
        return f"{method} ({', '.join(f'{k}={json.dumps(v)}' for k, v in s['options'].items())})"
    return method


def _cell(value: float | None, ci: list[float] | None, sign: bool = False) -> str:
    if value is None:
        return "–"
    text = f"{value:+.3f}" if sign else f"{value:.3f}"
    return f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else text


def write_reports(summary: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if not summary:
        (out / "summary.md").write_text("No finished runs yet.\n")
        return
    metric_keys = _keys(s["metrics"] for s in summary.values())
    lines = [
        "## Quality [95% bootstrap interval over questions]",
        "",
        "Means per question; precision / interp_recall (ungrounded) and G-Precision / G-Recall / G-F1 from counts summed"
        " over questions; sufficient: share with ≥ 5 distinct interpretations.",
        "",
        "| method | n | " + " | ".join(metric_keys) + " |",
        "|---" * (len(metric_keys) + 2) + "|",
    ]
    for method, s in summary.items():
        cells = [_cell(s["metrics"].get(k), s["ci95"].get(k)) for k in metric_keys]
        lines.append(f"| {_label(method, s)} | {s['questions']} | " + " | ".join(cells) + " |")
    compared = {method: s["vs_baseline"] for method, s in summary.items() if s.get("vs_baseline")}
    if compared:
        baseline = next(iter(compared.values()))["baseline"]
        lines += [
            "",
            f"## Difference to {baseline} (paired over the questions both answered; * = the 95% interval excludes 0)",
            "",
            "| method | n | " + " | ".join(metric_keys) + " |",
            "|---" * (len(metric_keys) + 2) + "|",
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
    cost_keys = list(next(iter(summary.values()))["cost_per_question"])
    lines += ["", "## Cost (mean per question)", "", "| method | " + " | ".join(cost_keys) + " |"]
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
    detailed = {method: s["details_per_question"] for method, s in summary.items() if s.get("details_per_question")}
    if detailed:
        lines += ["", "## Method details (mean per question)", ""]
        lines += [f"- **{method}**: " + ", ".join(f"{k} {v:g}" for k, v in d.items()) for method, d in detailed.items()]
    lines += _provenance_lines(summary)
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(summary, out / "quality_vs_time.png")


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
    for method, p in made.items():
        notes = [
            f"{field}={json.dumps(p['options'][field])}" + (f": {text}" if p["options"][field] == value else "")
            for (owner, field, value), text in NOTES.items()
            if owner == method and field in p["options"]
        ]
        lines.append(f"- {method}: options key {p['key']}" + "".join(f"; {note}" for note in notes))
    return lines


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
