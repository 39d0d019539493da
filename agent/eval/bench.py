"""``ambigqa bench``: LLM-free performance figures, one suite at a time (``run_bench``) and as markdown
(``format_bench``).

- ``all``: ingest rate, retrieval latency, orchestration overhead per method (``bench_ingest``, ``bench_retrieval``,
  ``bench_orchestration``) and, where the data has them, oracle MRecall@5 and SUNAR's NAR recall (``bench_nar``);
- ``retrieval``: every first stage × re-ranker (``bench_retrieval.retrieval_suite``);
- ``ingest``: the ONNX and torch encoders side by side (``bench_ingest.ingest_suite``);
- ``latency``: seconds to the first answer token and the whole answer per method, against its floor
  (``bench_latency.latency_suite``);
- ``scale``: each store at 100k and 1M passages (``agent.eval.scale``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.errors import ConfigError
from agent.eval.bench_ingest import format_ingest, ingest_rate, ingest_suite
from agent.eval.bench_latency import format_latency_suite, latency_suite, variants
from agent.eval.bench_nar import format_nar, nar_recall
from agent.eval.bench_orchestration import format_orchestration, orchestration_overhead
from agent.eval.bench_retrieval import (
    FIRST_STAGES,
    RERANKERS,
    format_latency,
    format_oracle,
    format_retrieval_suite,
    oracle_mrecall,
    retrieval_latency,
    retrieval_suite,
)
from agent.eval.datasets import Example, load_examples
from agent.registry import known_method

SECTIONS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "ingest": format_ingest,
    "retrieval": format_latency,
    "orchestration": format_orchestration,
    "oracle_mrecall": format_oracle,
    "retrieval_suite": format_retrieval_suite,
    "nar_recall": format_nar,
    "latency": format_latency_suite,
}


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
    nar_options: dict[str, Any] | None = None,
    suite: str = "all",
    limit: int | None = None,
    depth: int | None = None,
    fusion: bool = True,
    record: Path | None = None,
    first_stages: tuple[str, ...] = FIRST_STAGES,
    rerankers: tuple[str, ...] = RERANKERS,
    vectors: Path | None = None,
    offset: int = 0,
    llm: str = "local",
    settings: Sequence[tuple[str, str, Any]] = (),
) -> dict[str, Any]:
    """``all``: the everyday figures (``all_suite``); ``retrieval``: every first stage × re-ranker on the first
    ``limit`` questions; ``ingest``: both embedding backends on the first ``limit`` passages (``ingest_suite``);
    ``latency``: ``methods`` (variants ``LABEL=METHOD`` with ``settings``) on ``limit`` questions after ``offset``,
    rows to ``record``."""
    _check_inputs(suite, corpus, methods)
    if suite == "ingest":
        return {"ingest": ingest_suite(corpus, dataset, limit, vectors, log=log)}
    if suite == "latency":
        chosen = variants(methods, settings)
        examples = load_examples(dataset, limit or 30, offset)
        _store(corpus, collection, log)
        return {"latency": latency_suite(examples, chosen, collection, llm, record=record, log=log)}
    examples = load_examples(dataset, limit)
    if suite == "retrieval":
        _store(corpus, collection, log)
        results = retrieval_suite(
            collection,
            examples,
            first_stages=first_stages,
            rerankers=rerankers,
            depth=depth,
            fusion=fusion,
            record=record,
            log=log,
        )
        return {"retrieval_suite": results}
    return all_suite(
        corpus,
        collection,
        examples,
        methods,
        questions,
        nar_questions=nar_questions,
        nar_offset=nar_offset,
        asu_llm=asu_llm,
        nar_record=nar_record,
        nar_options=nar_options,
        log=log,
    )


def _check_inputs(suite: str, corpus: Path, methods: list[str]) -> None:
    """What would otherwise fail only after minutes of ingest and timing: an unknown suite or method, a missing corpus."""
    if suite not in ("all", "retrieval", "ingest", "latency"):
        raise ConfigError(f"unknown suite '{suite}': use all, retrieval, ingest, latency or scale")
    if not corpus.is_file():
        raise ConfigError(f"corpus file {corpus} does not exist")
    if suite == "all":
        for method in methods:
            known_method(method)


def all_suite(
    corpus: Path,
    collection: str,
    examples: list[Example],
    methods: list[str],
    questions: int = 3,
    *,
    nar_questions: int = 20,
    nar_offset: int = 0,
    asu_llm: str | None = None,
    nar_record: Path | None = None,
    nar_options: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Ingest rate, retrieval latency and the orchestration overhead of ``methods`` on the first ``questions``; with
    gold interpretations oracle MRecall@5; with supporting paragraphs NAR recall on ``nar_questions`` from
    ``nar_offset`` (with ASU given ``asu_llm``, recorded to ``nar_record``; SUNAR's ``nar_options`` on each NAR)."""
    log("ingest rate …")
    results: dict[str, Any] = {"ingest": ingest_rate(corpus)}
    _store(corpus, collection, log)
    log("retrieval latency …")
    results["retrieval"] = retrieval_latency(collection, [e.question for e in examples])
    log("orchestration overhead …")
    results["orchestration"] = orchestration_overhead(methods, [e.question for e in examples[:questions]], collection)
    if any(e.qa_pairs for e in examples):
        log("oracle MRecall@5 (gold disambiguations as DIVA's interpretations) …")
        results["oracle_mrecall"] = oracle_mrecall(collection, examples)
    if any(e.supporting_ids for e in examples):
        log(
            "SUNAR retrieval recall@10: BM25, BM25 + re-ranker, NAR"
            + (f", NAR with ASU ({asu_llm})" if asu_llm else " (NAR with ASU needs --asu-llm)")
            + " …"
        )
        chosen = examples[nar_offset : nar_offset + nar_questions]
        recall = nar_recall(collection, chosen, llm=asu_llm, record=nar_record, options=nar_options)
        results["nar_recall"] = recall | {"offset": nar_offset} | ({"options": nar_options} if nar_options else {})
    return results


def _store(corpus: Path, collection: str, log: Callable[[str], None]) -> None:
    """Ingests ``corpus`` into ``collection``; a stored corpus costs one id lookup."""
    from agent.retrieval.ingest import ingest

    report = ingest(corpus, collection, progress=True)
    log(f"collection {collection}: {report.summary()}")


def format_bench(results: dict[str, Any]) -> str:
    """Each suite's figures as markdown, in a fixed order; any other entry as JSON."""
    lines = ["## bench", ""]
    for key, section in SECTIONS.items():
        if results.get(key):
            lines += section(results[key])
    lines += [f"- {key}: {json.dumps(value)}" for key, value in results.items() if key not in SECTIONS]
    return "\n".join(lines)
