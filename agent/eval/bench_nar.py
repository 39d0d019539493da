"""SUNAR's retrieval ablation: supporting-paragraph recall@k of BM25, BM25 + the re-ranker (the LLM-free control: NAR
without its neighbour frontier), NAR without ASU and NAR with ASU; and the recall of the first-stage pool the control
re-ranks, whose misses are all the frontier can add."""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm import tqdm

from agent.errors import ConfigError
from agent.eval.datasets import Example
from agent.eval.resume import RowLog, made_with, read_rows

PAIRED = [("nar", "bm25_ce"), ("nar", "bm25"), ("bm25_ce", "bm25"), ("nar_asu", "nar")]  # (a, b): a − b, paired


def nar_recall(
    collection: str,
    examples: list[Example],
    llm: str | None = None,
    k: int = 10,
    progress: bool = True,
    record: Path | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Recall@k for the question itself with BM25 alone, BM25 + the re-ranker, NAR without ASU and, given an LLM, NAR
    with ASU — the same ``nar_retrieve`` node the graph runs, with SUNAR's ``options`` (e.g. ``samples``) on each.

    With ``record`` each question's figures are appended to that JSONL as soon as they exist, and questions already
    recorded (same collection, k and LLM) are not run again: a long ASU run can be stopped and resumed."""
    from agent.registry import method_module
    from agent.retrieval.collections import open_store

    sunar = method_module("sunar")  # the graph's own nar_retrieve node
    rows = [e for e in examples if e.supporting_ids]
    store = open_store(collection)
    variants = {"bm25_ce": (False, False), "nar": (True, False)} | ({"nar_asu": (True, True)} if llm else {})
    try:
        contexts = {
            name: sunar.SunarContext(**{**(options or {}), "collection": collection, "llm": llm or "", "nar": nar, "asu": asu})
            for name, (nar, asu) in variants.items()
        }  # fmt: skip
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(f"bad SUNAR option for the NAR figures: {error['loc'][0]}: {error['msg']}") from None
    key = {"collection": collection, "k": k, "llm": llm or "", "variants": ",".join(variants)}
    key["options"] = json.dumps(options, sort_keys=True) if options else None  # rows of other options are not reused
    done = {row["id"]: row for row in made_with(read_rows(record), key)}
    out = RowLog(record)
    initial = sum(e.id in done for e in rows)
    bar = tqdm(total=len(rows), unit="question", desc="NAR recall", initial=initial, disable=not (progress and rows))
    figures: list[dict[str, Any]] = []
    for example in rows:
        if example.id in done:
            figures.append(done[example.id])
            continue
        figures.append({"id": example.id, **key} | _nar_question(sunar, store, contexts, example, k))
        out.append(figures[-1])
        bar.update(1)
    bar.close()
    return _nar_report(figures, list(variants), k, bool(llm))


def _nar_question(sunar: Any, store: Any, contexts: dict[str, Any], example: Example, k: int) -> dict[str, Any]:
    """One question's recall@k and seconds for BM25 and each NAR variant; with ASU also its LLM calls, semantic sets
    per batch and how many passages it moved into the top k."""
    from langgraph.runtime import Runtime

    from agent.eval.metrics import support_recall
    from agent.sync import run_sync

    first_stage = [p.id for p in store.sparse_many([example.question], k)[0]]
    row: dict[str, Any] = {"bm25": support_recall(first_stage, example.supporting_ids)}
    control = contexts["bm25_ce"]
    pool = control.pool(example.question, control.first_stage_k, control.first_stage)  # what the control re-ranks
    row["pool"], row["pool_k"] = support_recall([p.id for p in pool], example.supporting_ids), control.first_stage_k
    top: dict[str, list[str]] = {}
    for name, context in contexts.items():
        start = time.perf_counter()
        state = {"question": example.question, "sub_question": example.question}
        update, calls = run_sync(_counted(sunar.nar_retrieve(state, Runtime(context=context))))
        row[f"{name}_seconds"] = round(time.perf_counter() - start, 3)
        top[name] = [p.id for p in update["ranked"][:k]]
        row[name] = support_recall(top[name], example.supporting_ids)
        if name == "nar_asu":
            row["nar_asu_llm_calls"] = calls
            row["nar_asu_semantic_sets"] = [b["semantic_sets"] for b in update["nar_batches"]]
            row["nar_asu_answers"] = [b["answers"] for b in update["nar_batches"]]  # to regroup another way later
            row["nar_asu_top_changed"] = len(set(top["nar_asu"]) - set(top["nar"]))
    return row


async def _counted(node: Coroutine[Any, Any, dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """A node's update and the LLM calls it made (what ``llm_node`` adds as its usage in a graph run)."""
    from agent.llm.usage import node_calls

    with node_calls() as calls:
        update = await node
    return update, sum(c.calls for c in calls)


def _nar_report(figures: list[dict[str, Any]], variants: list[str], k: int, asu: bool) -> dict[str, Any]:
    """Means over the questions with 95% bootstrap intervals: recall@k of BM25 and each variant, the paired
    differences that decide NAR's and ASU's worth, seconds per variant; with ASU its LLM calls and how often a batch
    had each number of semantic sets."""
    from agent.eval.stats import paired_difference, summarize_metrics

    mean = lambda name: round(statistics.fmean(row[name] for row in figures), 4) if figures else 0.0  # noqa: E731
    names = ["bm25", *variants]
    per_method = {n: [{"id": row["id"], "metrics": {"recall": row[n]}} for row in figures] for n in names}
    report: dict[str, Any] = {"questions": len(figures)}
    for name in names:
        value, ci95 = summarize_metrics(per_method[name])
        report[f"{name}_recall@{k}"] = value.get("recall", 0.0)
        report[f"{name}_recall@{k}_ci95"] = ci95.get("recall")
    for a, b in PAIRED if asu else PAIRED[:-1]:
        diff = paired_difference(per_method[a], per_method[b]).get("recall")
        if diff:
            report[f"{a}_minus_{b}"] = {"diff": diff["diff"], "ci95": diff["ci95"]}
    report |= {f"{name}_seconds": mean(f"{name}_seconds") for name in variants}
    pooled = [row for row in figures if "pool" in row]  # rows recorded before the pool was measured lack it
    if pooled:
        report["pool_recall"] = round(statistics.fmean(row["pool"] for row in pooled), 4)
        report["pool_k"] = pooled[0]["pool_k"]
    if asu and figures:
        report["nar_asu_llm_calls"] = mean("nar_asu_llm_calls")
        counts = Counter(s for row in figures for s in row["nar_asu_semantic_sets"])
        report["nar_asu_semantic_sets"] = {str(s): counts[s] for s in sorted(counts)}
    return report


def format_nar(o: dict[str, Any]) -> list[str]:
    shown = [("BM25", "bm25"), ("BM25 + re-ranker", "bm25_ce"), ("NAR without ASU", "nar"), ("NAR with ASU", "nar_asu")]
    recall = ", ".join(
        f"{label} {o[key + '_recall@10']:.3f}" + _ci(o.get(key + "_recall@10_ci95"))
        for label, key in shown
        if key + "_recall@10" in o
    )
    start = f" (from question {o['offset'] + 1})" if o.get("offset") else ""
    timing = [f"NAR {o['nar_seconds']:.1f} s"]
    if "nar_asu_seconds" in o:
        timing.append(f"NAR with ASU {o['nar_asu_seconds']:.1f} s, {o['nar_asu_llm_calls']:g} LLM calls")
    labels = dict((key, label) for label, key in shown)
    diffs = [
        f"{labels[a]} − {labels[b]} {d['diff']:+.3f}" + _ci(d["ci95"], "+")
        for a, b in PAIRED
        if (d := o.get(f"{a}_minus_{b}"))
    ]
    lines = [
        "",
        f"Supporting-paragraph recall@10 on {o['questions']} questions{start}: {recall}",
        "paired: " + "; ".join(diffs),
        "(per question: " + "; ".join(timing) + ")",
    ]
    if "pool_recall" in o:
        lines.append(
            f"the control's pool (the first stage's top {o['pool_k']}) holds {o['pool_recall']:.3f} of them: "
            "the frontier can add only what it lacks"
        )
    if sets := o.get("nar_asu_semantic_sets"):
        lines.append("ASU semantic sets per batch: " + ", ".join(f"{s}: {n} batches" for s, n in sets.items()))
    return lines


def _ci(ci95: list[float] | None, sign: str = "") -> str:
    return f" [{ci95[0]:{sign}.3f}, {ci95[1]:{sign}.3f}]" if ci95 else ""
