"""Command line: ask, doctor, retrieve, ingest, postgres, eval, bench, serve, load (also ``python -m agent``); heavy
imports per command."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agent.registry import METHODS, known_method
from agent.surfaces import printing
from agent.surfaces.printing import err, fail, log, out

if TYPE_CHECKING:
    from agent.retrieval.store_server import StoreServer
    from agent.settings import Settings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Answer ambiguous questions with retrieval-augmented LLM agents.",
    pretty_exceptions_show_locals=False,  # a traceback's locals may hold a database URL with its password
)  # fmt: skip

# read by Chroma and the tokenizers, in this process and in the servers it starts
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@app.callback()
def store_option(
    store: str | None = typer.Option(
        None,
        "--store",
        envvar="AMBIGQA_DATABASE_URL",
        help="PostgreSQL URL (postgresql://user:password@host:5432/db) for passages and clarify threads; unset: the "
        "embedded Chroma store and SQLite",
    ),
) -> None:
    """Answer ambiguous questions with retrieval-augmented LLM agents."""
    if store:  # every command, and the server it starts, read the store from the process's settings
        from agent.errors import AgentError
        from agent.settings import get_settings, use_settings

        try:
            use_settings(get_settings().replace(database_url=store))
        except AgentError as exc:  # a malformed URL: one line, its password hidden
            fail(str(exc))


@app.command()
def ask(
    question: str | None = typer.Argument(None, help="The (possibly ambiguous) question."),
    method: str = typer.Option(
        "rag", "--method", "-m", help="closed_book | rag | diva | toc | verdict | sunar | madam | router"
    ),
    llm: str | None = typer.Option(None, "--llm", help="local (default) | openai | fake"),
    collection: str | None = typer.Option(None, "--collection", "-c", help="Chroma collection (default: demo)"),
    top_k: int | None = typer.Option(
        None, "--top-k", help="passages to retrieve, where the method retrieves (default: the method's)"
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="FIELD=VALUE, one of the method's options; repeatable (e.g. --set temperature=0)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the whole result as JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no live progress"),
    stream: bool = typer.Option(
        True, "--stream/--no-stream", help="show the answer on stderr as the model writes it (--no-stream: wait)"
    ),
    clarify: bool = typer.Option(
        False, "--clarify", help="router: stop at the interpretations and let you pick; prints a resumable thread id"
    ),
    resume: str | None = typer.Option(None, "--resume", help="continue a --clarify thread (QUESTION is not needed)"),
    pick: str | None = typer.Option(
        None, "--pick", help="with --clarify/--resume: the interpretations to answer, e.g. 1,3"
    ),
    passages: Path | None = typer.Option(
        None, "--passages", help="JSONL of {id, title, text}: read these instead of retrieving", show_default=False
    ),
) -> None:
    """Answer QUESTION, showing each graph node as it finishes."""
    from agent.errors import AgentError
    from agent.questions import validate_question

    if clarify or resume:
        try:
            _ask_clarify(question, llm, collection, quiet, as_json, resume, pick)
        except AgentError as exc:
            fail(str(exc))
        return
    if question is None:
        fail("give a QUESTION (or --resume THREAD)")
    options = _run_options(settings, top_k)
    try:
        question = validate_question(question)  # before the header and the heavy imports: a bad one fails at once
        known_method(method)
        from agent.runner import run

        if not quiet:
            printing.print_asking(method, question)
        if passages is not None:
            from agent.retrieval.passage_set import read_passages

            options["passages"] = read_passages(passages)
        live = printing.LiveRun(quiet, stream=stream)
        result = run(
            question, method=method, llm=llm, collection=collection, on_node=live.node,
            on_token=live.token if live.stream else None, **options,
        )  # fmt: skip
    except AgentError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", 130)
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    printing.print_result(result)


def _run_options(settings: list[str], top_k: int | None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` as options (a VALUE that parses as JSON is that value, else the text), and ``--top-k``."""
    options: dict[str, Any] = {}
    for text in settings:
        field, sep, raw = text.partition("=")
        if not sep or not field.strip():
            fail(f"--set '{text}' is not FIELD=VALUE (e.g. --set top_k=3)")
        try:
            options[field.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            options[field.strip()] = raw
    if top_k is not None:
        options["top_k"] = top_k
    return options


def _ask_clarify(
    question: str | None, llm: str | None, collection: str | None, quiet: bool, as_json: bool, resume: str | None,
    pick: str | None,
) -> None:  # fmt: skip
    """The router in clarify mode (``agent.clarify``): it stops at the interpretations; pick at the prompt, or (with
    --json, for a script) later with ``ask --resume THREAD --pick 1,3`` (``agent.resume``)."""
    from agent import runner

    progress = printing.progress(quiet, timed=False)
    if resume:
        result = runner.resume(resume, _picks(pick or ""), on_node=progress)
    else:
        result = runner.clarify(question or "", llm=llm, collection=collection, on_node=progress)
        err.print(f"[dim]thread {result.thread_id}[/]", highlight=False)
    if result.status == "needs_choice":
        if pick is None and as_json:  # a script: report the choice to make, resume later
            print(result.model_dump_json(indent=2, exclude_none=True))
            return
        if pick is None:
            pick = _choose(result.interpretations)
        result = runner.resume(result.thread_id, _picks(pick), on_node=progress)
    if as_json:
        print(result.model_dump_json(indent=2, exclude_none=True))
        return
    printing.print_clarified(result)


def _choose(interpretations: list[str]) -> str:
    """The interpretations to answer, as the person types them at the prompt (Enter or end of input: all)."""
    printing.print_interpretations(interpretations)
    try:
        return typer.prompt("Answer which? (numbers, comma-separated; Enter for all)", default="", show_default=False)
    except (typer.Abort, EOFError):
        return ""


def _picks(text: str) -> list[int]:
    """``1,3`` or ``1 3`` as numbers; nothing (Enter) picks every interpretation."""
    return [int(p) for p in text.replace(",", " ").split() if p.isdigit()]


@app.command()
def doctor(
    llm: str | None = typer.Option(None, "--llm", help="local (default) | openai | fake"),
    compare_repack: bool = typer.Option(
        False, "--compare-repack", help="also measure a second embedded server with weight repacking the other way"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON on stdout"),
) -> None:
    """Check the model file, the LLM, the embeddings and the store, in that order, with timings; stop at the first
    failure (exit code 1)."""
    from agent.doctor import run_checks
    from agent.settings import get_settings

    settings = get_settings().replace(llm=llm or None)
    report = run_checks(settings, compare_repack, on_check=None if as_json else printing.print_check)
    if as_json:
        print(report.model_dump_json(indent=2))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def retrieve(
    question: str = typer.Argument(..., help="The question to retrieve passages for."),
    collection: str | None = typer.Option(None, "--collection", "-c", help="Chroma collection (default: demo)"),
    k: int = typer.Option(5, "-k", "--k", min=1, max=1000, help="passages to return"),
    first_stage: str | None = typer.Option(None, "--first-stage", help="dense | bm25 | hybrid (default: dense)"),
    reranker: str | None = typer.Option(None, "--reranker", help="none | cross-encoder (default) | colbert"),
    fusion: bool | None = typer.Option(
        None, "--fusion/--no-fusion", help="fuse the re-ranked order with the first stage's (default: fused)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the passages as JSON on stdout"),
) -> None:
    """Show the passages the default retrieval pipeline finds for QUESTION (what rag reads), best first."""
    from agent.errors import AgentError
    from agent.questions import validate_question

    chosen = {"first_stage": first_stage, "reranker": reranker, "rerank_fusion": fusion}
    options = {k_: v for k_, v in chosen.items() if v is not None}
    try:
        validate_question(question)  # a bad question fails before the retrieval stack loads
        from agent.runner import search

        passages = search(question, k=k, collection=collection, **options)
    except AgentError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps([p.model_dump() for p in passages], indent=2, ensure_ascii=False))
        return
    printing.print_passages(passages)


@app.command()
def passages(
    ids: list[str] = typer.Argument(..., help="passage ids, e.g. the ones an answer cites"),
    collection: str | None = typer.Option(None, "--collection", "-c", help="Chroma collection (default: demo)"),
    as_json: bool = typer.Option(False, "--json", help="print the passages as JSON on stdout"),
) -> None:
    """Show the stored passages with these ids, whole: what a cited id stands for."""
    from agent.errors import AgentError
    from agent.runner import lookup

    try:
        found = lookup(ids, collection=collection)
    except AgentError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps([p.model_dump(exclude={"score"}) for p in found], indent=2, ensure_ascii=False))
        return
    printing.print_passages(found, whole=True)


@app.command()
def ingest(
    corpus: Path = typer.Argument(..., help="JSONL file, one {id, title, text} passage per line"),
    collection: str = typer.Option(..., "--collection", "-c", help="collection to create or extend"),
    batch_size: int = typer.Option(128, "--batch-size", min=1, max=4096, help="passages embedded and stored at a time"),
    prune: bool = typer.Option(False, "--prune", help="remove stored passages whose id is no longer in the file"),
    vectors: Path | None = typer.Option(
        None, "--vectors", help="Parquet file of precomputed vectors (columns id, vector; the corpus's order)"
    ),
) -> None:
    """Sync a corpus into a collection: new passages are embedded and stored, unchanged ones skipped, an edited one
    (same id, new text) replaces its old version, an id listed again with another text is stored as ID#2, …; --prune
    removes the ones that left the file. Streams the file in
    batches; an interrupted ingest continues where it stopped when run again."""
    from agent.errors import AgentError
    from agent.retrieval.ingest import ingest as run_ingest

    try:
        report = run_ingest(corpus, collection, batch_size=batch_size, progress=True, prune=prune, vectors=vectors)
    except AgentError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted; passages stored so far are kept and a re-run continues from there", 130)
    rate = f", {report.passages_per_s:.1f} passages/s" if report.added else ""
    changes = "".join(f"; {change}" for change in report.id_changes())
    out.print(
        f"{report.collection}: {report.added} added ({report.updated} new versions), {report.removed} removed, "
        f"{report.skipped} already stored, {report.records} records in {report.seconds:.1f}s{rate}{changes}",
        highlight=False,
    )


def _require_free_port(host: str, port: int) -> None:
    """Fail with one line, before anything starts, where HOST:PORT cannot be listened on (taken, or not an address
    of this machine); the server would otherwise start its store and app first and then stop with a bind error."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
            probe.bind(address)
    except OSError as exc:
        option = "--port" if exc.errno == errno.EADDRINUSE else "--host"
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another {option}")


def _comma_list(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


@app.command("eval")
def eval_command(
    dataset: Path = typer.Option(
        ..., "--dataset", help="ASQA-style (qa_pairs, long_answers) or HotpotQA-style (answers) JSONL"
    ),
    corpus: Path | None = typer.Option(None, "--corpus", help="passages JSONL; ingested (idempotently) first"),
    collection: str | None = typer.Option(
        None, "--collection", "-c", help="collection (default: the corpus folder's name)"
    ),
    methods: str = typer.Option("closed_book,rag", "--methods", help="comma-separated methods"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="first N questions (after --offset)"),
    offset: int = typer.Option(0, "--offset", min=0, help="skip the dataset's first N questions (e.g. a tuning split)"),
    ids: str | None = typer.Option(
        None,
        "--ids",
        help="comma-separated question ids: only those, within --offset/--limit when given (e.g. to re-run a few)",
    ),
    llm: str | None = typer.Option(None, "--llm", help="local (default) | openai | fake"),
    out: Path = typer.Option(
        Path("runs/eval"), "--out", help="results.jsonl, summary.json, summary.md, quality_vs_time.png"
    ),
    reader: str | None = typer.Option(None, "--reader", help="local extractive QA model dir for Disambig-F1 and DR"),
    judge: str | None = typer.Option(
        None,
        "--judge",
        help="LLM judge for VerDICt's grounded metrics on ASQA-style data (default: none, no grounded metrics)",
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="METHOD.FIELD=VALUE, a method's option; repeatable (e.g. sunar.asu=false)"
    ),
    concurrency: int = typer.Option(
        1, "--concurrency", min=1, max=64, help="questions at once (1 for the local model; more for a remote endpoint)"
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", help="method the others are compared to, paired (default: rag when it is run)"
    ),
    checkpoints: bool = typer.Option(
        False, "--checkpoints", help="keep every run's graph states (OUT/checkpoints.sqlite) for a later --replay"
    ),
    replay: Path | None = typer.Option(
        None, "--replay", help="an eval folder made with --checkpoints: run its stored runs again from --at NODE on"
    ),
    replay_at: str | None = typer.Option(
        None, "--at", help="the node a --replay starts at, e.g. answer (verdict), rag_generate (rag), generate (toc)"
    ),
) -> None:
    """Run methods side by side on a dataset; resumable (finished runs with the same settings in OUT/results.jsonl are
    skipped). The summary gives 95% bootstrap intervals and paired differences to the baseline. With --replay, the
    stored runs of another eval go on from one node with today's code and options: the steps before it are not run
    again."""
    from agent.errors import AgentError
    from agent.eval.harness import EvalConfig, evaluate, parse_setting

    try:
        method_options: dict[str, dict] = {}
        for text in settings:
            method, field, value = parse_setting(text)
            method_options.setdefault(method, {})[field] = value
        config = EvalConfig(
            dataset=dataset, corpus=corpus, collection=collection, methods=_comma_list(methods), limit=limit, offset=offset,
            ids=_comma_list(ids) if ids else None,
            llm=llm, out=out, reader=reader, judge=judge, method_options=method_options, concurrency=concurrency,
            baseline=baseline, checkpoints=checkpoints, replay=replay, replay_at=replay_at,
        )  # fmt: skip
    except AgentError as exc:
        fail(str(exc))
    try:
        evaluate(config, log=log)
    except AgentError as exc:
        kept = out / "results.jsonl"
        fail(f"{exc} (finished runs are kept in {kept})" if kept.is_file() else str(exc))
    except KeyboardInterrupt:
        fail(f"interrupted; finished runs are kept in {out / 'results.jsonl'} and a re-run resumes", 130)
    out_text = (out / "summary.md").read_text()
    print(out_text)
    err.print(f"[dim]written: {out}/results.jsonl, summary.json, summary.md, quality_vs_time.png[/]", highlight=False)


@app.command()
def bench(
    corpus: Path = typer.Option(Path("../shared/data/asqa/corpus.jsonl"), "--corpus", help="passages JSONL"),
    dataset: Path = typer.Option(Path("../shared/data/asqa/dev.jsonl"), "--dataset", help="questions JSONL"),
    collection: str = typer.Option("asqa", "--collection", "-c", help="collection the corpus is ingested into"),
    methods: str = typer.Option(
        "closed_book,rag,diva,toc,verdict,sunar",
        "--methods",
        help="comma-separated methods for the orchestration figure; latency suite: methods or variants LABEL=METHOD",
    ),
    questions: int = typer.Option(3, "--questions", min=1, help="questions per method for the orchestration figure"),
    out: Path | None = typer.Option(None, "--out", help="also write the figures as JSON here"),
    nar_questions: int = typer.Option(
        20, "--nar-questions", min=1, help="HotpotQA-style data: questions for SUNAR's retrieval recall"
    ),
    asu_llm: str | None = typer.Option(
        None, "--asu-llm", help="also measure NAR with ASU using this LLM (the one figure that needs an LLM)"
    ),
    nar_offset: int = typer.Option(
        0, "--nar-offset", min=0, help="skip this many questions first (to split a long ASU run)"
    ),
    settings: list[str] = typer.Option(
        [],
        "--set",
        help="sunar.FIELD=VALUE, SUNAR's option for the NAR figures; latency suite: LABEL.FIELD=VALUE, a variant's "
        "option; repeatable (e.g. sunar.samples=5, fixed.demo_selection=fixed)",
    ),
    suite: str = typer.Option(
        "all",
        "--suite",
        help="all (the figures above) | retrieval (every first stage × re-ranker, MRecall@5, p50) | ingest (onnx vs "
        "torch embeddings: passages/s, MRecall@5) | latency (--methods, or variants LABEL=METHOD, on --limit "
        "questions after --offset: seconds to the first answer token and to the whole answer, tokens, quality, each "
        "against the method's floor) | scale (each store at --sizes passages: ingest, index, latency, recall, memory)",
    ),
    offset: int = typer.Option(0, "--offset", min=0, help="latency suite: skip the dataset's first N questions"),
    llm: str = typer.Option("local", "--llm", help="latency suite: local (floors need its rates) | openai | fake"),
    sizes: str = typer.Option("100000,1000000", "--sizes", help="scale suite: corpus sizes"),
    remeasure: bool = typer.Option(
        False, "--remeasure", help="scale suite: latency, memory and recall again over the stores already loaded"
    ),
    stores: str = typer.Option(
        "chroma,postgres",
        "--stores",
        help="scale suite: stores (PostgreSQL: --store URL, else a local one from pgserver)",
    ),  # fmt: skip
    corpora: str = typer.Option(
        "../shared/data/asqa/corpus.jsonl,../shared/data/hotpotqa/corpus.jsonl",
        "--corpora",
        help="scale suite: the real passages the distractors are made from",
    ),
    limit: int | None = typer.Option(
        None,
        "--limit",
        min=1,
        help="retrieval suite: first N questions; ingest suite: first N passages (default all); latency suite: N "
        "questions (default 30)",
    ),
    depth: int | None = typer.Option(None, "--depth", min=1, help="retrieval suite: passages each re-ranker scores"),
    first_stages: str = typer.Option("dense,bm25,hybrid", "--first-stages", help="retrieval suite: first stages"),
    rerankers: str = typer.Option("none,cross-encoder,colbert", "--rerankers", help="retrieval suite: re-rankers"),
    fusion: bool = typer.Option(
        True, "--fusion/--no-fusion", help="retrieval suite: re-ranked order fused with the first stage's (default)"
    ),
) -> None:
    """LLM-free performance: ingest passages/s, retrieval p50/p95, orchestration overhead per method; on HotpotQA-style
    data also SUNAR's recall@10 for BM25 vs NAR (and NAR with ASU given --asu-llm). With --out, the recall figures
    of each question go to OUT's .nar.jsonl as they come, and a re-run resumes from there. ``--suite retrieval``
    measures MRecall@5 and answer coverage, vanilla and oracle-diversified, with p50 latency, for dense / BM25 /
    hybrid × no re-ranker / cross-encoder / ColBERT; with --out each configuration goes to OUT's .retrieval.jsonl.
    ``--suite ingest`` embeds the same passages with the ONNX INT8 and the torch encoder (passages/s each) and, on
    the whole ASQA corpus, reports each one's MRecall@5; with --out the vectors go to OUT's .vectors/ and a re-run
    resumes. ``--suite scale`` loads each store with the real passages plus generated distractors up to each size
    and measures ingest, index build, dense/sparse/hybrid latency at 1 and 8 clients, HNSW recall@10 and the serving
    process's memory; its data and results go to OUT's .scale/ (default $AMBIGQA_HOME/bench-scale) and a re-run
    skips what is measured."""
    from agent.errors import AgentError
    from agent.eval.bench import format_bench, run_bench
    from agent.eval.harness import parse_setting

    try:
        if suite == "scale":
            results, table = _scale_suite(out, dataset, corpora, sizes, stores, remeasure)
        else:
            results = run_bench(
                corpus, dataset, collection, _comma_list(methods), questions,
                log=log, nar_questions=nar_questions, asu_llm=asu_llm,
                nar_offset=nar_offset, nar_record=out.with_suffix(".nar.jsonl") if out else None, suite=suite,
                nar_options=_sunar_settings(settings) if suite != "latency" else None,
                settings=[parse_setting(text) for text in settings] if suite == "latency" else (),
                offset=offset, llm=llm,
                limit=limit, depth=depth, fusion=fusion, record=out.with_suffix(f".{suite}.jsonl") if out else None,
                first_stages=tuple(_comma_list(first_stages)), rerankers=tuple(_comma_list(rerankers)),
                vectors=out.with_suffix(".vectors") if out else None,
            )  # fmt: skip
            table = format_bench(results)
    except AgentError as exc:
        fail(str(exc))
    _report(results, out, table)


def _sunar_settings(settings: list[str]) -> dict[str, Any]:
    """``bench --set``: SUNAR's options, each ``sunar.FIELD=VALUE``."""
    from agent.errors import ConfigError
    from agent.eval.harness import parse_setting

    options: dict[str, Any] = {}
    for text in settings:
        method, field, value = parse_setting(text)
        if method != "sunar":
            raise ConfigError(f"bench --set takes SUNAR's options (sunar.FIELD=VALUE), not {method}'s")
        options[field] = value
    return options


def _scale_suite(
    out: Path | None, dataset: Path, corpora: str, sizes: str, stores: str, remeasure: bool
) -> tuple[dict[str, Any], str]:
    """``bench --suite scale``: its figures and their table; data and results under OUT's .scale/ or the home's."""
    from agent.eval.datasets import load_examples
    from agent.eval.scale import format_scale, scale_suite
    from agent.settings import get_settings

    results = scale_suite(
        out.with_suffix(".scale") if out else get_settings().home / "bench-scale",
        [Path(c) for c in _comma_list(corpora)], [e.question for e in load_examples(dataset)],
        sizes=tuple(int(n) for n in _comma_list(sizes)), stores=tuple(_comma_list(stores)),
        database_url=get_settings().database_url, remeasure=remeasure, log=log,
    )  # fmt: skip
    return results, format_scale(results)


def _report(results: dict[str, Any], out: Path | None, table: str) -> None:
    """A benchmark's figures: as JSON to ``out`` when given, and as a table on stdout."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2))
    print(table)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", help="port to listen on"),
    llm: str | None = typer.Option(None, "--llm", help="local (default) | openai | fake (scripted, for tests)"),
    collection: str | None = typer.Option(
        None, "--collection", "-c", help="collection a request reads unless it names one (default: settings, demo)"
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="AMBIGQA_API_KEY", help="require this X-API-Key header"
    ),
    max_concurrent: int = typer.Option(4, "--max-concurrent", min=1, help="graph runs at once; more wait, then 503"),
    queue_timeout: float = typer.Option(30.0, "--queue-timeout", min=0, help="seconds a request waits for a slot"),
    max_body_bytes: int = typer.Option(64_000, "--max-body-bytes", min=256, help="largest request body (then 413)"),
    body_timeout: float = typer.Option(10.0, "--body-timeout", min=0.1, help="seconds a client has to send its body"),
    request_timeout: float = typer.Option(
        600.0, "--request-timeout", min=1, help="deadline of one request's graph runs (then 504)"
    ),
    collections: str | None = typer.Option(
        None, "--collections", help="comma-separated collections a request may name (default: the one served)"
    ),
    options: str | None = typer.Option(
        None, "--options", help="comma-separated options a request may set (default: every method option but llm)"
    ),
    store_sharing: bool = typer.Option(
        True,
        "--store-server/--no-store-server",
        help="run the embedded store as a loopback Chroma server that ingest and other processes share",
    ),
    allowed_hosts: str | None = typer.Option(
        None,
        "--allowed-hosts",
        help="comma-separated host names clients use (Host and Origin headers); loopback and --host always; '*': any",
    ),
    header_timeout: float = typer.Option(
        10.0, "--header-timeout", min=0.1, help="seconds a client has to send a request's headers"
    ),
    insecure: bool = typer.Option(
        False,
        "--insecure",
        help="allow a --host other than loopback without --api-key (anyone who reaches it runs graphs)",
    ),
) -> None:
    """Serve every graph over HTTP with LangServe (/METHOD/invoke, /batch, /stream, schemas), /health and /login."""
    from agent.surfaces.guard import is_loopback

    if not is_loopback(host) and not api_key and not insecure:
        fail(f"--host {host} exposes the server beyond this machine: set --api-key (or AMBIGQA_API_KEY), or --insecure")
    _require_free_port(host, port)
    import uvicorn

    from agent.errors import AgentError
    from agent.settings import get_settings
    from agent.surfaces.header_deadline import with_header_deadline
    from agent.surfaces.server import create_app

    settings = get_settings().replace(llm=llm or None, collection=collection or None)
    store_server = None
    if store_sharing and not settings.chroma_url and not settings.database_url:
        try:
            settings, store_server = _share_store(settings)
        except AgentError as exc:
            fail(str(exc))
    try:
        app_ = create_app(
            settings, api_key=api_key, max_concurrent=max_concurrent, queue_timeout=queue_timeout,
            max_body_bytes=max_body_bytes, body_timeout=body_timeout, request_timeout=request_timeout,
            collections=_served(collections, collection),
            options=frozenset(_comma_list(options)) if options else None,
            allowed_hosts=_allowed_hosts(host, allowed_hosts),
        )  # fmt: skip
        printing.print_serving(METHODS, f"http://{host}:{port}", settings)
        if host in ("0.0.0.0", "::") and not allowed_hosts:
            err.print("note: requests must name a loopback host; list the names clients use: --allowed-hosts NAME")
        # uvicorn re-raises SIGTERM after its graceful shutdown: make that an exit, so the store server stops too
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        uvicorn.run(app_, host=host, port=port, log_level="warning", http=with_header_deadline(header_timeout))
    finally:
        if store_server:
            store_server.stop()


def _share_store(settings: Settings) -> tuple[Settings, StoreServer | None]:
    """The embedded store as one loopback Chroma server for this server and any ingest beside it: the one another
    server registered, else one started here (the caller stops it)."""
    from agent.retrieval.store_server import StoreServer, registered_url

    url, started = registered_url(settings.chroma_path), None
    if not url:
        started = StoreServer(settings.chroma_path)
        url = started.start()
    return settings.replace(chroma_url=url), started


def _allowed_hosts(host: str, listed: str | None) -> tuple[str, ...]:
    """The Host/Origin names a request may use: loopback, the address listened on (not a wildcard), and ``listed``."""
    from agent.surfaces.guard import LOOPBACK_HOSTS

    bound = () if host in ("0.0.0.0", "::", "") else (host.strip("[]").lower(),)
    names = [name.lower() for name in _comma_list(listed or "")]
    return tuple(dict.fromkeys((*LOOPBACK_HOSTS, *bound, *names)))


def _served(collections: str | None, collection: str | None) -> tuple[str, ...] | None:
    """The collections a request may name, the served one first; None: only the settings' collection."""
    served = tuple(_comma_list(collections or ""))
    if served and collection and collection not in served:
        served = (collection, *served)
    return served or None


@app.command()
def mcp(
    llm: str | None = typer.Option(None, "--llm", help="local (default) | openai | fake"),
    collection: str | None = typer.Option(None, "--collection", "-c", help="the collection every tool reads"),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio"
    ),
    methods: str = typer.Option(",".join(METHODS), "--methods", help="comma-separated methods to expose"),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="AMBIGQA_API_KEY",
        help="over HTTP, require this key (X-API-Key header or Authorization: Bearer)",
    ),
    max_concurrent: int = typer.Option(
        4, "--max-concurrent", min=1, help="graph runs at once; more wait, then a tool error"
    ),
    queue_timeout: float = typer.Option(30.0, "--queue-timeout", min=0, help="seconds a call waits for a slot"),
) -> None:
    """Serve every method as an MCP tool (ask_rag, ask_diva, ...) over stdio, or streamable HTTP on loopback."""
    if port is not None:
        _require_free_port("127.0.0.1", port)
    from agent.errors import AgentError
    from agent.registry import load_graph
    from agent.surfaces.mcp_server import Runs, build_server, http_app

    try:
        chosen = tuple(_comma_list(methods))
        for method in chosen:
            load_graph(method)
        server = build_server(llm, collection, chosen, Runs(max_concurrent, queue_timeout))
    except AgentError as exc:
        fail(str(exc))
    if port is None:
        server.run("stdio")
        return
    import uvicorn

    err.print(f"MCP over streamable HTTP on http://127.0.0.1:{port}/mcp", highlight=False)
    if not api_key:
        err.print("note: no --api-key: any process on this machine can call the tools", highlight=False)
    uvicorn.run(http_app(server, api_key), host="127.0.0.1", port=port, log_level="warning")


@app.command()
def load(
    url: str = typer.Option("http://127.0.0.1:8000", "--url", help="a server started with `serve` on this machine"),
    method: str = typer.Option("rag", "--method", "-m", help="the method every request invokes"),
    requests: int = typer.Option(50, "--requests", min=1, max=1000, help="requests to send"),
    concurrency: int = typer.Option(50, "--concurrency", min=1, max=200, help="requests in flight at once"),
    api_key: str | None = typer.Option(None, "--api-key", envvar="AMBIGQA_API_KEY", help="X-API-Key header to send"),
) -> None:
    """Send a bounded burst of concurrent requests to a loopback server; report successes, 503s, throughput, p95."""
    from agent.errors import AgentError
    from agent.surfaces.loadtest import run_load

    try:
        report = run_load(url, method, requests, concurrency, api_key=api_key)
    except AgentError as exc:
        fail(str(exc))
    print(report.model_dump_json(indent=2))
    if report.other:
        raise typer.Exit(1)


@app.command()
def postgres(
    data: Path = typer.Argument(..., help="data folder (created and initialised on first use)"),
    port: int = typer.Option(5432, "--port", help="port on 127.0.0.1"),
) -> None:
    """Run a local PostgreSQL with pgvector (PyPI pgserver's binaries) on 127.0.0.1 until Ctrl-C: a store to try
    AMBIGQA_DATABASE_URL and several `serve` replicas on one machine; trust authentication, not for production."""
    import time

    from agent.errors import AgentError
    from agent.retrieval.local_postgres import start

    try:
        server = start(data.resolve(), port)
    except AgentError as exc:
        fail(str(exc))
    err.print(f"PostgreSQL with pgvector on {server.url} (data in {data}); Ctrl-C stops it", highlight=False)

    def stop(*_: Any) -> None:  # SIGTERM too (a background job ignores Ctrl-C's SIGINT)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"AMBIGQA_DATABASE_URL={server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
