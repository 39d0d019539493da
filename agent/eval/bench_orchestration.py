"""Orchestration overhead: a method's wall time over the time its LLM calls need, with a scripted LLM of fixed
latency."""

from __future__ import annotations

import statistics
import time
from typing import Any


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


def format_orchestration(o: dict[str, Any]) -> list[str]:
    lines = ["", "| method | LLM calls | wall s | wall ÷ critical-path LLM time |", "|---|---|---|---|"]
    return lines + [
        f"| {m} | {v['llm_calls']} | {v['wall_s']} | {v['wall_over_critical_path']} |" for m, v in o.items()
    ]
