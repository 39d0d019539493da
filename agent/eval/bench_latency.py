"""``ambigqa bench --suite latency``: how long a user waits, per method, against what the question itself costs.

For each method (or variant: ``LABEL=METHOD`` with its own ``--set LABEL.FIELD=VALUE``) on the same questions, one
method at a time as a user runs it: seconds to the first answer token and to the whole answer, the prompt, prefilled
and generated tokens, STR-EM and ROUGE-L (or the dataset's metrics), and the method's *floor*: the seconds to prefill
only the question and the passages the method read, and to generate its answer, at the prefill and generation rates
the doctor's probe measures on the same server in the same run. Each method's seconds are reported as a multiple of
its floor; variants are compared paired with the first one. Rows go to a JSONL as they come; a re-run resumes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.errors import ConfigError
from agent.eval.datasets import Example
from agent.eval.scoring import score
from agent.eval.stats import paired_difference, summarize_metrics
from agent.registry import known_method

TIMES = ("seconds", "first_token_s", "floor_s", "floor_multiple")
TOKENS = ("prompt_tokens", "prefilled_tokens", "generated_tokens", "own_tokens", "answer_tokens")


class Variant(BaseModel):
    """One column of the suite: a label, the method it runs and the options it sets."""

    label: str
    method: str
    options: dict[str, Any] = {}


def variants(methods: Sequence[str], settings: Sequence[tuple[str, str, Any]]) -> list[Variant]:
    """``rag,fixed=rag`` and ``fixed.demo_selection=fixed`` → the variants; a setting names a label or a method."""
    out: list[Variant] = []
    for entry in methods:
        label, _, method = entry.rpartition("=")
        label, method = (label or method).strip(), method.strip()
        known_method(method)
        if any(v.label == label for v in out):
            raise ConfigError(f"variant '{label}' is named twice")
        out.append(Variant(label=label, method=method))
    for target, field, value in settings:
        chosen = [v for v in out if v.label == target]
        if not chosen:
            raise ConfigError(
                f"--set {target}.{field}: no variant '{target}' (variants: {', '.join(v.label for v in out)})"
            )
        chosen[0].options[field] = value
    return out


class Rates(BaseModel):
    """Tokens a second the embedded server prefills and generates, by the doctor's probe."""

    prefill_tok_s: float
    generate_tok_s: float


def measure_rates() -> tuple[Rates, Callable[[str], int]]:
    """The embedded server's rates (the doctor's probe, now) and a token counter with its tokenizer."""
    import httpx

    from agent.doctor import probe
    from agent.llm.server_launcher import local_server
    from agent.settings import get_settings

    settings = get_settings()
    server = local_server(settings)
    measured = probe(server.url, settings.reply_timeout(True))
    root = server.url.removesuffix("/v1")

    def count(text: str) -> int:
        reply = httpx.post(f"{root}/extras/tokenize/count", json={"input": text}, timeout=60)
        reply.raise_for_status()
        return int(reply.json()["count"])

    return Rates(prefill_tok_s=measured["prefill_tok_s"], generate_tok_s=measured["generate_tok_s"]), count


def time_one(
    example: Example, variant: Variant, collection: str, llm: str, rates: Rates | None, count: Callable[[str], int]
) -> dict[str, Any]:
    """One question through one variant: its times, tokens, floor and metrics."""
    from agent.runner import run

    start = time.perf_counter()
    first: list[float] = []

    def on_token(_text: str, _node: str) -> None:
        if not first:
            first.append(time.perf_counter() - start)

    result = run(example.question, variant.method, llm=llm, collection=collection, on_token=on_token, **variant.options)
    seconds = time.perf_counter() - start
    own = count("\n".join([example.question, *(p.full_text for p in result.passages)]))
    answer = count(result.answer)
    total = result.usage.total
    row: dict[str, Any] = {
        "id": example.id,
        "label": variant.label,
        "answer": result.answer,
        "seconds": round(seconds, 2),
        "first_token_s": round(first[0], 2) if first else None,
        "prompt_tokens": total.input_tokens,
        "prefilled_tokens": total.prefilled_tokens,
        "generated_tokens": total.output_tokens,
        "calls": total.calls,
        "own_tokens": own,
        "answer_tokens": answer,
        "metrics": score(example, result),
    }
    if rates is not None:
        floor = own / rates.prefill_tok_s + answer / rates.generate_tok_s
        row |= {"floor_s": round(floor, 2), "floor_multiple": round(seconds / floor, 2)}
    return row


def latency_suite(
    examples: list[Example],
    chosen: list[Variant],
    collection: str,
    llm: str = "local",
    record: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every variant over ``examples``, one after another; rows appended to ``record`` (JSONL) and resumed from it."""
    from agent.llm.prompts import estimate_tokens

    rates, count = measure_rates() if llm == "local" else (None, estimate_tokens)
    if rates is not None:
        log(f"rates: prefill {rates.prefill_tok_s:.0f} tok/s, generation {rates.generate_tok_s:.1f} tok/s")
    done = _recorded(record)
    rows: dict[str, list[dict[str, Any]]] = {}
    for variant in chosen:
        rows[variant.label] = []
        for n, example in enumerate(examples, 1):
            row = done.get((variant.label, example.id))
            if row is None:
                row = time_one(example, variant, collection, llm, rates, count)
                _append(record, row)
            rows[variant.label].append(row)
            first = f", first token {row['first_token_s']} s" if row["first_token_s"] is not None else ""
            log(f"{variant.label} {n}/{len(examples)}: {row['seconds']} s{first}")
    return {
        "llm": llm,
        "rates": rates.model_dump() if rates else None,
        "questions": len(examples),
        "variants": [v.model_dump() for v in chosen],
        "summary": {label: summarize(label_rows) for label, label_rows in rows.items()},
        "paired": paired(rows, chosen),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means with 95% intervals of the times, tokens and metrics; the floor multiple also as total ÷ total."""
    numbers = [{"id": r["id"], "metrics": _numbers(r)} for r in rows]
    means, ci95 = summarize_metrics(numbers)
    out: dict[str, Any] = {"means": means, "ci95": ci95}
    floors = [r["floor_s"] for r in rows if r.get("floor_s")]
    if floors:
        out["seconds_over_floor"] = round(sum(r["seconds"] for r in rows if r.get("floor_s")) / sum(floors), 2)
    return out


def paired(rows: dict[str, list[dict[str, Any]]], chosen: list[Variant]) -> dict[str, Any]:
    """Each later variant minus the first, paired by question."""
    if len(chosen) < 2:
        return {}
    base = [{"id": r["id"], "metrics": _numbers(r)} for r in rows[chosen[0].label]]
    return {
        v.label: paired_difference([{"id": r["id"], "metrics": _numbers(r)} for r in rows[v.label]], base)
        for v in chosen[1:]
    }


def _numbers(row: dict[str, Any]) -> dict[str, float]:
    values = {k: row[k] for k in (*TIMES, *TOKENS, "calls") if row.get(k) is not None}
    return values | row["metrics"]


def _recorded(record: Path | None) -> dict[tuple[str, str], dict[str, Any]]:
    if record is None or not record.is_file():
        return {}
    rows = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["label"], r["id"]): r for r in rows}


def _append(record: Path | None, row: dict[str, Any]) -> None:
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        with record.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def format_latency_suite(results: dict[str, Any]) -> list[str]:
    """The suite as a markdown table, then the paired differences."""
    rates = results.get("rates")
    head = f"### latency ({results['questions']} questions, {results['llm']}"
    head += (
        f"; prefill {rates['prefill_tok_s']:.0f} tok/s, generation {rates['generate_tok_s']:.1f} tok/s)"
        if rates
        else ")"
    )
    lines = [
        head,
        "",
        "| variant | seconds | first answer token s | floor s | seconds ÷ floor | prompt / prefilled / generated tokens | "
        "calls | quality |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, summary in results["summary"].items():
        m, ci = summary["means"], summary["ci95"]
        quality = ", ".join(f"{k} {m[k]:.3f}" for k in ("str_em", "rouge_l", "em", "f1") if k in m)
        lines.append(
            f"| {label} | {_mean(m, ci, 'seconds')} | {_mean(m, ci, 'first_token_s')} | {_mean(m, ci, 'floor_s')} | "
            f"{summary.get('seconds_over_floor', '–')} | {m.get('prompt_tokens', 0):,.0f} / "
            f"{m.get('prefilled_tokens', 0):,.0f} / {m.get('generated_tokens', 0):,.0f} | {m.get('calls', 0):.1f} | "
            f"{quality} |"
        )
    for label, diffs in results.get("paired", {}).items():
        shown = [k for k in ("seconds", "first_token_s", "prefilled_tokens", "str_em", "rouge_l") if k in diffs]
        parts = [f"{k} {diffs[k]['diff']:+.3f} {_interval(diffs[k]['ci95'])}" for k in shown]
        lines += ["", f"{label} − {results['variants'][0]['label']} (paired): " + "; ".join(parts)]
    return lines


def _mean(means: dict[str, float], ci95: dict[str, list[float]], key: str) -> str:
    if key not in means:
        return "–"
    return f"{means[key]:.1f} {_interval(ci95.get(key))}"


def _interval(ci: list[float] | None) -> str:
    return f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""
