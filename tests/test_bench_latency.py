"""``bench --suite latency`` with the scripted model (it streams): every variant on every question, first-token and
whole-answer seconds, tokens and metrics, resumed from its record, variants paired with the first. The floor needs
the embedded server's rates (the slow test in test_local_llm.py)."""

import json

import pytest

from agent.errors import ConfigError, UnknownMethodError
from agent.eval.bench_latency import format_latency_suite, latency_suite, variants
from agent.eval.datasets import load_examples
from tests.test_eval_harness import ROWS, SCRIPT


@pytest.fixture
def examples(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    return load_examples(path)


def test_each_variant_answers_each_question_timed_and_scored_and_a_rerun_resumes(
    examples, collection, scripted, tmp_path
):
    name, model = scripted(SCRIPT)
    chosen = variants(["rag", "narrow=rag"], [("narrow", "top_k", 2)])
    record = tmp_path / "bench.latency.jsonl"
    results = latency_suite(examples, chosen, collection, llm=name, record=record, log=lambda _: None)
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(r["label"], r["id"]) for r in rows] == [(v, q["id"]) for v in ("rag", "narrow") for q in ROWS[:2]]
    for row in rows:
        assert 0 < row["first_token_s"] <= row["seconds"]  # the answer streamed before the run ended
        assert row["own_tokens"] > row["answer_tokens"] > 0 and row["calls"] >= 2 and "str_em" in row["metrics"]
        assert "floor_s" not in row  # no rates without the embedded server
    wide, narrow = (results["summary"][label]["means"] for label in ("rag", "narrow"))
    assert narrow["own_tokens"] < wide["own_tokens"]  # two passages read instead of five
    assert (
        results["paired"]["narrow"]["own_tokens"]["diff"] < 0
        and results["paired"]["narrow"]["own_tokens"]["questions"] == 2
    )
    calls = len(model.calls)
    again = latency_suite(examples, chosen, collection, llm=name, record=record, log=lambda _: None)
    assert len(model.calls) == calls and again["summary"] == results["summary"]  # resumed: nothing ran again
    table = "\n".join(format_latency_suite(results))
    assert "| rag |" in table and "| narrow |" in table and "narrow − rag (paired)" in table


def test_variants_name_their_method_and_settings_name_a_variant():
    assert [v.method for v in variants(["rag", "fixed=rag", "diva"], [])] == ["rag", "rag", "diva"]
    with pytest.raises(ConfigError, match="no variant 'fixd'"):
        variants(["rag", "fixed=rag"], [("fixd", "demo_selection", "fixed")])
    with pytest.raises(ConfigError, match="named twice"):
        variants(["rag", "rag=rag"], [])
    with pytest.raises(UnknownMethodError, match="unknown method 'nosuchmethod'"):
        variants(["rag", "x=nosuchmethod"], [])
