"""What the CLI shows: a line per finished graph node, answers with their interpretations, ToC's tree, passages, checks
and one-line errors. Text from a question, a model or a passage is made printable before it reaches the terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from agent.doctor import Check
    from agent.schemas import Passage, RunResult
    from agent.settings import Settings
    from agent.threads import ClarifyResult

out = Console()
err = Console(stderr=True)

SHOWN = {"passages", "disambiguations", "answer", "usage", "question", "drafts", "answer_review"}  # ``describe``'s own
HIDDEN = {"answer_prompt", "foreign_figures"}  # the answer step's working state: a conversation, example figures


def printable(text: str) -> str:
    """Text safe to echo on a terminal (``agent.text.printable``, imported when first needed)."""
    from agent.text import printable

    return printable(text)


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(printable(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def log(line: str) -> None:
    err.print(line, highlight=False)


def describe(update: dict[str, Any]) -> str:
    """One line per finished node, with the method's own fields (interpretations, verdicts, grade, tree, ...)."""
    parts = []
    if update.get("passages"):
        parts.append(f"{len(update['passages'])} passages")
    if "disambiguations" in update:
        parts.append(f"{len(update['disambiguations'])} interpretations")
    if update.get("drafts"):
        draft = _fields(update["drafts"][-1])
        failed = ", ".join(draft.get("failed") or {})
        parts.append(f"draft {len(update['drafts'])} of {len(draft.get('text', '').split())} words")
        parts += [f"failed {failed}"] if failed else []
    if update.get("answer"):
        parts.append(f"answer of {len(update['answer'].split())} words")
    if review := update.get("answer_review"):
        fallback = ", ".join(_fields(review).get("fallback") or [])
        parts.append(f"fallback: {fallback}" if fallback else "no fallback")
    if update.get("usage") is not None:
        from agent.schemas import UsageReport

        total = UsageReport.model_validate(update["usage"]).total
        if total.calls:
            parts.append(
                f"{total.calls} LLM call{'s' * (total.calls != 1)}, {total.input_tokens}→{total.output_tokens} tokens"
            )
    details = []
    for key, value in update.items():
        if key in SHOWN or key in HIDDEN:
            continue
        if isinstance(value, (str, int, float, bool)) and len(str(value)) <= 120:
            parts.append(f"{key}={value}")
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            details += [f"      {key}: {v}" for v in value[:6]]
        elif isinstance(value, list) and value:
            parts.append(f"{len(value)} {key}")
    return ", ".join(parts) + "".join("\n" + line for line in details)


def _fields(value: Any) -> dict[str, Any]:
    return value.model_dump() if hasattr(value, "model_dump") else dict(value)


def progress(quiet: bool, timed: bool = True) -> Callable[[str, dict[str, Any], float], None]:
    """The runner's ``on_node``: a line on stderr per finished node (with its seconds when ``timed``)."""

    def show(node: str, update: dict[str, Any], seconds: float) -> None:
        if not quiet:
            took = f" [dim]{seconds:6.2f}s[/]" if timed else ""
            err.print(f"  [green]✓[/] [bold]{node}[/]{took}  {describe(update)}", highlight=False)

    return show


class LiveRun:
    """Live progress on stderr: a line per finished node and, with ``stream``, the answer as the model writes it (a
    draft, then any revision, each on its own line; the finished answer follows on stdout)."""

    def __init__(self, quiet: bool, stream: bool = True):
        self.show = progress(quiet)
        self.stream = stream and not quiet
        self.writing: str | None = None  # the node whose answer tokens are being printed

    def node(self, node: str, update: dict[str, Any], seconds: float) -> None:
        self._end_line()
        self.show(node, update, seconds)

    def token(self, text: str, node: str) -> None:
        if node != self.writing:
            self._end_line()
            err.print(f"  [cyan]✎[/] [bold]{node}[/] ", end="", highlight=False)
            self.writing = node
        err.print(printable(text), end="", style="dim", markup=False, highlight=False, soft_wrap=True)

    def _end_line(self) -> None:
        if self.writing is not None:
            err.print()
            self.writing = None


def print_asking(method: str, question: str) -> None:
    err.print(f"[bold]{method}[/] · {escape(printable(question))}", highlight=False)


def print_result(result: RunResult) -> None:
    """A run's answer on stdout (and the reasoning behind a short answer), each disambiguation (SUNAR's hops, MADAM's
    answers) with the passages it cites, ToC's tree; the costs on stderr."""
    out.print()
    out.print(escape(printable(result.answer)), highlight=False)
    if result.extra.get("reasoning"):
        out.print(f"[dim]{escape(printable(result.extra['reasoning']))}[/]", highlight=False)
    if result.disambiguations:
        out.print()
        for i, d in enumerate(result.disambiguations, 1):
            print_pair(i, d.question, d.answer, d.passage_ids)
    if result.extra.get("hops"):
        out.print("\n[bold]Hops[/]", highlight=False)
        for i, hop in enumerate(result.extra["hops"], 1):
            print_pair(i, hop.sub_question, hop.answer, hop.supporting_ids)
            if hop.reasoning:
                out.print(f"     [dim]{escape(printable(hop.reasoning))}[/]", highlight=False)
    if "answers" in result.extra:
        out.print("\n[bold]Answers[/]", highlight=False)
        for i, supported in enumerate(result.extra["answers"], 1):
            print_pair(i, "", supported.answer, supported.passage_ids)
        if result.extra.get("rejected_ids"):
            out.print(f"  [dim]rejected: {escape(', '.join(result.extra['rejected_ids']))}[/]", highlight=False)
    if result.extra.get("tree"):
        print_tree(result.extra["tree"])
    total = result.usage.total
    err.print(
        f"\n[dim]{result.seconds:.1f}s · {total.calls} LLM calls · {total.input_tokens} prompt "
        f"({total.prefilled_tokens} prefilled) + {total.output_tokens} completion tokens · "
        f"{len(result.passages)} passages[/]",
        highlight=False,
    )


def print_pair(number: int, question: str, answer: str, passage_ids: list[str]) -> None:
    """``n. question → answer [passage ids]`` (the question left out when there is none)."""
    cite = f" [dim]{escape('[' + ', '.join(passage_ids) + ']')}[/]" if passage_ids else ""
    asked = f"{escape(printable(question))} → " if question else ""
    out.print(f"  {number}. {asked}[bold]{escape(printable(answer))}[/]{cite}", highlight=False)


def print_tree(tree: list[Any]) -> None:
    """ToC's tree of clarifications, children under their parent (ids are BFS order), pruned nodes marked."""
    nodes = [n if isinstance(n, dict) else n.model_dump() for n in tree]
    children: dict[Any, list[dict]] = {}
    for node in nodes:
        children.setdefault(node["parent"], []).append(node)
    out.print("\n[bold]Tree of clarifications[/]", highlight=False)

    def show(node: dict) -> None:
        line = escape(node["question"])
        if node["parent"] is not None:
            line += f" → [bold]{escape(node['answer'])}[/]"
            if node["pruned"]:
                line = f"[dim strike]{line}[/] [dim](pruned: {node['pruned_by']})[/]"
            elif node["pruned_by"]:
                line += " [dim](restored)[/]"
        out.print(f"  {'   ' * node['depth']}[dim]#{node['id']}[/] {line}", highlight=False)
        for child in children.get(node["id"], []):
            show(child)

    for root in children.get(None, []):
        show(root)


def print_interpretations(interpretations: list[str]) -> None:
    out.print("\nThe question can mean:")
    for i, option in enumerate(interpretations, 1):
        out.print(f"  {i}. {escape(printable(option))}", highlight=False)


def print_clarified(result: ClarifyResult) -> None:
    """A finished clarify thread: the answer, then each chosen interpretation with its answer."""
    out.print()
    out.print(escape(printable(result.answer or "")), highlight=False)
    for i, d in enumerate(result.disambiguations or [], 1):
        out.print(f"  {i}. {escape(printable(d.question))} → [bold]{escape(printable(d.answer))}[/]", highlight=False)


def print_passages(passages: list[Passage], whole: bool = False) -> None:
    """Passages in order: title, id and score (where a search gave one), then the first 40 words or ``whole``."""
    for rank, p in enumerate(passages, 1):
        words = p.text.split()
        text = " ".join(words if whole else words[:40]) + ("" if whole or len(words) <= 40 else " …")
        score = "" if p.score is None else f" · {p.score:.3f}"
        out.print(f"{rank:>2}. [bold]{escape(p.title)}[/] [dim]{escape(p.id)}{score}[/]", highlight=False)
        out.print(f"    {escape(text)}", highlight=False)


def print_check(check: Check) -> None:
    """One line per ``doctor`` check: passed or failed, its seconds, what it found."""
    mark = "[green]✓[/]" if check.ok else "[bold red]✗[/]"
    err.print(
        f"  {mark} [bold]{check.name}[/] [dim]{check.seconds:6.2f}s[/]  {escape(printable(check.summary))}",
        highlight=False,
        soft_wrap=True,
    )


def print_serving(methods: tuple[str, ...], url: str, settings: Settings) -> None:
    """What a server serves, where, with which LLM and store."""
    routes = ", ".join(f"/{m}" for m in methods)
    store = "PostgreSQL" if settings.database_url else "embedded Chroma"
    err.print(f"serving {routes}, /clarify and /health on {url} (llm: {settings.llm}, store: {store})", highlight=False)
