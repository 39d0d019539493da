"""Pairs the rows of eval folders question by question: each run's metrics with 95% bootstrap intervals, and paired
differences between runs (``agent.eval.stats``), for studies whose variants live in separate ``--out`` folders
(``--replay`` forks, a rule replayed only where it acts).

A run is ``NAME=DIR[+DIR…][@METHOD]``: the rows of ``METHOD`` (default: the folder's only method) in
``DIR/results.jsonl``, the last row without an error per question. With several folders the first one holding a
question gives its row, so a variant replayed only on the questions where it acts is ``rule=runs/rule+runs/nostep``.
A row taken from a later folder (the variant did not act there) rejects nothing: with ``--dataset`` its
``reject_recall`` is 0 on questions with misinformation or noise documents, and its ``reject_precision`` is left out.

    python tools/pair_runs.py --dataset ../shared/data/ramdocs/dev.jsonl rag=runs/C-rag \\
        step=runs/C-diva nostep=runs/C-diva-false 'sw=runs/C-diva-sw+runs/C-diva-false' --pair step:rag --pair sw:nostep

Without ``--pair`` every run is paired with the first. Reads files only; prints Markdown tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.eval.datasets import load_examples  # noqa: E402
from agent.eval.resume import read_rows  # noqa: E402
from agent.eval.stats import paired_difference, summarize_metrics  # noqa: E402

METRICS = ["em", "gold_recall", "misinfo_stated", "reject_precision", "reject_recall", "str_em", "rouge_l", "narrates"]


def last_rows(folder: Path, method: str | None) -> dict[str, dict[str, Any]]:
    """Question id → the folder's last finished row of ``method``."""
    path = folder / "results.jsonl"
    if not path.is_file():
        sys.exit(f"{path} does not exist")
    rows = read_rows(path)
    methods = {r["method"] for r in rows}
    if method is None:
        if len(methods) != 1:
            sys.exit(f"{folder} holds methods {sorted(methods)}: name one, as DIR@METHOD")
        method = methods.pop()
    return {r["id"]: r for r in rows if r["method"] == method and "error" not in r}


def load_run(spec: str, bad: dict[str, bool] | None) -> tuple[str, list[dict[str, Any]]]:
    """``NAME=DIR[+DIR…][@METHOD]`` → (name, rows)."""
    name, _, rest = spec.partition("=")
    if not rest:
        sys.exit(f"a run is NAME=DIR[+DIR…][@METHOD], not {spec!r}")
    rest, _, method = rest.partition("@")
    merged: dict[str, dict[str, Any]] = {}
    for n, folder in enumerate(rest.split("+")):
        for qid, row in last_rows(Path(folder), method or None).items():
            if qid in merged:
                continue
            if n > 0 and bad is not None:  # the variant did not act here: it rejected nothing
                metrics = {k: v for k, v in row["metrics"].items() if k not in ("reject_precision", "reject_recall")}
                if bad.get(qid):
                    metrics["reject_recall"] = 0.0
                row = {**row, "metrics": metrics}
            merged[qid] = row
    return name, list(merged.values())


def calls(rows: list[dict[str, Any]]) -> float:
    return sum(r.get("cost", {}).get("llm_calls", 0) for r in rows) / max(len(rows), 1)


def fmt(value: float | None, ci: list[float] | None = None, signed: bool = False) -> str:
    if value is None:
        return "–"
    spec = "+.3f" if signed else ".3f"
    return f"{value:{spec}} [{ci[0]:{spec}}, {ci[1]:{spec}}]" if ci else f"{value:{spec}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="NAME=DIR[+DIR…][@METHOD]; the first is the default base")
    parser.add_argument("--pair", action="append", default=[], help="A:B, the difference A − B (repeatable)")
    parser.add_argument("--dataset", type=Path, help="the RAMDocs file, for the documents a merged row missed")
    args = parser.parse_args()
    bad = None
    if args.dataset:
        bad = {e.id: any(d.type != "correct" for d in e.documents) for e in load_examples(args.dataset)}
    runs = dict(load_run(spec, bad) for spec in args.runs)
    shown = [m for m in METRICS if any(m in r["metrics"] for rows in runs.values() for r in rows)]
    print("| run | questions | " + " | ".join(shown) + " | calls |")
    print("|---|---|" + "---|" * len(shown) + "---|")
    for name, rows in runs.items():
        point, ci = summarize_metrics(rows)
        cells = []
        for m in shown:
            cell = fmt(point.get(m), ci.get(m))
            if m == "misinfo_stated":
                flags = [r["metrics"][m] for r in rows if m in r["metrics"]]
                cell = f"{int(sum(flags))} of {len(flags)} ({fmt(point.get(m))})"
            cells.append(cell)
        print(f"| {name} | {len(rows)} | " + " | ".join(cells) + f" | {calls(rows):.1f} |")
    names = list(runs)
    pairs = [p.split(":", 1) for p in args.pair] or [[n, names[0]] for n in names[1:]]
    print("\n| pair | questions | " + " | ".join(shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for a, b in pairs:
        if a not in runs or b not in runs:
            sys.exit(f"--pair {a}:{b} names a run not given")
        diff = paired_difference(runs[a], runs[b])
        count = max((d["questions"] for d in diff.values()), default=0)
        cells = [fmt(diff[m]["diff"], diff[m]["ci95"], signed=True) if m in diff else "–" for m in shown]
        print(f"| {a} − {b} | {count} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
