"""``ambigqa eval``: every method on the same questions with the same LLM; resumable, with a summary and a plot.

Each finished (method, question) is appended to ``OUT/results.jsonl`` at once, so a crash or Ctrl-C loses nothing
and a re-run skips what is done (failed runs are retried). ``summary.json``/``summary.md``/``quality_vs_time.png``
are rewritten from the results file at the end.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent.errors import AgentError, CollectionError, ConfigError, LLMUnavailableError, ModelFileError
from agent.eval import metrics as m
from agent.eval.datasets import Example, load_examples
from agent.schemas import RunResult

FATAL = (LLMUnavailableError, ConfigError, CollectionError, ModelFileError)  # every later run would fail too


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


def _check_options(method: str, options: dict[str, Any]) -> None:
    from agent.context import make_context
    from agent.registry import load_graph

    make_context(load_graph(method).context_schema, options, strict=True, owner=method)


def score(example: Example, result: RunResult, reader: m.Reader | None = None) -> dict[str, float]:
    texts = [p.full_text for p in result.passages]
    if example.kind == "asqa":
        golds = example.short_answers
        scores = {
            "str_em": m.str_em(result.answer, golds),
            "rouge_l": m.rouge_l(result.answer, example.long_answers),
            "mrecall@5": m.mrecall_at_k(texts, golds, 5),
            "coverage": m.answer_coverage(texts, golds),
        }
        if reader is not None:
            pairs = [(p.question, p.short_answers) for p in example.qa_pairs]
            scores["disambig_f1"] = m.disambig_f1(result.answer, pairs, reader)
            scores["dr"] = m.dr_score(scores["disambig_f1"], scores["rouge_l"])
        return scores
    return {
        "em": m.best_over(m.exact_match, result.answer, example.answers),
        "f1": m.best_over(m.token_f1, result.answer, example.answers),
        "acc": m.answer_accuracy(result.answer, example.answers),
        "support_recall@10": m.support_recall([p.id for p in result.passages[:10]], example.supporting_ids),
    }


def grounded_metrics(
    example: Example, result: RunResult, judge: str, collection: str | None
) -> tuple[dict[str, float], dict[str, int]]:
    """VerDICt's G-Precision / G-Recall / G-F1 and ungrounded interpretation recall for one run, and the judge's usage.

    Each gold interpretation is grounded in the corpus passages its own question retrieves (top 5); Q̄ follows Eq. 22
    for each method and question: the grounded gold interpretations plus that method's verified predictions.
    """
    from agent.eval.grounded import evaluate_grounded, gold_evidence
    from agent.retrieval.collections import open_store
    from agent.schemas import QAPair

    gold = [QAPair(question=p.question, answer=" / ".join(p.short_answers)) for p in example.qa_pairs]
    evidence = gold_evidence(open_store(collection), gold)
    scores = evaluate_grounded(result.question, result.disambiguations, result.passages, gold, judge, evidence)
    values = {
        "g_precision": scores.g_precision,
        "g_recall": scores.g_recall,
        "g_f1": scores.g_f1,
        "interp_recall": scores.recall,
    }
    usage = {
        "llm_calls": scores.usage.calls,
        "input_tokens": scores.usage.input_tokens,
        "output_tokens": scores.usage.output_tokens,
    }
    return {k: round(v, 4) for k, v in values.items() if v is not None}, usage


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


def run_one(example: Example, method: str, config: EvalConfig, reader: m.Reader | None) -> dict[str, Any]:
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
    metrics = score(example, result, reader)
    judge_usage = None
    if config.judge and example.kind == "asqa":
        grounded, judge_usage = grounded_metrics(example, result, config.judge, config.collection)
        metrics |= grounded
    row = {
        "method": method,
        "id": example.id,
        "question": example.question,
        "answer": result.answer,
        "disambiguations": [d.model_dump() for d in result.disambiguations],
        "passage_ids": [p.id for p in result.passages],
        "metrics": metrics,
        "details": details(result),
        "cost": {
            "llm_calls": total.calls,
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "seconds": result.seconds,
            "critical_path_s": round(critical.seconds, 3),
            "llm_rounds": critical.rounds,
        },
    }
    if judge_usage is not None:
        row["judge_usage"] = judge_usage  # not the method's cost
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


def _done(results_path: Path) -> set[tuple[str, str]]:
    if not results_path.is_file():
        return set()
    done = set()
    for line in results_path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash is retried
        if "error" not in row:
            done.add((row["method"], row["id"]))
    return done


def evaluate(config: EvalConfig, progress: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    from agent.registry import load_graph

    for method in config.methods:
        load_graph(method)  # unknown methods and options fail before any work
    for method in config.method_options:
        if method not in config.methods:
            raise ConfigError(
                f"options given for {method}, which is not among the methods ({', '.join(config.methods)})"
            )
    for method in config.methods:
        _check_options(method, config.options_for(method))
    examples = load_examples(config.dataset, config.limit)
    if config.corpus is not None:
        from agent.retrieval.ingest import ingest

        config.collection = config.collection or config.corpus.parent.name
        report = ingest(config.corpus, config.collection, progress=progress)
        log(f"collection {config.collection}: {report.added} added, {report.skipped} already stored")
    reader = m.hf_reader(config.reader) if config.reader else None
    if reader is None and examples and examples[0].kind == "asqa":
        log("Disambig-F1 and DR skipped: no extractive QA reader configured (--reader MODEL_DIR)")
    if examples and examples[0].kind == "asqa" and not config.judge:
        log("grounded metrics (G-Precision/G-Recall/G-F1) off: name an LLM judge to turn them on (--judge LLM)")
    config.out.mkdir(parents=True, exist_ok=True)
    results_path = config.out / "results.jsonl"
    done = _done(results_path)
    todo = [(e, method) for e in examples for method in config.methods if (method, e.id) not in done]
    if done:
        log(f"resuming: {len(done)} runs already in {results_path}, {len(todo)} to go")
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="run", desc="eval")
    try:
        with results_path.open("a", encoding="utf-8") as out:
            for example, method in todo:
                if bar:
                    bar.set_postfix_str(f"{method} · {example.id}")
                try:
                    row = run_one(example, method, config, reader)
                except FATAL:
                    raise
                except AgentError as exc:
                    row = {"method": method, "id": example.id, "question": example.question, "error": str(exc)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                if bar:
                    bar.update(1)
    finally:
        if bar:
            bar.close()
        summary = summarize(results_path, config.methods)
        for method, options in config.method_options.items():
            if method in summary:
                summary[method]["options"] = options
        write_reports(summary, config.out)
    return summary


def summarize(results_path: Path, methods: list[str]) -> dict[str, Any]:
    rows = (
        [json.loads(line) for line in results_path.read_text().splitlines() if line.strip()]
        if results_path.is_file()
        else []
    )
    summary: dict[str, Any] = {}
    for method in methods:
        ok = [r for r in rows if r["method"] == method and "error" not in r]
        failed = len(
            {r["id"] for r in rows if r["method"] == method and "error" in r} - {r["id"] for r in ok}
        )  # retried ones are not
        if not ok:
            continue
        mean = lambda values: round(statistics.fmean(values), 4)  # noqa: E731
        summary[method] = {
            "questions": len(ok),
            "failed": failed,
            "metrics": {
                k: mean([r["metrics"][k] for r in ok if k in r["metrics"]]) for k in _keys(r["metrics"] for r in ok)
            },
            "cost_per_question": {k: mean([r["cost"][k] for r in ok if k in r["cost"]]) for k in ok[0]["cost"]},
            "details_per_question": {
                "interpretations": mean([len(r["disambiguations"]) for r in ok]),
                **_mean_details(ok),
            },
        }
    return summary


METRIC_ORDER = ["str_em", "rouge_l", "disambig_f1", "dr", "mrecall@5", "coverage", "g_precision", "g_recall", "g_f1",
                "interp_recall", "em", "f1", "acc", "support_recall@10"]  # fmt: skip


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


def write_reports(summary: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if not summary:
        (out / "summary.md").write_text("No finished runs yet.\n")
        return
    metric_keys = _keys(s["metrics"] for s in summary.values())
    cost_keys = list(next(iter(summary.values()))["cost_per_question"])
    lines = ["## Quality (mean per question)", "", "| method | n | " + " | ".join(metric_keys) + " |"]
    lines.append("|---" * (len(metric_keys) + 2) + "|")
    for method, s in summary.items():
        if s.get("options"):
            method = f"{method} ({', '.join(f'{k}={json.dumps(v)}' for k, v in s['options'].items())})"
        lines.append(
            f"| {method} | {s['questions']} | "
            + " | ".join(f"{s['metrics'][k]:.3f}" if k in s["metrics"] else "–" for k in metric_keys)
            + " |"
        )
    lines += ["", "## Cost (mean per question)", "", "| method | " + " | ".join(cost_keys) + " |"]
    lines.append("|---" * (len(cost_keys) + 1) + "|")
    for method, s in summary.items():
        lines.append(f"| {method} | " + " | ".join(f"{s['cost_per_question'][k]:,.1f}" for k in cost_keys) + " |")
    detailed = {method: s["details_per_question"] for method, s in summary.items() if s.get("details_per_question")}
    if detailed:
        lines += ["", "## Method details (mean per question)", ""]
        lines += [f"- **{method}**: " + ", ".join(f"{k} {v:g}" for k, v in d.items()) for method, d in detailed.items()]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(summary, out / "quality_vs_time.png")


def _plot(summary: dict[str, Any], path: Path) -> None:
    """Quality vs seconds per question, circle size ∝ tokens per question (cf. DIVA Figure 1)."""
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
        ax.scatter(x, y, s=60 + 900 * n_tokens / biggest, alpha=0.5)
        ax.annotate(method, (x, y), textcoords="offset points", xytext=(6, 6))
    ax.set_xlabel("seconds per question")
    ax.set_ylabel(quality)
    ax.set_title("Quality vs time (circle size: tokens per question)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
