"""``ambigqa bench``: LLM-free performance figures — ingest rate, retrieval latency, orchestration overhead."""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import ConfigError
from agent.eval.datasets import load_examples


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ingest_rate(corpus: Path, sample: int = 512) -> dict[str, float]:
    """Passages/s embedding and storing ``sample`` passages into a fresh store, and the unchanged re-run's time."""
    from agent.retrieval.ingest import ingest
    from agent.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "sample.jsonl"
        with corpus.open() as src, part.open("w") as dst:
            for _, line in zip(range(sample), src):
                dst.write(line)
        settings = Settings(home=Path(tmp) / "home")
        first = ingest(part, "bench", settings=settings, progress=False)
        again = ingest(part, "bench", settings=settings, progress=False)
    return {
        "passages": first.added,
        "passages_per_s": round(first.passages_per_s, 1),
        "rerun_s": again.seconds,
        "backend": first.backend,
    }


BACKENDS = ("onnx", "torch")


def ingest_suite(
    corpus: Path,
    dataset: Path,
    limit: int | None = None,
    vectors: Path | None = None,
    chunk: int = 128,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Both embedding backends over the same passages (the first ``limit``, default all) in ingest's batches, taking
    turns per batch so both see the same machine load: passages/s each, their vectors' cosine agreement and, on the
    ASQA corpus with no passage left out, each one's dense top-5 MRecall@5 on the dev questions beside it (exact
    search over in-memory vectors; no stored collection is touched). With ``vectors`` (a folder) each batch's vectors
    and seconds are kept there and a re-run resumes, so the slow torch pass can be split over several runs."""
    from tqdm import tqdm

    from agent.eval.metrics import mrecall_at_k
    from agent.retrieval.embeddings import embed, model_path, usable
    from agent.retrieval.ingest import read_corpus
    from agent.retrieval.onnx_encoder import model_file
    from agent.retrieval.store import content_id
    from agent.schemas import titled_text
    from agent.settings import get_settings

    records = list({content_id(r.title, r.text): r for r in read_corpus(corpus)}.values())[:limit]
    texts = [titled_text(r.title, r.text) for r in records]
    if usable("onnx") != "onnx":
        raise ConfigError("the ONNX encoder is unavailable (see the warning above): nothing to compare torch with")
    for backend in BACKENDS:
        embed(["load the encoder before timing"] * 16, backend=backend)
    export = model_file(model_path(), get_settings().model_dir).name  # names the weights and the export recipe
    key = hashlib.sha256(json.dumps([[content_id(r.title, r.text) for r in records], export]).encode()).hexdigest()
    folder = vectors / key[:16] if vectors else None
    done = _batches_done(folder)
    initial = sum(len(b["onnx"]) for b in done.values())
    bar = tqdm(total=len(texts), initial=initial, unit="passage", desc="embedding with onnx and torch in turns")
    for start in range(0, len(texts), chunk):
        if start in done:
            continue
        batch, got, seconds = texts[start : start + chunk], {}, {}
        for backend in BACKENDS if (start // chunk) % 2 == 0 else BACKENDS[::-1]:
            began = time.perf_counter()
            got[backend] = embed(batch, backend=backend)
            seconds[backend] = time.perf_counter() - began
        done[start] = got | {"seconds": np.array([seconds[b] for b in BACKENDS])}
        if folder:
            _save_batch(folder, start, done[start])
        bar.update(len(batch))
        bar.set_postfix_str(", ".join(f"{b} {bar.n / s:.1f}/s" for b, s in _seconds(done).items()))
    bar.close()
    matrices = {b: np.concatenate([done[s][b] for s in sorted(done)]) for b in BACKENDS}
    totals = _seconds(done)
    agreement = np.sum(matrices["onnx"] * matrices["torch"], axis=1)
    report: dict[str, Any] = {
        "passages": len(texts),
        **{b: {"passages_per_s": round(len(texts) / totals[b], 1), "seconds": round(totals[b], 1)} for b in BACKENDS},
        "speedup": round(totals["torch"] / totals["onnx"], 2),
        "cosine_mean": round(float(agreement.mean()), 5),
        "cosine_min": round(float(agreement.min()), 5),
    }
    beside = corpus.resolve().parent == dataset.resolve().parent
    examples = [e for e in load_examples(dataset) if e.qa_pairs] if beside and limit is None else []
    if examples:
        log(f"MRecall@5 on {len(examples)} questions, dense top-5 over {len(texts):,} passages …")
        for backend in BACKENDS:
            similarity = embed([e.question for e in examples], backend=backend) @ matrices[backend].T
            top = np.argsort(-similarity, axis=1, kind="stable")[:, :5]
            hits = [mrecall_at_k([texts[i] for i in row], e.short_answers, 5) for row, e in zip(top, examples)]
            report[backend]["mrecall@5"] = round(statistics.fmean(hits), 4)
        report["questions"] = len(examples)
    return report


def _seconds(done: dict[int, dict[str, np.ndarray]]) -> dict[str, float]:
    """Each backend's embedding seconds over the batches done."""
    return dict(zip(BACKENDS, np.sum([b["seconds"] for b in done.values()], axis=0).tolist()))


def _batches_done(folder: Path | None) -> dict[int, dict[str, np.ndarray]]:
    """Batches a previous run of the same passages and recipe kept: start → onnx and torch vectors, seconds."""
    if not folder or not folder.is_dir():
        return {}
    done = {}
    for path in folder.glob("batch-*.npz"):
        with np.load(path) as saved:
            done[int(path.stem.split("-")[1])] = {name: saved[name] for name in (*BACKENDS, "seconds")}
    return done


def _save_batch(folder: Path, start: int, arrays: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".batch-{start}.tmp"
    with tmp.open("wb") as f:
        np.savez(f, **arrays)
    tmp.replace(folder / f"batch-{start}.npz")  # a run stopped mid-write leaves no half batch behind


def retrieval_latency(collection: str, questions: list[str], k: int = 5) -> dict[str, float]:
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


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: the time at least one LLM call was running."""
    total, current_end = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if start > current_end:
            total += end - start
            current_end = end
        elif end > current_end:
            total += end - current_end
            current_end = end
    return total


def orchestration_overhead(
    methods: list[str], questions: list[str], collection: str, latency: float = 0.2
) -> dict[str, Any]:
    """Graph wall time ÷ critical-path LLM time with a scripted LLM that sleeps ``latency`` s per call."""
    from agent.llm.scripted import DEMO_SCRIPT, ScriptedChatModel
    from agent.runner import run

    report = {}
    for method in methods:
        ratios, calls, walls = [], [], []
        for question in questions:
            model = ScriptedChatModel(script=dict(DEMO_SCRIPT), default="Yes.", latency=latency)
            start = time.perf_counter()
            run(question, method=method, llm=model, collection=collection)
            wall = time.perf_counter() - start
            critical = _union_seconds([(c.started, c.ended) for c in model.calls])
            ratios.append(wall / critical if critical else float("nan"))
            calls.append(len(model.calls))
            walls.append(wall)
        report[method] = {
            "llm_calls": round(statistics.fmean(calls), 1),
            "wall_s": round(statistics.fmean(walls), 2),
            "wall_over_critical_path": round(statistics.fmean(ratios), 2),
        }
    return report


def oracle_mrecall(
    collection: str, examples: list[Any], k: int = 5, retrieval: dict[str, Any] | None = None, progress: bool = False
) -> dict[str, Any]:
    """DIVA Table 3's +Oracle row: MRecall@k and answer coverage of the vanilla pipeline's top-k vs DIVA's retrieve +
    prune with the gold disambiguated questions as the interpretations (no LLM involved), and the p50 seconds of each
    per question. ``retrieval`` sets the pipeline (first_stage, reranker, rerank_depth, rerank_fusion); default: the
    methods' own."""
    from langgraph.runtime import Runtime

    from agent.context import make_context
    from agent.eval.metrics import answer_coverage, mrecall_at_k
    from agent.registry import method_module
    from agent.retrieval.collections import open_store
    from agent.retrieval.pipeline import search

    diva = method_module("diva")  # the graph's own retrieve and prune nodes
    options = {"collection": collection, "top_k": k, **(retrieval or {})}
    context = make_context(diva.DivaContext, options, strict=True, owner="the retrieval suite")
    runtime, store = Runtime(context=context), open_store(collection)
    rows = [e for e in examples if e.qa_pairs]
    figures: dict[str, list[float]] = {name: [] for name in ("vanilla", "oracle", "vanilla_cov", "oracle_cov")}
    seconds: dict[str, list[float]] = {"vanilla": [], "oracle": []}
    bar = None
    if progress and rows:
        from tqdm import tqdm

        bar = tqdm(total=len(rows), unit="question", desc=f"{context.first_stage} + {context.reranker}")
    for example in rows:
        start = time.perf_counter()
        hits = search(store, example.question, k, context.retrieval())
        seconds["vanilla"].append(time.perf_counter() - start)
        start = time.perf_counter()
        state: dict[str, Any] = {
            "question": example.question,
            "interpretations": [p.question for p in example.qa_pairs],
        }
        state.update(diva.retrieve(state, runtime))
        kept = diva.prune(state, runtime)["kept"]
        seconds["oracle"].append(time.perf_counter() - start)
        golds = example.short_answers
        figures["vanilla"].append(mrecall_at_k([p.full_text for p in hits], golds, k))
        figures["oracle"].append(mrecall_at_k([p.full_text for p in kept], golds, k))
        figures["vanilla_cov"].append(answer_coverage([p.full_text for p in hits], golds))
        figures["oracle_cov"].append(answer_coverage([p.full_text for p in kept], golds))
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    mean = lambda xs: round(statistics.fmean(xs), 4) if xs else 0.0  # noqa: E731
    p50 = lambda xs: round(statistics.median(xs), 3) if xs else 0.0  # noqa: E731
    return {
        "questions": len(rows),
        "first_stage": context.first_stage,
        "reranker": context.reranker,
        "rerank_depth": context.rerank_depth,
        "rerank_fusion": context.rerank_fusion,
        f"vanilla_mrecall@{k}": mean(figures["vanilla"]),
        f"diva_oracle_mrecall@{k}": mean(figures["oracle"]),
        "vanilla_coverage": mean(figures["vanilla_cov"]),
        "diva_oracle_coverage": mean(figures["oracle_cov"]),
        "vanilla_p50_s": p50(seconds["vanilla"]),
        "oracle_p50_s": p50(seconds["oracle"]),
    }


FIRST_STAGES = ("dense", "bm25", "hybrid")
RERANKERS = ("none", "cross-encoder", "colbert")


def retrieval_suite(
    collection: str,
    examples: list[Any],
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
    done = {(r["first_stage"], r["reranker"]): r for r in _recorded_rows(record, key)}
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
            if record:
                record.parent.mkdir(parents=True, exist_ok=True)
                with record.open("a") as out:
                    out.write(json.dumps(results[name]) + "\n")
    return results


def _recorded_rows(record: Path | None, key: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of ``record`` whose fields match ``key``."""
    if not record or not record.exists():
        return []
    rows = (json.loads(line) for line in record.read_text().splitlines() if line.strip())
    return [row for row in rows if all(row.get(name) == value for name, value in key.items())]


def _recorded_nar_rows(record: Path | None, key: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-question rows already in ``record`` for the same collection, k and ASU LLM, by question id."""
    return {row["id"]: row for row in _recorded_rows(record, key)}


def nar_recall(
    collection: str,
    examples: list[Any],
    llm: str | None = None,
    k: int = 10,
    progress: bool = True,
    record: Path | None = None,
) -> dict[str, Any]:
    """SUNAR's retrieval ablation: supporting-paragraph recall@k for the question itself with BM25 alone, NAR without
    ASU and, given an LLM, NAR with ASU — the same ``nar_retrieve`` node the graph runs.

    With ``record`` each question's figures are appended to that JSONL as soon as they exist, and questions already
    recorded (same collection, k and LLM) are not run again: a long ASU run can be stopped and resumed."""
    from langgraph.runtime import Runtime

    from agent.eval.metrics import support_recall
    from agent.registry import method_module
    from agent.retrieval.collections import open_store

    sunar = method_module("sunar")  # the graph's own nar_retrieve node

    rows = [e for e in examples if e.supporting_ids]
    store = open_store(collection)
    variants = {"nar": False} | ({"nar_asu": True} if llm else {})
    contexts = {
        name: sunar.SunarContext(collection=collection, llm=llm or "", asu=asu) for name, asu in variants.items()
    }
    key = {"collection": collection, "k": k, "llm": llm or ""}
    done = _recorded_nar_rows(record, key)
    if record:
        record.parent.mkdir(parents=True, exist_ok=True)
    figures: list[dict[str, Any]] = []
    bar = None
    if progress and rows:
        from tqdm import tqdm

        bar = tqdm(total=len(rows), unit="question", desc="NAR recall", initial=sum(e.id in done for e in rows))
    for example in rows:
        if example.id in done:
            figures.append(done[example.id])
            continue
        first_stage = [p.id for p in store.sparse_many([example.question], k)[0]]
        row: dict[str, Any] = {"id": example.id, **key, "bm25": support_recall(first_stage, example.supporting_ids)}
        top: dict[str, list[str]] = {}
        for name, context in contexts.items():
            start = time.perf_counter()
            update = sunar.nar_retrieve(
                {"question": example.question, "sub_question": example.question}, Runtime(context=context)
            )
            row[f"{name}_seconds"] = round(time.perf_counter() - start, 3)
            top[name] = [p.id for p in update["ranked"][:k]]
            row[name] = support_recall(top[name], example.supporting_ids)
            if name == "nar_asu":
                row["nar_asu_llm_calls"] = update["usage"].total.calls if "usage" in update else 0
                row["nar_asu_semantic_sets"] = [b["semantic_sets"] for b in update["nar_batches"]]
                row["nar_asu_top_changed"] = len(
                    set(top["nar_asu"]) - set(top["nar"])
                )  # passages ASU moved into the top k
        figures.append(row)
        if record:
            with record.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    mean = lambda name: round(statistics.fmean(row[name] for row in figures), 4) if figures else 0.0  # noqa: E731
    report: dict[str, Any] = {
        "questions": len(figures),
        **{f"{name}_recall@{k}": mean(name) for name in ["bm25", *variants]},
    }
    report |= {f"{name}_seconds": mean(f"{name}_seconds") for name in variants}
    if llm and figures:
        report["nar_asu_llm_calls"] = mean("nar_asu_llm_calls")
    return report


def run_bench(
    corpus: Path,
    dataset: Path,
    collection: str,
    methods: list[str],
    questions: int = 3,
    log: Callable[[str], None] = print,
    nar_questions: int = 20,
    asu_llm: str | None = None,
    nar_offset: int = 0,
    nar_record: Path | None = None,
    suite: str = "all",
    limit: int | None = None,
    depth: int | None = None,
    fusion: bool = True,
    record: Path | None = None,
    first_stages: tuple[str, ...] = FIRST_STAGES,
    rerankers: tuple[str, ...] = RERANKERS,
    vectors: Path | None = None,
) -> dict[str, Any]:
    """``all``: today's figures; ``retrieval``: every first stage × re-ranker on the first ``limit`` questions;
    ``ingest``: both embedding backends on the first ``limit`` passages (``ingest_suite``)."""
    from agent.retrieval.ingest import ingest

    if suite == "ingest":
        return {"ingest": ingest_suite(corpus, dataset, limit, vectors, log=log)}
    examples = load_examples(dataset, limit)
    results: dict[str, Any] = {}
    if suite == "retrieval":
        report = ingest(corpus, collection, progress=True)
        log(f"collection {collection}: {report.added} added, {report.skipped} already stored")
        results["retrieval_suite"] = retrieval_suite(
            collection,
            examples,
            first_stages=first_stages,
            rerankers=rerankers,
            depth=depth,
            fusion=fusion,
            record=record,
            log=log,
        )
        return results
    if suite != "all":
        raise ConfigError(f"unknown suite '{suite}': use all, retrieval or ingest")
    log("ingest rate …")
    results["ingest"] = ingest_rate(corpus)
    report = ingest(corpus, collection, progress=True)  # idempotent: a stored corpus costs one id lookup
    log(f"collection {collection}: {report.added} added, {report.skipped} already stored")
    log("retrieval latency …")
    results["retrieval"] = retrieval_latency(collection, [e.question for e in examples])
    log("orchestration overhead …")
    results["orchestration"] = orchestration_overhead(methods, [e.question for e in examples[:questions]], collection)
    if any(e.qa_pairs for e in examples):
        log("oracle MRecall@5 (gold disambiguations as DIVA's interpretations) …")
        results["oracle_mrecall"] = oracle_mrecall(collection, examples)
    if any(e.supporting_ids for e in examples):
        log(
            "SUNAR retrieval recall@10: BM25, NAR"
            + (f", NAR with ASU ({asu_llm})" if asu_llm else " (NAR with ASU needs --asu-llm)")
            + " …"
        )
        chosen = examples[nar_offset : nar_offset + nar_questions]
        results["nar_recall"] = nar_recall(collection, chosen, llm=asu_llm, record=nar_record) | {"offset": nar_offset}
    return results


def format_bench(results: dict[str, Any]) -> str:
    lines = ["## bench", ""]
    i = results.get("ingest")
    if i and "onnx" in i:
        lines.append(
            f"- embedding {i['passages']:,} passages: onnx (INT8) {i['onnx']['passages_per_s']} passages/s, torch "
            f"{i['torch']['passages_per_s']} passages/s ({i['speedup']}×); cosine onnx vs torch mean "
            f"{i['cosine_mean']}, min {i['cosine_min']}"
        )
        if "questions" in i:
            lines.append(
                f"- dense MRecall@5 on {i['questions']} questions: onnx {i['onnx']['mrecall@5']:.3f}, torch "
                f"{i['torch']['mrecall@5']:.3f}"
            )
    elif i:
        lines.append(
            f"- ingest ({i.get('backend', 'torch')}): {i['passages_per_s']} passages/s ({i['passages']} passages); "
            f"unchanged re-run {i['rerun_s']} s"
        )
    r = results.get("retrieval")
    if r:
        lines.append(
            f"- retrieval top-5 over {r['passages']:,} passages: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms ({r['queries']} queries)"
        )
    o = results.get("orchestration")
    if o:
        lines += ["", "| method | LLM calls | wall s | wall ÷ critical-path LLM time |", "|---|---|---|---|"]
        lines += [f"| {m} | {v['llm_calls']} | {v['wall_s']} | {v['wall_over_critical_path']} |" for m, v in o.items()]
    o = results.get("oracle_mrecall")
    if o:
        lines += [
            "",
            f"MRecall@5 on {o['questions']} questions: vanilla top-5 {o['vanilla_mrecall@5']:.3f} "
            f"(coverage {o['vanilla_coverage']:.3f}) vs DIVA retrieval with gold interpretations (oracle) "
            f"{o['diva_oracle_mrecall@5']:.3f} (coverage {o['diva_oracle_coverage']:.3f})",
        ]
    suite = results.get("retrieval_suite")
    if suite:
        first = next(iter(suite.values()))
        lines += [
            f"Retrieval on {first['questions']} questions (MRecall@5 / answer coverage; oracle = DIVA's retrieve + prune "
            "with the gold disambiguations; p50 seconds per question)",
            "",
            "| first stage | re-ranker | vanilla MRecall@5 | vanilla coverage | oracle MRecall@5 | oracle coverage "
            "| vanilla p50 s | oracle p50 s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['first_stage']} | {r['reranker']} | {r['vanilla_mrecall@5']:.3f} | {r['vanilla_coverage']:.3f} "
            f"| {r['diva_oracle_mrecall@5']:.3f} | {r['diva_oracle_coverage']:.3f} | {r['vanilla_p50_s']:.2f} "
            f"| {r['oracle_p50_s']:.2f} |"
            for r in suite.values()
        ]
    o = results.get("nar_recall")
    if o:
        shown = [("BM25", "bm25"), ("NAR without ASU", "nar"), ("NAR with ASU", "nar_asu")]
        lines += [
            "",
            f"Supporting-paragraph recall@10 on {o['questions']} questions"
            + (f" (from question {o['offset'] + 1})" if o.get("offset") else "")
            + ": "
            + ", ".join(f"{label} {o[key + '_recall@10']:.3f}" for label, key in shown if key + "_recall@10" in o),
        ]
        timing = [f"NAR {o['nar_seconds']:.1f} s"] + (
            [f"NAR with ASU {o['nar_asu_seconds']:.1f} s, {o['nar_asu_llm_calls']:g} LLM calls"]
            if "nar_asu_seconds" in o
            else []
        )
        lines.append("(per question: " + "; ".join(timing) + ")")
    for key, value in results.items():
        if key not in {"ingest", "retrieval", "orchestration", "oracle_mrecall", "nar_recall", "retrieval_suite"}:
            lines.append(f"- {key}: {json.dumps(value)}")
    return "\n".join(lines)
