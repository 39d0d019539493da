"""The eval harness end to end on 3 questions with the scripted model: results, resume, summary, plot; and bench."""

import _thread
import json
import signal
import time

import pytest

from agent.answer_step import AnswerReview
from agent.eval.harness import EvalConfig, evaluate

REVIEW_FIGURES = AnswerReview(checks=["narrates", "states_nothing", "borrows"]).figures()

ROWS = [
    {"id": "q1", "question": "When did the Harry Potter film come out?",
     "qa_pairs": [{"question": "When was the world premiere of the Harry Potter film in London?", "short_answers": ["4 November 2001"]},
                  {"question": "When was the Harry Potter film released in cinemas in the United States?", "short_answers": ["16 November 2001"]}],
     "long_answers": ["It premiered in London on 4 November 2001 and opened in the US on 16 November 2001."]},
    {"id": "q2", "question": "Where is Mount Etna?",
     "qa_pairs": [{"question": "Which island?", "short_answers": ["Sicily"]}], "long_answers": ["Etna is on Sicily."]},
    {"id": "q3", "question": "What is sourdough?",
     "qa_pairs": [{"question": "What kind of food?", "short_answers": ["bread"]}], "long_answers": ["A bread."]},
]  # fmt: skip
SCRIPT = {
    "rag_extract": "DQ 1: When was the world premiere?\nDA 1: 4 November 2001",
    "rag_generate": "Answer: It premiered on 4 November 2001 and opened in the US on 16 November 2001.",
    "answer_revise": "Answer: It premiered on 4 November 2001.",
    "closed_book": "Final Answer: Sicily has Etna; the film came out in 2001.",
}


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_eval_runs_every_method_on_every_question_and_summarises(dataset, collection, scripted, tmp_path):
    name, model = scripted(SCRIPT)
    out = tmp_path / "run"
    summary = evaluate(
        EvalConfig(dataset=dataset, methods=["closed_book", "rag"], out=out, collection=collection, llm=name),
        progress=False,
        log=lambda _: None,
    )
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["method"], r["id"]) for r in rows} == {(m, q["id"]) for m in ("closed_book", "rag") for q in ROWS}
    q1_rag = next(r for r in rows if r["method"] == "rag" and r["id"] == "q1")
    assert q1_rag["metrics"]["str_em"] == 1.0 and q1_rag["cost"]["llm_calls"] == 2
    assert 0 < q1_rag["cost"]["critical_path_s"] <= q1_rag["cost"]["seconds"]
    assert q1_rag["cost"]["llm_rounds"] == 2  # rag keeps no state of its own but the answer step's review:
    assert q1_rag["details"] == {**{f"answer_review.{k}": 0 for k in REVIEW_FIGURES}}  # one figure per check, rates
    assert summary["rag"]["details_per_question"] == {
        "interpretations": 1.0, **{f"answer_review.{k}": 0.0 for k in REVIEW_FIGURES}
    }  # fmt: skip
    assert summary["rag"]["questions"] == 3 and summary["closed_book"]["cost_per_question"]["llm_calls"] == 1
    assert "| rag | 3 |" in (out / "summary.md").read_text()
    assert (out / "quality_vs_time.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt whatever handler the shell or an earlier test left (ignored, SIGINT does
    nothing to ``_thread.interrupt_main``: the test failed so once in a full run, never alone)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupted_eval_keeps_finished_runs_and_resumes(dataset, collection, scripted, tmp_path, sigint_raises):
    calls = {"n": 0}

    def flaky_generate(call):
        calls["n"] += 1
        if calls["n"] == 2:  # Ctrl-C while the second question is being answered
            _thread.interrupt_main()
            time.sleep(0.5)
        return SCRIPT["rag_generate"]

    name, _ = scripted({**SCRIPT, "rag_generate": flaky_generate})
    out = tmp_path / "run"
    config = EvalConfig(dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name)
    with pytest.raises(KeyboardInterrupt):
        evaluate(config, progress=False, log=lambda _: None)
    assert [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()] == ["q1"]
    logs = []
    evaluate(config, progress=False, log=logs.append)
    assert any("resuming: 1 runs already" in line for line in logs)
    ids = [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert ids == ["q1", "q2", "q3"]


def test_hotpot_style_rows_get_answer_and_support_metrics(collection, scripted, tmp_path):
    path = tmp_path / "hotpot.jsonl"
    path.write_text(
        json.dumps(
            {"id": "h1", "question": "Where is Mount Etna?", "answers": ["Sicily"], "supporting_ids": ["volcano"]}
        )
        + "\n"
    )
    name, _ = scripted(
        {"rag_extract": "DQ 1: Where?\nDA 1: Sicily", "rag_generate": "Answer: Mount Etna is in Sicily, Italy."}
    )
    summary = evaluate(
        EvalConfig(dataset=path, methods=["rag"], out=tmp_path / "o", collection=collection, llm=name),
        progress=False,
        log=lambda _: None,
    )
    metrics = summary["rag"]["metrics"]
    assert metrics["cover_em"] == metrics["acc_substring"] == 1.0 and metrics["support_recall@5"] == 1.0
    assert 0 < metrics["f1"] < 1 and "support_recall@10" not in metrics  # rag retrieved 5


def test_unknown_method_fails_before_any_run(dataset, tmp_path):
    from agent.errors import UnknownMethodError

    with pytest.raises(UnknownMethodError):
        evaluate(EvalConfig(dataset=dataset, methods=["rag", "nope"], out=tmp_path / "o"), progress=False)
    assert not (tmp_path / "o").exists()


def test_the_all_suite_runs_each_bench_where_the_data_has_what_it_needs(tmp_path, monkeypatch):
    from agent.errors import ConfigError, UnknownMethodError
    from agent.eval import bench

    called: dict[str, object] = {}
    monkeypatch.setattr(bench, "_store", lambda corpus, collection, log: called.setdefault("store", collection))
    monkeypatch.setattr(bench, "ingest_rate", lambda corpus: {"passages": 1, "passages_per_s": 2.0, "rerun_s": 0.1})
    monkeypatch.setattr(bench, "retrieval_latency", lambda collection, questions: called.setdefault("asked", questions))
    monkeypatch.setattr(bench, "orchestration_overhead", lambda methods, questions, collection: {"ran": questions})
    monkeypatch.setattr(bench, "oracle_mrecall", lambda collection, examples: {"questions": len(examples)})
    monkeypatch.setattr(
        bench,
        "nar_recall",
        lambda collection, examples, llm, record, options: {"ids": [e.id for e in examples], "given": options},
    )
    hotpot = tmp_path / "hotpot.jsonl"
    hotpot.write_text("".join(json.dumps({"id": f"h{i}", "question": f"Q{i}?", "answers": ["a"],
                                          "supporting_ids": ["p"]}) + "\n" for i in range(5)))  # fmt: skip
    with pytest.raises(ConfigError, match="corpus file .*corpus.jsonl does not exist"):
        bench.run_bench(tmp_path / "corpus.jsonl", hotpot, "c", ["rag"], log=lambda _: None)
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"id": "p", "title": "P", "text": "a"}) + "\n")
    with pytest.raises(UnknownMethodError, match="unknown method 'oracle'"):
        bench.run_bench(tmp_path / "corpus.jsonl", hotpot, "c", ["rag", "oracle"], log=lambda _: None)
    assert called == {}  # both fail before anything is ingested or timed
    results = bench.run_bench(tmp_path / "corpus.jsonl", hotpot, "c", ["rag"], questions=2, log=lambda _: None,
                              nar_questions=2, nar_offset=1)  # fmt: skip
    assert list(results) == ["ingest", "retrieval", "orchestration", "nar_recall"]  # no gold interpretations: no oracle
    assert results["orchestration"] == {"ran": ["Q0?", "Q1?"]} and called["store"] == "c"
    assert results["nar_recall"] == {"ids": ["h1", "h2"], "given": None, "offset": 1}
    results = bench.run_bench(tmp_path / "corpus.jsonl", hotpot, "c", ["rag"], log=lambda _: None, nar_questions=1,
                              nar_options={"samples": 5})  # fmt: skip
    assert results["nar_recall"] == {"ids": ["h0"], "given": {"samples": 5}, "offset": 0, "options": {"samples": 5}}
    with pytest.raises(ConfigError, match="unknown suite"):
        bench.run_bench(tmp_path / "corpus.jsonl", hotpot, "c", ["rag"], suite="nope")


def test_orchestration_overhead_compares_wall_time_with_the_llm_critical_path(collection):
    from agent.eval.bench_orchestration import _union_seconds, orchestration_overhead

    assert _union_seconds([(0, 1), (0.5, 2), (3, 4)]) == pytest.approx(3.0)
    report = orchestration_overhead(["rag"], ["Where is Mount Etna?"], collection, latency=0.05)
    assert report["rag"]["llm_calls"] == 2
    assert report["rag"]["wall_over_critical_path"] >= 1.0


def test_oracle_mrecall_compares_vanilla_and_diva_retrieval_with_gold_interpretations(collection):
    from agent.eval.bench_retrieval import oracle_mrecall
    from agent.eval.datasets import Example

    example = Example.model_validate(ROWS[0])
    report = oracle_mrecall(collection, [example], k=2)
    assert report["questions"] == 1
    assert report["diva_oracle_mrecall@2"] == 1.0  # the gold DQs pull the premiere and the US-release passages
    assert 0.0 <= report["vanilla_mrecall@2"] <= 1.0
    assert report["vanilla_p50_s"] >= 0 and report["oracle_p50_s"] >= 0


def test_the_retrieval_suite_measures_each_configuration_once_and_resumes(collection, tmp_path):
    from agent.eval.bench import format_bench
    from agent.eval.bench_retrieval import retrieval_suite
    from agent.eval.datasets import Example

    examples = [Example.model_validate(ROWS[0])]
    record = tmp_path / "suite.retrieval.jsonl"
    lines: list[str] = []
    first = retrieval_suite(
        collection, examples, first_stages=("dense", "bm25"), rerankers=("none",), record=record, log=lines.append
    )
    assert set(first) == {"dense+none", "bm25+none"} and len(record.read_text().splitlines()) == 2
    again = retrieval_suite(collection, examples, first_stages=("dense",), rerankers=("none",), record=record)
    assert again["dense+none"] == first["dense+none"] and len(record.read_text().splitlines()) == 2  # not re-run
    table = format_bench({"retrieval_suite": first})
    assert "| dense | none |" in table and "| bm25 | none |" in table


def test_a_bad_retrieval_option_in_the_suite_is_a_config_error(collection):
    from agent.errors import ConfigError
    from agent.eval.bench_retrieval import retrieval_suite
    from agent.eval.datasets import Example

    with pytest.raises(ConfigError, match="reranker"):
        retrieval_suite(collection, [Example.model_validate(ROWS[0])], first_stages=("dense",), rerankers=("bert",))


def test_details_keep_numbers_and_labels_and_count_lists():
    from agent.eval.harness import details
    from agent.schemas import RunResult

    result = RunResult(
        question="q",
        method="toc",
        answer="a",
        extra={"expansions": 4, "stop_reason": "max_nodes", "tree": [{}, {}, {}], "pool": {"x": 1}},
    )
    assert details(result) == {"expansions": 4, "stop_reason": "max_nodes", "tree_count": 3}


def test_sunar_semantic_sets_per_batch_reach_the_row_and_the_summary(tmp_path):
    from agent.eval.harness import details, records
    from agent.eval.report import summarize, write_reports
    from agent.schemas import RunResult
    from graphs.sunar import Hop

    hops = [Hop(sub_question="a?", answer="x", semantic_sets=[1, 3]), Hop(sub_question="b?", answer="y")]
    result = RunResult(question="q", method="sunar", answer="y", extra={"hops": hops, "reasoning": "[2] says y."})
    assert details(result) == {"hops_count": 2, "hops.semantic_sets": [1, 3]}  # reasoning is no label, however short
    assert [h["sub_question"] for h in records(result)["hops"]] == ["a?", "b?"]  # the path, to trace a row's answer
    assert records(result)["reasoning"] == "[2] says y."  # and why MER answered what it did
    assert "reasoning" not in records(result.model_copy(update={"extra": {"hops": hops, "reasoning": ""}}))

    rows = [
        {"method": "sunar", "id": str(i), "disambiguations": [], "metrics": {"em": 1.0},
         "cost": {"llm_calls": 1, "seconds": 2.0, "input_tokens": 10, "output_tokens": 2},
         "details": {"hops_count": 1, "hops.semantic_sets": sets}}
        for i, sets in enumerate([[1, 3], [1, 1, 2]])
    ]  # fmt: skip
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize(tmp_path / "results.jsonl", ["sunar"], samples=10)
    assert summary["sunar"]["details_distribution"] == {"hops.semantic_sets": {"1": 3, "2": 1, "3": 1}}
    assert "hops.semantic_sets" not in summary["sunar"]["details_per_question"]
    write_reports(summary, tmp_path)
    assert "- **sunar** hops.semantic_sets: 1: 3, 2: 1, 3: 1" in (tmp_path / "summary.md").read_text()


def test_per_method_options_reach_only_their_method_and_are_reported(dataset, collection, scripted, tmp_path):
    name, _ = scripted(SCRIPT)
    out = tmp_path / "run"
    config = EvalConfig(dataset=dataset, methods=["closed_book", "rag"], out=out, collection=collection, llm=name, limit=1,
                        method_options={"rag": {"top_k": 2}})  # fmt: skip
    summary = evaluate(config, progress=False, log=lambda _: None)
    rows = {r["method"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert len(rows["rag"]["passage_ids"]) == 2 and summary["rag"]["options"] == {"top_k": 2}
    assert "options" not in summary["closed_book"] and "| rag (top_k=2) | 1 |" in (out / "summary.md").read_text()


@pytest.mark.parametrize(
    ("methods", "method_options", "message"),
    [(["rag"], {"rag": {"top_kk": 2}}, "rag has no option top_kk"),
     (["rag"], {"rag": {"top_k": 0}}, "bad rag option: top_k"),
     (["rag"], {"diva": {"top_k": 2}}, "options given for diva")],
)  # fmt: skip
def test_bad_method_options_fail_before_any_run(dataset, tmp_path, methods, method_options, message):
    from agent.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        evaluate(
            EvalConfig(dataset=dataset, methods=methods, out=tmp_path / "o", method_options=method_options),
            progress=False,
        )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["sunar.asu", "asu=false", ".asu=1", "sunar.=1"])
def test_a_setting_must_name_method_field_and_value(text):
    from agent.errors import ConfigError
    from agent.eval.harness import parse_setting

    with pytest.raises(ConfigError, match="METHOD.FIELD=VALUE"):
        parse_setting(text)


def test_setting_values_are_read_as_json_then_text():
    from agent.eval.harness import parse_setting

    assert parse_setting("sunar.asu=false") == ("sunar", "asu", False)
    assert parse_setting("toc.max_nodes=5") == ("toc", "max_nodes", 5)
    assert parse_setting("sunar.equivalence=token") == ("sunar", "equivalence", "token")


def test_grounded_metrics_are_opt_in_and_the_judge_is_not_the_methods_cost(dataset, collection, scripted, tmp_path):
    from agent.llm.scripted import DEMO_SCRIPT

    judge_script = {k: DEMO_SCRIPT[k] for k in ("eval_match", "eval_dedup")} | {"eval_verify": "Decision: Yes"}
    name, model = scripted(SCRIPT | judge_script)
    out = tmp_path / "run"
    config = EvalConfig(
        dataset=dataset, methods=["closed_book", "rag"], out=out, collection=collection, llm=name, judge=name, limit=1
    )
    summary = evaluate(config, progress=False, log=lambda _: None)
    rows = {r["method"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    rag = rows["rag"]
    assert rag["grounded"]["predictions"] == rag["grounded"]["verified"] == 1  # the all-Yes verifier
    assert rag["grounded"]["gold_recalled"] == 2  # the all-Yes matcher covers both gold readings
    assert rag["cost"]["llm_calls"] == 2 and rag["judge_usage"]["llm_calls"] >= 4
    assert rows["closed_book"]["grounded"]["predictions"] == 0
    metrics = summary["rag"]["metrics"]
    assert metrics["g_precision"] == 1.0 and 0 < metrics["g_recall"] <= 1 and metrics["interp_recall"] == 1.0
    closed_book = summary["closed_book"]["metrics"]
    assert "g_precision" not in closed_book and closed_book["g_recall"] == 0.0  # no predictions: recall 0, kept
    assert "mrecall@5" not in closed_book  # it retrieves nothing
    table = (out / "summary.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| method | n |"))
    assert "| coverage | precision | interp_recall | sufficient | g_precision | g_recall | g_f1 |" in header
    closed_book_row = next(line for line in table.splitlines() if line.startswith("| closed_book |"))
    assert "| – |" in closed_book_row  # undefined G-Precision


def test_rows_record_provenance_and_a_changed_option_makes_new_rows(dataset, collection, scripted, tmp_path):
    name, _ = scripted(SCRIPT)
    out = tmp_path / "run"
    first = EvalConfig(dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name)
    evaluate(first, progress=False, log=lambda _: None)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    made = rows[0]["provenance"]
    assert made["llm"] == {"provider": name, "model": "ScriptedChatModel"}
    assert made["options"]["top_k"] == 5 and made["options"]["collection"] == collection  # every resolved field
    assert len(made["dataset_sha256"]) == 64 and (made["commit"] is None or len(made["commit"]) >= 40)
    logs = []
    changed = first.model_copy(update={"method_options": {"rag": {"top_k": 1}}})
    summary = evaluate(changed, progress=False, log=logs.append)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and not any("resuming" in line for line in logs)  # nothing relabelled
    assert any("3 rows" in line and "other settings" in line for line in logs)
    assert summary["rag"]["questions"] == 3 and summary["rag"]["provenance"]["options"]["top_k"] == 1
    assert all(len(r["passage_ids"]) == 1 for r in rows[3:])
    again = evaluate(changed, progress=False, log=logs.append)  # same settings: everything reused
    assert again["rag"]["metrics"] == summary["rag"]["metrics"]
    assert len((out / "results.jsonl").read_text().splitlines()) == 6


def test_results_do_not_depend_on_concurrency_and_runs_overlap(dataset, collection, scripted, tmp_path):
    summaries = {}
    for n in (1, 3):
        name, model = scripted(SCRIPT, latency=0.05)
        config = EvalConfig(dataset=dataset, methods=["closed_book", "rag"], out=tmp_path / str(n),
                            collection=collection, llm=name, concurrency=n)  # fmt: skip
        summaries[n] = evaluate(config, progress=False, log=lambda _: None)
        calls = sorted(model.calls, key=lambda c: c.started)
        overlapping = any(b.started < a.ended for a, b in zip(calls, calls[1:]))
        assert overlapping == (n > 1)
    for method in ("closed_book", "rag"):
        assert summaries[1][method]["metrics"] == summaries[3][method]["metrics"]
        assert summaries[1][method]["ci95"] == summaries[3][method]["ci95"]


def test_summary_compares_each_method_with_the_baseline_and_breaks_cost_down_by_node(
    dataset, collection, scripted, tmp_path
):
    name, _ = scripted(SCRIPT)
    out = tmp_path / "run"
    config = EvalConfig(dataset=dataset, methods=["closed_book", "rag"], out=out, collection=collection, llm=name)
    summary = evaluate(config, progress=False, log=lambda _: None)
    versus = summary["closed_book"]["vs_baseline"]
    assert versus["baseline"] == "rag" and "vs_baseline" not in summary["rag"]
    rag_em, book_em = summary["rag"]["metrics"]["str_em"], summary["closed_book"]["metrics"]["str_em"]
    assert versus["str_em"]["diff"] == pytest.approx(book_em - rag_em) and versus["str_em"]["questions"] == 3
    low, high = versus["str_em"]["ci95"]
    assert low <= versus["str_em"]["diff"] <= high
    by_node = summary["rag"]["cost_by_node"]
    assert by_node["rag_extract"]["calls"] == by_node["rag_generate"]["calls"] == 1.0 and "retrieve" not in by_node
    table = (out / "summary.md").read_text()
    assert "## Difference to rag" in table and "| closed_book | 3 |" in table
    assert "| rag | rag_generate | 1.00 |" in table and "## Provenance" in table and "dataset sha256" in table
    with pytest.raises(Exception, match="baseline toc is not among the methods"):
        evaluate(config.model_copy(update={"baseline": "toc"}), progress=False, log=lambda _: None)


def test_critical_path_counts_a_fan_out_of_one_node_as_one_round():
    from agent.eval.harness import CriticalPath
    from agent.schemas import NodeUsage, UsageReport

    called = {"usage": UsageReport(total=NodeUsage(calls=1))}
    path = CriticalPath()
    for node, update in [("retrieve", {}), ("expand", called), ("expand/clarify", called), ("grow", {}),
                         ("expand", called), ("expand", called), ("grow", {}), ("generate", called)]:  # fmt: skip
        path(node, update, 0.0)
    assert path.rounds == 3 and path.seconds > 0


def _failing_once(error: Exception):
    """A scripted rag_generate reply that raises ``error`` on the first call and answers after."""
    calls = {"n": 0}

    def reply(call):
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return SCRIPT["rag_generate"]

    return reply


def test_a_failed_run_is_recorded_then_retried_and_no_longer_counted(dataset, collection, scripted, tmp_path):
    from agent.errors import LLMError

    overflowing_once = _failing_once(
        LLMError("prompt 'rag_generate' was rejected by the LLM (400): maximum context length")
    )
    name, _ = scripted({**SCRIPT, "rag_generate": overflowing_once})
    config = EvalConfig(dataset=dataset, methods=["rag"], out=tmp_path / "run", collection=collection, llm=name)
    first = evaluate(config, progress=False, log=lambda _: None)
    assert first["rag"]["questions"] == 2 and first["rag"]["failed"] == 1  # the other questions went on
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert "maximum context length" in rows[0]["error"]
    again = evaluate(config, progress=False, log=lambda _: None)
    assert again["rag"]["questions"] == 3 and again["rag"]["failed"] == 0


def test_a_crash_of_the_embedded_server_fails_that_run_only(dataset, collection, scripted, tmp_path):
    from agent.errors import LLMCrashError, LLMUnavailableError

    crashing_once = _failing_once(LLMCrashError("the local llama.cpp server died by SIGSEGV during the call; log: …"))
    name, _ = scripted({**SCRIPT, "rag_generate": crashing_once})
    config = EvalConfig(dataset=dataset, methods=["rag"], out=tmp_path / "run", collection=collection, llm=name)
    summary = evaluate(config, progress=False, log=lambda _: None)
    assert summary["rag"]["questions"] == 2 and summary["rag"]["failed"] == 1  # the next runs went on

    def unreachable(call):
        raise LLMUnavailableError("LLM endpoint unreachable or too slow (APIConnectionError: Connection error.)")

    down, _ = scripted({**SCRIPT, "rag_generate": unreachable})
    with pytest.raises(LLMUnavailableError):  # an endpoint that is down stops the evaluation
        evaluate(config.model_copy(update={"llm": down, "out": tmp_path / "down"}), progress=False, log=lambda _: None)


def test_offset_skips_the_first_rows_so_a_tuning_split_stays_out_of_a_report(dataset, collection, scripted, tmp_path):
    from agent.eval.datasets import load_examples

    every = [e.id for e in load_examples(dataset)]
    assert [e.id for e in load_examples(dataset, limit=1, offset=1)] == every[1:2]
    assert load_examples(dataset, offset=len(every)) == []
    name, _ = scripted(SCRIPT)
    out = tmp_path / "run"
    evaluate(EvalConfig(dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, offset=1),
             progress=False, log=lambda _: None)  # fmt: skip
    assert [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()] == every[1:]


def test_ids_pick_the_questions_to_run_again(dataset, collection, scripted, tmp_path):
    from agent.errors import ConfigError
    from agent.eval.datasets import load_examples

    every = [e.id for e in load_examples(dataset)]
    assert [e.id for e in load_examples(dataset, ids=[every[2], every[0]])] == [every[0], every[2]]  # the file's order
    # ids pick within the split that --offset/--limit name (a few questions of a tuning sample run again)
    assert [e.id for e in load_examples(dataset, offset=1, limit=2, ids=[every[2], every[1]])] == every[1:3]
    with pytest.raises(ConfigError, match=rf"--ids {every[0]}: not within rows 2–3"):
        load_examples(dataset, offset=1, limit=2, ids=[every[0], every[1]])
    with pytest.raises(ConfigError, match="no question with id nowhere"):
        load_examples(dataset, limit=1, ids=[every[0], "nowhere"])
    name, _ = scripted(SCRIPT)
    out = tmp_path / "run"
    evaluate(EvalConfig(dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, ids=[every[-1]]),
             progress=False, log=lambda _: None)  # fmt: skip
    assert [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()] == every[-1:]
