"""`ambigqa mcp` driven by the MCP SDK's own client over stdio: one tool per method, answers as text plus structured
content, bad calls as tool errors (the server stays up)."""

import os
import sys

import anyio
import pytest

from tests.conftest import PASSAGES

QUESTION = "When did the Harry Potter film come out?"


def _session(home, collection, calls, **client):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent", "mcp", "--llm", "fake", "-c", collection],
        env={"AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), "HF_HUB_OFFLINE": "1"},
        cwd=os.getcwd(),
    )

    async def main():
        async with Client(params, **client) as session:
            return await calls(session)

    return anyio.run(main)


def test_an_mcp_client_lists_the_tools_and_gets_answers_with_structured_content(home, collection):
    from agent.registry import METHODS

    async def calls(client):
        tools = (await client.list_tools()).tools
        answer = await client.call_tool("ask_diva", {"question": QUESTION, "options": {"top_k": 3}})
        empty = await client.call_tool("ask_rag", {"question": ""})
        llm = await client.call_tool("ask_rag", {"question": QUESTION, "options": {"llm": "local"}})
        bogus = await client.call_tool("ask_rag", {"question": QUESTION, "options": {"bogus": 1}})
        after = await client.call_tool("ask_closed_book", {"question": QUESTION})
        cited = sorted({i for d in answer.structured_content["interpretations"] for i in d["passage_ids"]})
        read = await client.call_tool("read_passages", {"ids": cited})
        unknown = await client.call_tool("read_passages", {"ids": ["atlantis"]})
        return tools, answer, empty, llm, bogus, after, read, unknown

    tools, answer, empty, llm, bogus, after, read, unknown = _session(home, collection, calls)
    by_name = {t.name: t for t in tools}
    assert sorted(by_name) == sorted([*(f"ask_{m}" for m in METHODS), "clarify", "resume", "read_passages"])
    assert "Cost:" in by_name["ask_diva"].description and "question" in by_name["ask_diva"].input_schema["required"]
    assert not answer.is_error and answer.content[0].text == answer.structured_content["answer"]
    content = answer.structured_content
    assert content["interpretations"] and all("passage_ids" in i for i in content["interpretations"])
    assert content["route"] in ("rag", "closed_book") and content["grade"] and content["usage"]["calls"] >= 4
    assert empty.is_error  # min_length: the SDK refuses it before our code runs
    assert llm.is_error and "cannot be set per call" in llm.content[0].text
    assert bogus.is_error and "rag has no option bogus" in bogus.content[0].text
    assert not after.is_error and after.content[0].text  # the server stayed up
    texts = {p["id"]: p["text"] for p in PASSAGES}
    passages = read.structured_content["passages"]
    assert not read.is_error and passages and all(p["text"] == texts[p["id"]] for p in passages)
    assert unknown.is_error and "holds no passage with id 'atlantis'" in unknown.content[0].text


def test_an_mcp_client_clarifies_a_question_and_resumes_the_thread_with_a_pick(home, collection):
    async def calls(client):
        waiting = await client.call_tool("clarify", {"question": QUESTION})
        thread = waiting.structured_content["thread_id"]
        done = await client.call_tool("resume", {"thread_id": thread, "picks": [1]})
        again = await client.call_tool("resume", {"thread_id": thread, "picks": [1]})
        llm = await client.call_tool("clarify", {"question": QUESTION, "options": {"llm": "local"}})
        return waiting, done, again, llm

    waiting, done, again, llm = _session(home, collection, calls)
    content = waiting.structured_content
    assert not waiting.is_error and content["status"] == "needs_choice" and content["interpretations"]
    assert "The question can mean:" in waiting.content[0].text and content["thread_id"] in waiting.content[0].text
    assert not done.is_error and done.structured_content["chosen"] == content["interpretations"][:1]
    assert done.content[0].text == done.structured_content["answer"]
    assert again.is_error and "has been answered" in again.content[0].text
    assert llm.is_error and "cannot be set per call" in llm.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # MCP 2026-07-28 (the form as a retry) and 2025-11-25 (mid-call)
def test_clarify_asks_the_user_through_elicitation_where_the_client_supports_it(home, collection, mode):
    from mcp_types import ElicitResult

    asked, replies = [], iter([{"picks": ["2"]}, None, {"picks": ["9"]}])

    async def on_elicit(context, params):
        asked.append(params)
        picks = next(replies)
        return ElicitResult(action="accept", content=picks) if picks else ElicitResult(action="decline")

    async def calls(client):
        answered = await client.call_tool("clarify", {"question": QUESTION})
        declined = await client.call_tool("clarify", {"question": QUESTION})
        wrong = await client.call_tool("clarify", {"question": QUESTION})
        thread = wrong.content[0].text.split("thread ")[1].split()[0]
        after = await client.call_tool("resume", {"thread_id": thread, "picks": [1]})
        return answered, declined, wrong, after

    answered, declined, wrong, after = _session(home, collection, calls, elicitation_callback=on_elicit, mode=mode)
    form = asked[0].requested_schema["properties"]["picks"]
    readings = [choice["title"] for choice in form["items"]["anyOf"]]
    assert form["type"] == "array" and [c["const"] for c in form["items"]["anyOf"]] == [
        str(n) for n in range(1, len(readings) + 1)
    ]
    assert len(readings) >= 2 and QUESTION in asked[0].message
    assert not answered.is_error and answered.structured_content["status"] == "answered"
    assert answered.structured_content["chosen"] == readings[1:2]
    assert declined.structured_content["status"] == "needs_choice"  # a declined form leaves the resume route
    assert declined.structured_content["interpretations"] == readings
    assert (
        wrong.is_error
        and "no interpretation numbered 9" in wrong.content[0].text
        and "waits for resume" in wrong.content[0].text
    )
    assert not after.is_error and after.structured_content["chosen"] == readings[:1]


def test_an_mcp_call_brings_its_own_passages(home, collection):
    given = ["Harry Potter and the Philosopher's Stone premiered in London on 4 November 2001.", "Bananas are yellow."]

    async def calls(client):
        own = await client.call_tool("ask_madam", {"question": QUESTION, "passages": given})
        bad = await client.call_tool("ask_rag", {"question": QUESTION, "passages": ["x" * 20_001]})
        closed = await client.call_tool("ask_closed_book", {"question": QUESTION, "passages": given})
        titled = [{"id": "hp", "title": "Harry Potter (film)", "text": given[0]}]
        sunar = await client.call_tool(
            "ask_sunar", {"question": QUESTION, "passages": titled, "options": {"asu": False}}
        )
        return own, bad, closed, sunar

    own, bad, closed, sunar = _session(home, collection, calls)
    assert not own.is_error and {p["id"] for p in own.structured_content["passages"]} == {"p1", "p2"}
    assert own.structured_content["answers"] and "rejected_ids" in own.structured_content
    assert bad.is_error and "20,001 characters" in bad.content[0].text
    assert closed.is_error and "reads no passages" in closed.content[0].text
    assert not sunar.is_error and sunar.structured_content["reasoning"] == "passage [1] is about Harry Potter (film)."
    assert sunar.structured_content["hops"][0]["reasoning"]  # and each hop's, to check what the answer rests on


def test_a_tool_call_that_asks_for_progress_hears_each_node_finish(home, collection):
    heard = []

    async def on_progress(progress, total, message):
        heard.append((progress, message))

    async def calls(client):
        quiet = await client.call_tool("ask_rag", {"question": QUESTION})
        told = await client.call_tool("ask_rag", {"question": QUESTION}, progress_callback=on_progress)
        return quiet, told

    quiet, told = _session(home, collection, calls)
    assert not quiet.is_error and not told.is_error and told.content[0].text
    nodes = [message.split(" done")[0] for _, message in heard]
    assert nodes[:2] == ["retrieve", "rag_extract"] and "finish_answer" in nodes
    assert [progress for progress, _ in heard] == list(range(1, len(heard) + 1))
