"""Command line: ``ambigqa ask``, ``ingest`` and ``neighbours`` (also ``python -m agent``). Heavy imports happen per command."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Answer ambiguous questions with retrieval-augmented LLM agents.")
out = Console()
err = Console(stderr=True)

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _describe(update: dict[str, Any]) -> str:
    parts = []
    if update.get("passages"):
        parts.append(f"{len(update['passages'])} passages")
    if "disambiguations" in update:
        parts.append(f"{len(update['disambiguations'])} interpretations")
    if update.get("answer"):
        parts.append(f"answer of {len(update['answer'].split())} words")
    if update.get("usage") is not None:
        from agent.schemas import UsageReport

        total = UsageReport.model_validate(update["usage"]).total
        if total.calls:
            parts.append(f"{total.calls} LLM call{'s' * (total.calls != 1)}, {total.input_tokens}→{total.output_tokens} tokens")
    return ", ".join(parts)


@app.command()
def ask(
    question: str = typer.Argument(..., help="The (possibly ambiguous) question."),
    method: str = typer.Option("rag", "--method", "-m", help="closed_book | rag | sunar"),
    llm: Optional[str] = typer.Option(None, "--llm", help="local (default) | openai | fake"),
    collection: Optional[str] = typer.Option(None, "--collection", "-c", help="Chroma collection (default: demo)"),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="passages to retrieve, where the method retrieves"),
    as_json: bool = typer.Option(False, "--json", help="print the whole result as JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no live progress"),
) -> None:
    """Answer QUESTION, showing each graph node as it finishes."""
    from agent.errors import AgentError
    from agent.runner import run

    options: dict[str, Any] = {}
    if top_k is not None:
        options["top_k"] = top_k

    def progress(node: str, update: dict[str, Any], seconds: float) -> None:
        if not quiet:
            err.print(f"  [green]✓[/] [bold]{node}[/] [dim]{seconds:6.2f}s[/]  {_describe(update)}", highlight=False)

    if not quiet:
        err.print(f"[bold]{method}[/] · {question}", highlight=False)
    try:
        result = run(question, method=method, llm=llm, collection=collection, on_node=progress, **options)
    except AgentError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    out.print()
    out.print(escape(result.answer), highlight=False)
    if result.disambiguations:
        out.print()
        for i, d in enumerate(result.disambiguations, 1):
            cite = f" [dim]{escape('[' + ', '.join(d.passage_ids) + ']')}[/]" if d.passage_ids else ""
            out.print(f"  {i}. {escape(d.question)} → [bold]{escape(d.answer)}[/]{cite}", highlight=False)
    total = result.usage.total
    err.print(
        f"\n[dim]{result.seconds:.1f}s · {total.calls} LLM calls · {total.input_tokens} prompt + "
        f"{total.output_tokens} completion tokens · {len(result.passages)} passages[/]",
        highlight=False,
    )


@app.command()
def ingest(
    corpus: Path = typer.Argument(..., help="JSONL file, one {id, title, text} passage per line"),
    collection: str = typer.Option(..., "--collection", "-c", help="collection to create or extend"),
    batch_size: int = typer.Option(128, "--batch-size", min=1, max=4096),
) -> None:
    """Embed and store a corpus; passages already stored (same content) are skipped."""
    from agent.errors import AgentError
    from agent.ingest import ingest as run_ingest

    try:
        report = run_ingest(corpus, collection, batch_size=batch_size, progress=True)
    except AgentError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted; passages stored so far are kept and a re-run continues from there", 130)
    rate = f", {report.passages_per_s:.1f} passages/s" if report.added else ""
    out.print(
        f"{report.collection}: {report.added} added, {report.skipped} already stored, "
        f"{report.records} records in {report.seconds:.1f}s{rate}",
        highlight=False,
    )


@app.command()
def neighbours(
    collection: str = typer.Option(..., "--collection", "-c", help="an ingested collection"),
    k: int = typer.Option(10, "--k", min=1, max=100, help="neighbours per passage"),
) -> None:
    """Build SUNAR's neighbourhood graph (each passage's k nearest passages) from the stored embeddings."""
    from agent.errors import AgentError
    from agent.neighbours import build_neighbours, graph_path
    from agent.store import open_store

    try:
        store = open_store(collection)
        graph = build_neighbours(store, k)
    except AgentError as exc:
        _fail(str(exc))
    out.print(
        f"{collection}: {len(graph.ids)} passages × {graph.k} neighbours in {graph.seconds:.1f}s → {graph_path(store, k)}",
        highlight=False,
    )


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
