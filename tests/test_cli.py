"""The CLI as a user runs it (a subprocess): clear one-line errors, non-zero exits, JSON output, demo auto-ingest."""

import json
import os
import socket
import subprocess
import sys

import pytest


@pytest.fixture
def home(served_home):
    """The CLI runs as a subprocess: it gets the subprocesses' store, never the one this process has open."""
    return served_home


@pytest.fixture
def collection(served_home):
    return "tiny"


def cli(*args: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, env=env, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, fragment: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr


def test_empty_question(home):
    proc = cli("ask", "  ", "--llm", "fake", home=home)
    assert_one_line_error(proc, "the question is empty")
    assert len(proc.stderr.strip().splitlines()) == 1  # no "rag · " header before the error


def test_oversized_question(home):
    proc = cli("ask", "why " * 600, "--llm", "fake", home=home)
    assert_one_line_error(proc, "the limit is 2,000")
    assert "why why" not in proc.stderr  # the question is not echoed back


HEAVY = {"langchain_core", "langgraph", "chromadb", "torch", "onnxruntime", "sentence_transformers", "llama_cpp"}


@pytest.mark.parametrize(
    "args",
    [["--help"], ["ask", "  "], ["ask", "why " * 600], ["ask", "Who?", "-m", "oracle"], ["retrieve", " "]],
    ids=["help", "empty", "oversized", "unknown-method", "retrieve-empty"],
)
def test_help_and_a_rejected_question_load_no_heavy_library(home, args):
    """The CLI answers these in well under a second: nothing of the LLM, graph or store stack is imported for them."""
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['ambigqa', *{args!r}]\n"
        "try:\n    runpy.run_module('agent', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('loaded:', ' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    loaded = set(proc.stdout.splitlines()[-1].removeprefix("loaded: ").split())
    assert "agent" in loaded and not HEAVY & loaded, proc.stderr


@pytest.mark.parametrize("command", [["serve", "--llm", "fake"], ["mcp", "--llm", "fake"]], ids=["serve", "mcp"])
def test_a_taken_port_is_a_one_line_error_before_anything_starts(home, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = cli(*command, "--port", str(port), home=home)
    assert_one_line_error(proc, f"cannot listen on 127.0.0.1:{port}: Address already in use; choose another --port")
    assert len(proc.stderr.strip().splitlines()) == 1  # no banner, no uvicorn log


def test_unknown_method(home):
    assert_one_line_error(
        cli("ask", "Who?", "--method", "oracle", "--llm", "fake", home=home), "unknown method 'oracle'"
    )


def test_missing_collection(home):
    assert_one_line_error(cli("ask", "Who?", "--llm", "fake", "-c", "nothing-here", home=home), "does not exist")


def test_unknown_llm_provider(home, collection):
    assert_one_line_error(cli("ask", "Who?", "--llm", "gpt-99", "-c", collection, home=home), "unknown LLM provider")


def test_ingest_of_a_bad_file(home, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    assert_one_line_error(cli("ingest", str(bad), "-c", "badfile", home=home), "nothing was ingested")


def test_ingest_reports_added_and_skipped(home, corpus_file):
    first = cli("ingest", str(corpus_file), "-c", "cli-corpus", home=home)
    again = cli("ingest", str(corpus_file), "-c", "cli-corpus", home=home)
    assert first.returncode == 0 and "6 added" in first.stdout and "passages/s" in first.stdout
    assert again.returncode == 0 and "0 added (0 new versions), 0 removed, 6 already stored" in again.stdout


def test_passages_shows_cited_ids_whole_and_names_an_unknown_one(home, collection):
    from tests.conftest import PASSAGES

    shown = cli("passages", "volcano", "hp-us", "-c", collection, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    texts = {p["id"]: p["text"] for p in PASSAGES}
    assert [(p["id"], p["text"]) for p in json.loads(shown.stdout)] == [
        ("volcano", texts["volcano"]), ("hp-us", texts["hp-us"])
    ]  # fmt: skip
    printed = cli("passages", "bread", "-c", collection, home=home)
    assert printed.returncode == 0 and "Sourdough" in printed.stdout and "lactobacilli and yeast." in printed.stdout
    assert_one_line_error(
        cli("passages", "volcano", "atlantis", "-c", collection, home=home), "holds no passage with id 'atlantis'"
    )


def test_demo_question_end_to_end_as_json_with_progress(tmp_path):
    proc = cli(
        "ask", "When was the first pirates of the caribbean movie released?", "--llm", "fake", "--json", home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["method"] == "rag" and result["answer"]
    assert len(result["passages"]) == 5 and result["usage"]["total"]["calls"] == 2
    assert "retrieve" in proc.stderr and "rag_generate" in proc.stderr  # live per-node progress
    assert "first use: embedding the demo corpus" in proc.stderr and "289/289" in proc.stderr  # not silent
    again = cli("ask", "Who?", "--llm", "fake", home=tmp_path)
    assert again.returncode == 0 and "first use" not in again.stderr  # once


@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"], ["ingest", "--help"]])
def test_help(args, home):
    proc = cli(*args, home=home)
    assert proc.returncode == 0 and "Usage" in proc.stdout


def test_ask_clarify_lets_a_person_pick_an_interpretation(home, collection):
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(
        [sys.executable, "-m", "agent", "ask", "When did the Harry Potter film come out?", "--clarify", "--llm", "fake", "-c", collection],
        input="1\n", capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "The question can mean:" in proc.stdout and "  1. " in proc.stdout
    assert "answer_chosen" in proc.stderr  # resumed on the same thread after the choice
    assert (home / "checkpoints.sqlite").is_file()
    assert "thread clarify-" in proc.stderr and "Deserializing unregistered type" not in proc.stderr


def test_a_clarify_thread_reports_its_choice_as_json_and_resumes_later(home, collection):
    question = "When did the Harry Potter film come out?"
    first = cli("ask", question, "--clarify", "--json", "--llm", "fake", "-c", collection, home=home)
    assert first.returncode == 0, first.stderr
    waiting = json.loads(first.stdout)
    assert waiting["status"] == "needs_choice" and waiting["interpretations"] and waiting["question"] == question
    done = cli("ask", "--resume", waiting["thread_id"], "--pick", "1", "--json", home=home)
    assert done.returncode == 0, done.stderr
    answered = json.loads(done.stdout)
    assert (
        answered["status"] == "answered" and answered["answer"] and answered["chosen"] == waiting["interpretations"][:1]
    )
    assert "Deserializing unregistered type" not in first.stderr + done.stderr
    again = cli("ask", "--resume", waiting["thread_id"], "--pick", "1", home=home)
    assert_one_line_error(again, "no clarify thread")  # a finished thread cannot be resumed twice


def test_ask_sets_any_option_and_rejects_unknown_ones_with_the_valid_list(home, collection):
    ok = cli("ask", "Who?", "--set", "top_k=2", "--llm", "fake", "-c", collection, "--json", home=home)
    assert ok.returncode == 0 and len(json.loads(ok.stdout)["passages"]) == 2
    bad = cli("ask", "Who?", "--set", "bogus=1", "--llm", "fake", "-c", collection, home=home)
    assert_one_line_error(bad, "rag has no option bogus; its options: llm, collection")


def test_eval_with_a_bad_setting_is_one_line_error(home, tmp_path):
    dataset = tmp_path / "dev.jsonl"
    dataset.write_text(json.dumps({"id": "q", "question": "Who?", "answers": ["x"]}) + "\n")
    proc = cli(
        "eval",
        "--dataset",
        str(dataset),
        "--methods",
        "rag",
        "--set",
        "rag.top_kk=3",
        "--llm",
        "fake",
        "--out",
        str(tmp_path / "o"),
        home=home,
    )
    assert_one_line_error(proc, "rag has no option top_kk")


def test_eval_of_a_missing_dataset_says_only_that(home, tmp_path):
    proc = cli("eval", "--dataset", str(tmp_path / "none.jsonl"), "--methods", "rag", "--out", str(tmp_path), home=home)
    assert_one_line_error(proc, "none.jsonl does not exist")
    assert "finished runs are kept" not in proc.stderr  # nothing ran, so no results file is pointed to


def test_eval_keeps_checkpoints_and_replays_them_from_a_node(home, collection, tmp_path):
    dataset = tmp_path / "dev.jsonl"
    dataset.write_text(
        json.dumps({"id": "q", "question": "When did the Harry Potter film come out?", "answers": ["2001"]}) + "\n"
    )
    common = ("--dataset", str(dataset), "--methods", "rag", "--llm", "fake", "-c", collection)
    stored = cli("eval", *common, "--out", str(tmp_path / "a"), "--checkpoints", home=home)
    assert stored.returncode == 0, stored.stderr
    assert (tmp_path / "a" / "checkpoints.sqlite").is_file()
    replay = ("--out", str(tmp_path / "b"), "--replay", str(tmp_path / "a"))
    replayed = cli("eval", *common, *replay, "--at", "rag_generate", home=home)
    assert replayed.returncode == 0, replayed.stderr
    assert "replaying 1 stored runs" in replayed.stderr
    row = json.loads((tmp_path / "b" / "results.jsonl").read_text())
    assert row["replayed"]["at"] == "rag_generate" and row["answer"]
    assert_one_line_error(cli("eval", *common, *replay, "--at", "verify", home=home), "rag has no node 'verify'")


def _cli_bytes(*args: bytes, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd()}
    command = [sys.executable.encode(), b"-m", b"agent", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, errors="replace")


def test_a_question_that_is_not_utf8_is_one_line(home, collection):
    proc = _cli_bytes(b"ask", b"When did caf\xe9 open?", b"--llm", b"fake", b"-c", collection.encode(), home=home)
    assert_one_line_error(proc, "not valid UTF-8")


def test_a_bad_top_k_is_one_line(home, collection):
    assert_one_line_error(cli("ask", "Who?", "--top-k", "0", "--llm", "fake", "-c", collection, home=home), "top_k")


def test_a_corpus_that_is_not_utf8_is_one_line(home, tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_bytes(b'{"id": "a", "title": "t", "text": "caf\xe9"}\n')
    assert_one_line_error(cli("ingest", str(corpus), "-c", "latin", home=home), "not UTF-8")


def test_control_characters_never_reach_the_terminal(home, collection):
    proc = cli("ask", "When did \x1b[31mthe film\x07 come out?", "--llm", "fake", "-c", collection, home=home)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr + proc.stdout and "\x07" not in proc.stderr + proc.stdout
    assert "When did [31mthe film come out?" in proc.stderr


def test_ask_reads_a_passages_file_instead_of_retrieving(home, tmp_path):
    question = "When did the Harry Potter film come out?"
    file = tmp_path / "passages.jsonl"
    lines = [
        {"id": "a", "title": "Harry Potter", "text": "The film premiered in London on 4 November 2001."},
        "The film was released in the United States on 16 November 2001.",
    ]
    file.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    proc = cli("ask", question, "--llm", "fake", "--json", "--passages", str(file), "-c", "no-such-collection",
               home=home)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {p["id"] for p in json.loads(proc.stdout)["passages"]} == {"a", "p2"}
    file.write_text('{"text": "fine"}\nnot json\n')
    assert_one_line_error(cli("ask", question, "--llm", "fake", "--passages", str(file), home=home), ":2: not JSON")


def test_ask_prints_the_reasoning_behind_a_short_answer_and_each_hops(home, collection):
    ask = ("ask", "When did the Harry Potter film come out?", "-m", "sunar", "--set", "asu=false", "--llm", "fake")
    proc = cli(*ask, "-c", collection, home=home)
    assert proc.returncode == 0, proc.stderr
    answer, hops = " ".join(proc.stdout.split()).split(" Hops ", 1)  # the terminal may wrap lines
    assert answer.endswith("passage [1] is about Harry Potter and the Philosopher's Stone (film).")  # MER's reasoning
    assert "hp-premiere] passage [1] is about" in hops  # each hop's own, under its cited passages
    as_json = json.loads(cli(*ask, "-c", collection, "--json", home=home).stdout)
    assert as_json["extra"]["reasoning"].startswith("passage [1] is about") and as_json["extra"]["hops"][0]["reasoning"]
