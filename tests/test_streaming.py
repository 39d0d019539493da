"""The answer streamed as it is written: the runner's on_token, the CLI, LangServe's stream_events (the Agent
Server's messages stream is in test_agent_server.py). The scripted model streams word by word, as an endpoint does."""

import asyncio
import json

import httpx
import pytest

import agent
from agent.llm.calls import ANSWER_TAG
from tests.test_cli import cli
from tests.test_server import KEY, QUESTION, server  # noqa: F401 (the served fixture)

EXTRACT = '{"pairs": [{"question": "When was its world premiere?", "answer": "4 November 2001"}, {"question": "When was it released in the US?", "answer": "16 November 2001"}]}'
DRAFT = (
    "The film had its world premiere in London on 4 November 2001, and it was released in cinemas in the United "
    "States on 16 November 2001."
)


def test_on_token_gets_the_answer_as_it_is_written_and_nothing_else(collection, scripted):
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": DRAFT})
    pieces: list[tuple[str, str]] = []
    result = agent.run(
        QUESTION, method="rag", llm=name, collection=collection, on_token=lambda t, n: pieces.append((n, t))
    )
    assert len(pieces) > 5  # word by word, not the whole answer at the end
    assert {node for node, _ in pieces} == {"rag_generate"}  # the extraction's JSON is not the answer
    assert "".join(text for _, text in pieces) == DRAFT
    assert result.answer.startswith("The film had its world premiere")  # the finished answer (citations added)


def test_arun_streams_the_same_pieces(collection, scripted):
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": DRAFT})
    pieces: list[str] = []
    asyncio.run(
        agent.arun(QUESTION, method="rag", llm=name, collection=collection, on_token=lambda t, n: pieces.append(t))
    )
    assert "".join(pieces) == DRAFT


def test_a_run_without_a_listener_streams_nothing_and_counts_the_same_usage(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": DRAFT})
    quiet = agent.run(QUESTION, method="rag", llm=name, collection=collection)
    streamed = agent.run(QUESTION, method="rag", llm=name, collection=collection, on_token=lambda t, n: None)
    assert quiet.usage.total.calls == streamed.usage.total.calls
    assert quiet.usage.total.output_tokens == streamed.usage.total.output_tokens
    assert all(call.kwargs.get("stream") is False for call in model.calls if call.prompt == "rag_extract")


def test_a_failing_streamed_run_raises_the_error_instead_of_hanging(collection, scripted):
    from agent.errors import LLMError

    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": DRAFT})
    model.fail_with = ConnectionError("the endpoint went away")
    with pytest.raises((LLMError, ConnectionError)):
        agent.run(QUESTION, method="rag", llm=name, collection=collection, on_token=lambda t, n: None)


def test_ask_shows_the_answer_being_written_on_stderr_unless_no_stream(served_home):
    home = served_home  # a subprocess: never the store this process has open
    streamed = cli("ask", QUESTION, "--llm", "fake", home=home)
    assert streamed.returncode == 0, streamed.stderr
    writing = [line for line in streamed.stderr.splitlines() if "✎" in line]
    assert writing and "rag_generate" in writing[0] and "can be read in" in writing[0]
    assert "can be read in" in streamed.stdout  # the finished answer on stdout, as before
    waited = cli("ask", QUESTION, "--llm", "fake", "--no-stream", home=home)
    assert waited.returncode == 0 and "✎" not in waited.stderr
    assert waited.stdout == streamed.stdout


def test_langserve_stream_events_carry_the_answer_tokens_tagged(server):  # noqa: F811
    tokens = []
    body = {"input": {"question": QUESTION}, "version": "v2"}
    with httpx.stream("POST", f"{server}/rag/stream_events", json=body, headers=KEY, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event.get("event") == "on_chat_model_stream" and ANSWER_TAG in event.get("tags", []):
                tokens.append(event["data"]["chunk"]["content"])
    assert len(tokens) > 5 and "can be read in" in "".join(tokens)
