"""Retrieval figures: search latency, and MRecall@k of the vanilla pipeline vs DIVA's retrieve + prune with the gold
interpretations (DIVA Table 3's +Oracle row), for one pipeline or every first stage × re-ranker."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agent.eval.datasets import Example
from agent.eval.resume import RowLog, made_with, read_rows

FIRST_STAGES = ("dense", "bm25", "hybrid")
RERANKERS = ("none", "cross-encoder", "colbert")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def retrieval_latency(collection: str, questions: list[str], k: int = 5) -> dict[str, float]:
    """p50 and p95 milliseconds of a top-``k`` search per question."""
    from agent.retrieval.collections import open_store

    store = open_store(collection)
    store.search(questions[0], k)  # load the encoder before timing
    latencies = []
    for question in questions:
        start = time.perf_counter()
        store.search(question, k)
        latencies.append((time.perf_counter() - start) * 1000)
    return {
        "passages": store.count(),
        "queries": len(latencies),
        "p50_ms": round(_percentile(latencies, 0.5), 1),
        "p95_ms": round(_percentile(latencies, 0.95), 1),
    }


def oracle_mrecall(
    collection: str,
    examples: list[Example],
    k: int = 5,
    retrieval: dict[str, Any] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """DIVA Table 3's +Oracle row: MRecall@k and answer coverage of the vanilla pipeline's top-k vs DIVA's retrieve +
    prune with the gold disambiguated questions as the interpretations (no LLM involved), and the p50 seconds of each
    per question. ``retrieval`` sets the pipeline (first_stage, reranker, rerank_depth, rerank_fusion); default: the
    methods' own."""
    from langgraph.runtime import Runtime

    from agent.context import make_context
    from agent.registry import method_module
    from agent.retrieval.collections import open_store

    diva = method_module("diva")  # the graph's own retrieve and prune nodes
    options = {"collection": collection, "top_k": k, **(retrieval or {})}
    context = make_context(diva.DivaContext, options, strict=True, owner="the retrieval suite")
    runtime, store = Runtime(context=context), open_store(collection)
    rows = [e for e in examples if e.qa_pairs]
    bar = tqdm(
        total=len(rows),
        unit="question",
        desc=f"{context.first_stage} + {context.reranker}",
        disable=not (progress and rows),
    )
    measured = []
    for example in rows:
        measured.append(_oracle_question(diva, store, runtime, example, k))
        bar.update(1)
    bar.close()
    mean = lambda name: round(statistics.fmean(m[name] for m in measured), 4) if measured else 0.0  # noqa: E731
    p50 = lambda name: round(statistics.median(m[name] for m in measured), 3) if measured else 0.0  # noqa: E731
    return {
        "questions": len(rows),
        "first_stage": context.first_stage,
        "reranker": context.reranker,
        "rerank_depth": context.rerank_depth,
        "rerank_fusion": context.rerank_fusion,
        f"vanilla_mrecall@{k}": mean("vanilla"),
        f"diva_oracle_mrecall@{k}": mean("oracle"),
        "vanilla_coverage": mean("vanilla_cov"),
        "diva_oracle_coverage": mean("oracle_cov"),
        "vanilla_p50_s": p50("vanilla_s"),
        "oracle_p50_s": p50("oracle_s"),
    }


def _oracle_question(diva: Any, store: Any, runtime: Any, example: Example, k: int) -> dict[str, float]:
    """One question's MRecall@k, coverage and seconds: the pipeline's top-k, then DIVA's retrieve + prune."""
    from agent.eval.metrics import answer_coverage, mrecall_at_k
    from agent.retrieval.pipeline import search

    start = time.perf_counter()
    hits = search(store, example.question, k, runtime.context.retrieval())
    vanilla_s = time.perf_counter() - start
    start = time.perf_counter()
    state: dict[str, Any] = {"question": example.question, "interpretations": [p.question for p in example.qa_pairs]}
    state.update(diva.retrieve(state, runtime))
    kept = diva.prune(state, runtime)["kept"]
    oracle_s = time.perf_counter() - start
    golds = example.short_answers
    return {
        "vanilla": mrecall_at_k([p.full_text for p in hits], golds, k),
        "oracle": mrecall_at_k([p.full_text for p in kept], golds, k),
        "vanilla_cov": answer_coverage([p.full_text for p in hits], golds),
        "oracle_cov": answer_coverage([p.full_text for p in kept], golds),
        "vanilla_s": vanilla_s,
        "oracle_s": oracle_s,
    }


def retrieval_suite(
    collection: str,
    examples: list[Example],
    *,
    first_stages: tuple[str, ...] = FIRST_STAGES,
    rerankers: tuple[str, ...] = RERANKERS,
    depth: int | None = None,
    fusion: bool = True,
    record: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``oracle_mrecall`` for every first stage × re-ranker; with ``record`` each configuration's figures are appended
    to that JSONL when done, and a re-run skips configurations recorded for the same collection, questions, depth and
    fusion."""
    questions = sum(bool(e.qa_pairs) for e in examples)
    key = {"collection": collection, "questions": questions, "depth": depth, "rerank_fusion": fusion}
    done = {(r["first_stage"], r["reranker"]): r for r in made_with(read_rows(record), key)}
    rows = RowLog(record)
    results: dict[str, Any] = {}
    for first_stage in first_stages:
        for reranker in rerankers:
            name = f"{first_stage}+{reranker}"
            if (first_stage, reranker) in done:
                results[name] = done[(first_stage, reranker)]
                continue
            log(f"retrieval: {name} …")
            options = {"first_stage": first_stage, "reranker": reranker, "rerank_fusion": fusion}
            options |= {"rerank_depth": depth} if depth else {}
            results[name] = oracle_mrecall(collection, examples, retrieval=options, progress=True) | key
            rows.append(results[name])
    return results


def format_latency(r: dict[str, Any]) -> list[str]:
    return [
        f"- retrieval top-5 over {r['passages']:,} passages: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms ({r['queries']} queries)"
    ]


def format_oracle(o: dict[str, Any]) -> list[str]:
    return [
        "",
        f"MRecall@5 on {o['questions']} questions: vanilla top-5 {o['vanilla_mrecall@5']:.3f} "
        f"(coverage {o['vanilla_coverage']:.3f}) vs DIVA retrieval with gold interpretations (oracle) "
        f"{o['diva_oracle_mrecall@5']:.3f} (coverage {o['diva_oracle_coverage']:.3f})",
    ]


def format_retrieval_suite(suite: dict[str, Any]) -> list[str]:
    first = next(iter(suite.values()))
    lines = [
        f"Retrieval on {first['questions']} questions (MRecall@5 / answer coverage; oracle = DIVA's retrieve + prune "
        "with the gold disambiguations; p50 seconds per question)",
        "",
        "| first stage | re-ranker | vanilla MRecall@5 | vanilla coverage | oracle MRecall@5 | oracle coverage "
        "| vanilla p50 s | oracle p50 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {r['first_stage']} | {r['reranker']} | {r['vanilla_mrecall@5']:.3f} | {r['vanilla_coverage']:.3f} "
        f"| {r['diva_oracle_mrecall@5']:.3f} | {r['diva_oracle_coverage']:.3f} | {r['vanilla_p50_s']:.2f} "
        f"| {r['oracle_p50_s']:.2f} |"
        for r in suite.values()
    ]
