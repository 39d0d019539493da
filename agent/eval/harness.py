"""``ambigqa eval``: every method on the same questions with the same LLM, a run at a time or several at once.

Each finished (method, question) is appended to ``OUT/results.jsonl`` at once with its provenance (LLM, the method's
resolved options, dataset hash, commit), so a crash or Ctrl-C loses nothing and a re-run skips what is done with the
same settings (failed runs are retried; a changed option makes new rows): ``agent.eval.resume``. A row's metrics come
from ``agent.eval.scoring``; ``summary.json``/``summary.md``/``quality_vs_time.png`` are rewritten from the results
file at the end (``agent.eval.report``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from tqdm import tqdm

from agent.answer_step import AnswerReview
from agent.errors import AgentError, CollectionError, ConfigError, LLMCrashError, LLMUnavailableError, ModelFileError
from agent.eval import metrics as m
from agent.eval.checkpoints import FILE as CHECKPOINTS
from agent.eval.checkpoints import Checkpoints, RunCheckpoint, copy_checkpoints
from agent.eval.datasets import Example, load_examples
from agent.eval.provenance import Provenance, file_sha256, git_commit, llm_provenance, resolved_options, row_key
from agent.eval.report import summarize, write_reports
from agent.eval.resume import RowLog, read_rows
from agent.eval.scoring import grounded_metrics, score
from agent.schemas import RunResult

FATAL = (LLMUnavailableError, ConfigError, CollectionError, ModelFileError)  # every later run would fail too
# but not a crash of the embedded server: the next call starts a fresh one


class EvalConfig(BaseModel):
    dataset: Path
    methods: list[str]
    out: Path
    corpus: Path | None = None
    collection: str | None = None
    limit: int | None = None
    offset: int = Field(default=0, ge=0, description="questions skipped before the first one run")
    ids: list[str] | None = Field(default=None, description="only these questions (ids), e.g. to re-run a few")
    llm: str | None = None
    reader: str | None = Field(default=None, description="local extractive QA model dir for Disambig-F1 / DR")
    judge: str | None = Field(default=None, description="LLM judge for VerDICt's grounded metrics (opt-in)")
    options: dict[str, Any] = Field(default_factory=dict, description="context fields for every method")
    method_options: dict[str, dict[str, Any]] = Field(default_factory=dict, description="context fields per method")
    concurrency: int = Field(default=1, ge=1, le=64, description="questions run at once (the local model serialises)")
    baseline: str | None = Field(default=None, description="method the others are compared to; None: rag if run")
    bootstrap_samples: int = Field(default=1000, ge=100, le=100_000, description="resamples for the 95% intervals")
    checkpoints: bool = Field(default=False, description="keep every run's graph states in OUT for a later replay")
    replay: Path | None = Field(default=None, description="an eval made with checkpoints: its runs, from replay_at on")
    replay_at: str | None = Field(
        default=None, description="the node a replay starts at (run again, with what follows)"
    )

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
    replay = _checked_replay(config)
    llm = llm_provenance(config.llm)
    judge = llm_provenance(config.judge) if config.judge else None
    dataset = file_sha256(config.dataset) if config.dataset.is_file() else ""
    common = {
        "llm": llm, "judge": judge, "reader": config.reader, "dataset_sha256": dataset, "replay": replay,
        "commit": git_commit(),
    }  # fmt: skip
    return {
        method: Provenance(
            options=resolved_options(
                method, {"llm": config.llm or "", "collection": config.collection or "", **config.options_for(method)}
            ),
            **common,
        )
        for method in config.methods
    }


def _checked_replay(config: EvalConfig) -> dict[str, str] | None:
    """A replay's source and node for the provenance, once both are checked; None when this is no replay."""
    from agent.registry import load_graph

    if config.replay is None:
        if config.replay_at is not None:
            raise ConfigError("a node to replay from needs a run to replay (--replay RUN_DIR)")
        return None
    if not config.replay_at:
        raise ConfigError("name the node a replay starts at (--at NODE), e.g. verdict's answer")
    for method in config.methods:
        nodes = [n for n in load_graph(method).nodes if n != "__start__"]
        if config.replay_at not in nodes:
            raise ConfigError(f"{method} has no node '{config.replay_at}': choose one of {', '.join(nodes)}")
    if config.replay.resolve() == config.out.resolve():
        raise ConfigError("a replay writes to its own folder: give --out another one than the replayed run's")
    if not (config.replay / "results.jsonl").is_file():
        raise ConfigError(f"{config.replay} holds no results.jsonl: replay a folder an eval wrote")
    return {"source": str(config.replay.resolve()), "at": config.replay_at}


@dataclass
class Keeping:
    """Where an eval's runs keep their states (``agent.eval.checkpoints``) and, in a replay, the stored run each
    (method, question) starts from: its thread and its row's commit."""

    store: Checkpoints
    at: str | None = None
    stored: dict[tuple[str, str], tuple[str, str | None]] = field(default_factory=dict)

    def checkpoint(self, method: str, question_id: str) -> RunCheckpoint:
        if self.at is None:
            return self.store.new_run(method, question_id)
        return self.store.replay(self.stored[(method, question_id)][0], self.at)


def _keeping(config: EvalConfig) -> Keeping | None:
    """The eval's checkpoints: none, new ones, or a copy of the replayed run's with its stored threads."""
    if not (config.checkpoints or config.replay):
        return None
    path = config.out / CHECKPOINTS
    if config.replay is None:
        return Keeping(Checkpoints(path))
    copy_checkpoints(config.replay / CHECKPOINTS, path)
    stored = {
        (r["method"], r["id"]): (r["checkpoint_thread"], r.get("provenance", {}).get("commit"))
        for r in read_rows(config.replay / "results.jsonl")
        if "error" not in r and r.get("checkpoint_thread") and r["method"] in config.methods
    }  # a question run twice there (other settings) replays its last run
    return Keeping(Checkpoints(path), config.replay_at, stored)


def evaluate(config: EvalConfig, progress: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every method on every question not done yet with these settings; then the summary and its reports. In a
    replay, every question with a stored run."""
    examples, made_with = _prepare(config, progress, log)
    reader = _reader(config, examples, log)
    config.out.mkdir(parents=True, exist_ok=True)
    results_path = config.out / "results.jsonl"
    keys = {method: p.key for method, p in made_with.items()}
    keeping = _keeping(config)
    todo = _todo(examples, config.methods, keys, results_path, log)
    if keeping and keeping.at:
        unstored = sum((method, e.id) not in keeping.stored for e, method in todo)
        if unstored:
            log(f"{unstored} runs skipped: {config.replay} holds no finished run of them made with --checkpoints")
        todo = [(e, method) for e, method in todo if (method, e.id) in keeping.stored]
        log(f"replaying {len(todo)} stored runs of {config.replay} from node {config.replay_at} on")
    bar = tqdm(total=len(todo), unit="run", desc="eval", disable=not (progress and todo))
    try:
        write = _writer(RowLog(results_path), bar)
        if config.concurrency == 1:
            for example, method in todo:
                bar.set_postfix_str(f"{method} · {example.id}")
                write(_attempt(example, method, config, reader, made_with[method], keeping))
        else:
            _run_concurrently(todo, config, reader, made_with, write, keeping)
    finally:
        bar.close()
        if keeping:
            keeping.store.close()
        baseline = config.baseline or ("rag" if "rag" in config.methods else None)
        summary = summarize(
            results_path, config.methods, keys, baseline, made_with, config.method_options, config.bootstrap_samples
        )
        write_reports(summary, config.out)
    return summary


def _prepare(
    config: EvalConfig, progress: bool, log: Callable[[str], None]
) -> tuple[list[Example], dict[str, Provenance]]:
    """The questions and each method's provenance, the corpus ingested first when one is given."""
    made_with = provenances(config)
    examples = load_examples(config.dataset, config.limit, config.offset, config.ids)
    if config.corpus is not None:
        from agent.retrieval.ingest import ingest

        config.collection = config.collection or config.corpus.parent.name
        report = ingest(config.corpus, config.collection, progress=progress)
        log(f"collection {config.collection}: {report.summary()}")
        made_with = provenances(config)  # the collection is named from here on
    return examples, made_with


def _reader(config: EvalConfig, examples: list[Example], log: Callable[[str], None]) -> m.Reader | None:
    """The extractive QA reader when one is configured; says which ASQA metrics stay off."""
    reader = m.hf_reader(config.reader) if config.reader else None
    if reader is None and examples and examples[0].kind == "asqa":
        log("Disambig-F1 and DR skipped: no extractive QA reader configured (--reader MODEL_DIR)")
    if examples and examples[0].kind == "asqa" and not config.judge:
        log("grounded metrics (G-Precision/G-Recall/G-F1) off: name an LLM judge to turn them on (--judge LLM)")
    return reader


def _todo(
    examples: list[Example], methods: list[str], keys: dict[str, str], results_path: Path, log: Callable[[str], None]
) -> list[tuple[Example, str]]:
    """The (question, method) runs without a finished row made with the method's current provenance key."""
    rows = read_rows(results_path)
    done = {(r["method"], r["id"]) for r in rows if "error" not in r and row_key(r) == keys.get(r["method"])}
    todo = [(e, method) for e in examples for method in methods if (method, e.id) not in done]
    if done:
        log(f"resuming: {len(done)} runs already in {results_path}, {len(todo)} to go")
    other = sum(r["method"] in keys and row_key(r) != keys[r["method"]] for r in rows)
    if other:
        log(f"{other} rows in {results_path} were made with other settings: kept, not reused or summarised")
    return todo


def _writer(results: RowLog, bar: tqdm) -> Callable[[dict[str, Any]], None]:
    """Appends each finished row to the results file and moves the progress bar on."""

    def write(row: dict[str, Any]) -> None:
        results.append(row)
        bar.set_postfix_str(f"{row['method']} · {row['id']}")
        bar.update(1)

    return write


def _run_concurrently(
    todo: list[tuple[Example, str]],
    config: EvalConfig,
    reader: m.Reader | None,
    made_with: dict[str, Provenance],
    write: Callable[[dict[str, Any]], None],
    keeping: Keeping | None,
) -> None:
    """``config.concurrency`` runs at once; rows are written as they finish; a fatal error stops the rest."""
    pending = iter(todo)
    with ThreadPoolExecutor(config.concurrency, thread_name_prefix="eval") as pool:
        running: set[Future] = set()
        try:
            while True:
                for example, method in pending:
                    running.add(pool.submit(_attempt, example, method, config, reader, made_with[method], keeping))
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


def _attempt(
    example: Example,
    method: str,
    config: EvalConfig,
    reader: m.Reader | None,
    provenance: Provenance,
    keeping: Keeping | None = None,
) -> dict[str, Any]:
    """One run's row; a run-level error becomes an error row (retried on resume), a fatal one is raised."""
    try:
        return run_one(example, method, config, reader, provenance, keeping)
    except LLMCrashError as exc:
        return _error_row(example, method, provenance, exc)
    except FATAL:
        raise
    except AgentError as exc:
        return _error_row(example, method, provenance, exc)


def _error_row(example: Example, method: str, provenance: Provenance, exc: Exception) -> dict[str, Any]:
    error = {"method": method, "id": example.id, "question": example.question, "error": str(exc)}
    return error | {"provenance": {"key": provenance.key}}


def run_one(
    example: Example,
    method: str,
    config: EvalConfig,
    reader: m.Reader | None,
    provenance: Provenance,
    keeping: Keeping | None = None,
) -> dict[str, Any]:
    """One run of ``method`` on ``example``: its answer, interpretations, passages, metrics, cost and provenance.
    In a replay the cost's calls and tokens count the stored steps too; its seconds are the replay's."""
    from agent.runner import run

    critical = CriticalPath()
    given = example.given_passages()  # a RAMDocs question is answered over its own documents
    reading: dict[str, Any] = {"passages": given} if given and method != "closed_book" else {}
    checkpoint = keeping.checkpoint(method, example.id) if keeping else None
    result = run(
        example.question,
        method=method,
        llm=config.llm,
        collection=config.collection,
        on_node=critical,
        checkpoint=checkpoint,
        **config.options_for(method),
        **reading,
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
        "records": records(result),
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
    if checkpoint:
        row["checkpoint_thread"] = checkpoint.thread_id
    if keeping and keeping.at:
        row["replayed"] = {"at": keeping.at, "source_commit": keeping.stored[(method, example.id)][1]}
    row["provenance"] = {"key": provenance.key, **provenance.model_dump()}
    return row


def details(result: RunResult) -> dict[str, Any]:
    """Method-specific figures from the final state: numbers and short labels as they are, the answer step's review as
    one figure per check and fallback, lists as their length,
    and the lists of numbers their records hold, joined under ``LIST.FIELD`` (SUNAR's ``hops.semantic_sets``: ASU's
    semantic-set count of every NAR batch)."""
    out: dict[str, Any] = {}
    for key, value in result.extra.items():
        if isinstance(value, AnswerReview):  # the answer step: each check's and fallback's 0/1, so means are rates
            out.update({f"{key}.{name}": figure for name, figure in value.figures().items()})
        elif isinstance(value, bool | int | float) or (
            isinstance(value, str) and len(value) <= 80 and key not in RECORDED
        ):
            out[key] = value
        elif isinstance(value, list):
            out[f"{key}_count"] = len(value)
            out.update(_number_lists(key, value))
    return out


RECORDED = ("answers", "rejected_ids", "conflicts", "hops", "reasoning")


def records(result: RunResult) -> dict[str, Any]:
    """The decisions a row's metrics read and a reader needs to trace it, as they are: MADAM's answers with their
    documents and its rejected documents, the conflict step's conflicts (answers, the kept ones, the rule that kept
    them, the passages dropped), SUNAR's reasoning path (each hop's sub-question, answer, reasoning and evidence), and
    the reasoning behind a short answer (SUNAR's MER, rag's ``answer_style=short``)."""
    kept: dict[str, Any] = {}
    for key in RECORDED:
        value = result.extra.get(key)
        if isinstance(value, list):
            kept[key] = [item.model_dump() if isinstance(item, BaseModel) else item for item in value]
        elif isinstance(value, str) and value:
            kept[key] = value
    return kept


def _number_lists(key: str, items: list[Any]) -> dict[str, list[int | float]]:
    """``{"KEY.FIELD": [...]}``: the non-empty lists of numbers in ``items``' fields, concatenated in order."""
    joined: dict[str, list[int | float]] = {}
    for item in items:
        fields = item.model_dump() if isinstance(item, BaseModel) else item if isinstance(item, dict) else {}
        for name, value in fields.items():
            if isinstance(value, list) and value and all(_is_number(v) for v in value):
                joined.setdefault(f"{key}.{name}", []).extend(value)
    return joined


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
