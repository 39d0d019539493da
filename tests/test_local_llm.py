"""The real embedded model (slow, minutes): selected by `make test`, skipped by `make test-fast`."""

from pathlib import Path

import pytest

import agent

pytestmark = pytest.mark.slow


def test_local_model_answers_a_demo_question_through_rag(home):
    question = "Who plays lord beric in game of thrones?"
    streamed: list[str] = []  # the answer streams, and the streamed call still reports its tokens
    result = agent.run(
        question,
        method="rag",
        llm="local",
        collection="demo",
        temperature=0.0,
        on_token=lambda t, _: streamed.append(t),
    )
    assert streamed
    assert len(result.passages) == 5
    # a sentence, not a bare name: 9 words on an AMX CPU (weights as stored), more where llama.cpp repacks them
    assert len(result.answer.split()) >= 6, result.answer
    assert result.usage.total.calls >= 2
    assert result.usage.by_node["rag_extract"].input_tokens > 500  # instructions, few-shot and 5 passages
    assert result.usage.by_node["rag_generate"].output_tokens > 0
    generate = result.usage.by_node["rag_generate"]  # the server reports its prefix-cache hits: examples and passages
    assert generate.cached_tokens > 0.8 * generate.input_tokens, generate
    grounded = " ".join([result.answer] + [d.answer for d in result.disambiguations]).lower()
    assert "dormer" in grounded or "david scott" in grounded, result.answer


def test_a_prompt_family_keeps_its_instructions_prefilled_across_another_family(home):
    """The embedded server keeps the context of a prompt family it leaves (agent.llm.prefix_states): after an
    unrelated prompt, the next prompt of the first family prefills only what follows their shared instructions."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from agent.llm.factory import get_chat_model
    from agent.llm.usage import call_usage

    model = get_chat_model("local").bind(max_tokens=4, temperature=0.0)
    rules = " ".join(f"Rule {n}: answer with one word, the name of the capital city asked for." for n in range(1, 25))

    def ask(system: str, question: str):
        return call_usage(model.invoke([SystemMessage(system), HumanMessage(question)]), 0.0)

    first = ask(rules, "What is the capital of France?")
    other = ask("You translate English words into German, one word only.", "house")
    again = ask(rules, "What is the capital of Italy?")
    assert first.input_tokens > 300 and other.cached_tokens < 10
    assert again.cached_tokens >= first.input_tokens - 20, (first, again)  # all but the question and turn markers


def test_a_new_server_starts_with_a_shared_system_message_evaluated(home):
    """A system message two prompts share and then differ after (a fixed casebook) goes to disk (``DiskStates``):
    the next server process prefills only what follows it."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from agent.llm import server_launcher as servers
    from agent.llm.factory import get_chat_model
    from agent.llm.usage import call_usage
    from agent.settings import get_settings

    # a system message no other test sends (the home, and its states, last the whole session)
    rules = " ".join(
        f"Law {n}: reply with a single word, the river that flows through the city named." for n in range(1, 25)
    )

    def ask(question: str):
        model = get_chat_model("local").bind(max_tokens=4, temperature=0.0)
        return call_usage(model.invoke([SystemMessage(rules), HumanMessage(question)]), 0.0)

    def states() -> set:
        return set((home / "llm-states").glob("*/*.npz"))

    before = states()
    first = ask("Which river flows through Paris?")
    ask("Which river flows through Vienna?")  # the same system message, other content: it goes to disk
    assert len(states() - before) == 1, (before, states())
    servers.local_server(get_settings()).stop()
    warm = ask("What is the capital of Italy?")  # a new process
    assert warm.cached_tokens >= first.input_tokens - 20, (first, warm)


def test_the_latency_suite_reports_a_method_against_its_floor_on_the_embedded_model(home):
    from agent.eval.bench_latency import latency_suite, variants
    from agent.eval.datasets import Example

    # a question no other test asks: its passages are new to the server, so they are prefilled at least once
    example = Example(
        id="hudson",
        question="Who did doc hudson's voice in cars?",
        qa_pairs=[{"question": "Who voiced Doc Hudson in the 2006 film Cars?", "short_answers": ["Paul Newman"]}],
        long_answers=["Paul Newman voiced Doc Hudson in the 2006 film Cars."],
    )
    results = latency_suite([example], variants(["rag"], []), "demo", llm="local", log=lambda _: None)
    rates, means = results["rates"], results["summary"]["rag"]["means"]
    assert rates["prefill_tok_s"] > 0 and rates["generate_tok_s"] > 0
    assert 0 < means["first_token_s"] < means["seconds"]
    assert means["prompt_tokens"] > means["own_tokens"] > 0 and means["prefilled_tokens"] > 0
    assert 0 < means["floor_s"] < means["seconds"] and means["floor_multiple"] > 1  # new passages must be prefilled


def test_doctor_measures_the_embedded_server_and_reports_what_llama_cpp_chose(home):
    from agent.doctor import run_checks
    from agent.settings import get_settings

    report = run_checks(get_settings())
    assert report.ok, report
    assert [c.name for c in report.checks] == ["model file", "LLM", "embeddings", "store"]
    assert report.checks[0].details["bytes"] == 1_117_320_768
    run = report.checks[1].details["runs"][0]
    assert run["prefill_tok_s"] > 0 and run["generate_tok_s"] > 0 and run["completion_tokens"] > 0
    assert "SSE3" in run["cpu_features"]  # every x86-64 CPU llama.cpp runs on
    assert ("CPU_REPACK" in run["buffers_mib"] or "AMX" in run["buffers_mib"]) == run["repacking"], run


def _request_waiting(port: int) -> bool:
    """Whether a connection to ``port`` on this machine holds bytes its server has not read yet."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state, queues = row.split()[1], row.split()[3], row.split()[4]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "01" and int(queues.split(":")[1], 16) > 0:
                return True  # ESTABLISHED, with a receive queue
    return False


def test_a_server_that_dies_mid_call_is_a_crash_and_the_next_call_starts_a_fresh_one(home, monkeypatch):
    import concurrent.futures
    import os
    import signal
    import time
    from urllib.parse import urlsplit

    from agent.doctor import server_facts
    from agent.errors import LLMCrashError
    from agent.llm import server_launcher as servers
    from agent.llm.calls import LLMOptions, ask
    from agent.llm.parsing import parse_long_answer
    from agent.settings import get_settings

    monkeypatch.setattr(servers, "_crashed_repacking", {})  # this test's crash must not slow the later tests
    settings = get_settings()
    first = servers.local_server(settings)
    options = LLMOptions(llm="local", temperature=0.0, max_tokens=200)
    pid, port = first.process.pid, urlsplit(first.url).port
    os.kill(pid, signal.SIGSTOP)  # the server holds still until the request is in its socket, whatever the CPU's speed
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            call = pool.submit(
                ask, "closed_book", options, parse=parse_long_answer, question="Who wrote the novel Dracula and when?"
            )
            deadline = time.monotonic() + 60
            while not _request_waiting(port):
                assert not call.done() and time.monotonic() < deadline, "the request never reached the server"
                time.sleep(0.01)
            os.kill(pid, signal.SIGSEGV)  # delivered when the server runs again: it dies mid-call
            os.kill(pid, signal.SIGCONT)
            with pytest.raises(LLMCrashError) as crash:
                call.result(timeout=120)
    finally:
        if first.alive():
            os.kill(pid, signal.SIGCONT)  # never leave a stopped server behind
    message = str(crash.value)
    assert "died by SIGSEGV during the call" in message and str(first.log_path) in message, message
    assert "Fatal Python error: Segmentation fault" in message  # faulthandler's line from the server's log
    assert "unreachable" not in message and "\n" not in message

    reply = ask("closed_book", LLMOptions(llm="local", max_tokens=8), parse=parse_long_answer, question="Hi?")
    second = servers.local_server(settings)
    assert reply.text and second.process.pid != first.process.pid and second.alive()
    assert not second.repack.on  # a death by signal with repacking on: the next server loads without it
    buffers = server_facts(second.log_lines())["buffers_mib"]
    assert buffers and not {"CPU_REPACK", "AMX"} & set(buffers), buffers  # the weights as stored


def test_llm_openai_answers_through_a_separately_started_llama_cpp_server(home, tmp_path):
    """``--llm openai`` pointed at llama-cpp-python's own server, started as a user would: the structured calls (a
    json_schema response format, or the json_object form where a server refuses that) and the answer go through, and
    the CLI answers from the demo corpus."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from agent.llm.gguf import ensure_gguf
    from agent.llm.server_launcher import repacking
    from agent.settings import get_settings

    settings = get_settings()
    model = ensure_gguf(settings.local_model, settings.model_dir)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # the plain server where llama.cpp may repack weights; where it crashes doing so (AMX), the same server without it
    server = ["-m", "llama_cpp.server"] if repacking(settings).on else ["-m", "agent.llm.server_child", "--no_repack"]
    args = ["--model", str(model), "--model_alias", "served", "--port", str(port), "--n_ctx", "4096"]
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([sys.executable, *server, *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(1)
        env = {
            **os.environ, "AMBIGQA_OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "AMBIGQA_OPENAI_MODEL": "served",
            "AMBIGQA_LLM_TIMEOUT": "600",  # a CPU server prefills a long prompt for a minute; remote endpoints get 20 s
        }  # fmt: skip
        question = "Who plays lord beric in game of thrones?"
        command = [sys.executable, "-m", "agent", "ask", question, "--llm", "openai", "--json", "-q"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout)
        assert len(result["answer"].split()) >= 6, result["answer"]
        assert result["disambiguations"], result  # the structured extraction was parsed, not a fallback
    finally:
        process.terminate()
        process.wait(30)
        log.close()
    served = (tmp_path / "server.log").read_text()
    assert served.count('"POST /v1/chat/completions HTTP/1.1" 200') >= 2  # extraction and answer, both accepted
