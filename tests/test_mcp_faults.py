"""The documented fault answers through every MCP tool, driven by the MCP SDK's client over stdio: an LLM that is down,
an LLM that answers garbage, a database that is down and a missing collection are each a one-line tool error saying
so (isError), never a crash; the server answers the next call, and a clarify thread whose resume failed still waits.

One server per fault answers a call of every tool; each tool's answer is a test of its own. The LLM is named by the
settings (``AMBIGQA_LLM``), not ``--llm``: a clarify thread keeps the provider name it was started with, so a thread
started with the scripted model in one process resumes with the faulty one in the next."""

import os
import sys

import anyio
import pytest

from agent.registry import METHODS
from tests.conftest import completion, start_chat_endpoint
from tests.test_server import _free_port

pytestmark = pytest.mark.heavy  # an MCP server process per case, databases that are down

QUESTION = "When did the Harry Potter film come out?"
GARBAGE = "%%%@@@ garbage ~~~"
GRAPH_TOOLS = [*(f"ask_{m}" for m in METHODS), "clarify", "resume"]
FAULTS = ("llm_down", "llm_garbage", "database_down", "missing_collection")


def session(home, env, calls):
    """Run ``calls(client)`` against ``ambigqa mcp`` over stdio, its settings from ``env``."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent", "mcp"],
        env={"AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), "HF_HUB_OFFLINE": "1", **env},
        cwd=os.getcwd(),
    )

    async def main():
        async with Client(params) as client:
            return await calls(client)

    return anyio.run(main)


def every_tool(thread_id):
    """Calls of every tool once (``resume`` on ``thread_id``), then one more; their results by tool name."""

    async def calls(client):
        results = {f"ask_{m}": await client.call_tool(f"ask_{m}", {"question": QUESTION}) for m in METHODS}
        results["clarify"] = await client.call_tool("clarify", {"question": QUESTION})
        results["resume"] = await client.call_tool("resume", {"thread_id": thread_id, "picks": [1]})
        results["read_passages"] = await client.call_tool("read_passages", {"ids": ["hp-premiere"]})
        results["after"] = await client.call_tool("ask_closed_book", {"question": QUESTION})
        return results

    return calls


def one_line_error(result) -> str:
    text = result.content[0].text
    assert result.is_error and text and "\n" not in text and "Traceback" not in text, text
    return text


@pytest.fixture(scope="module")
def garbage_endpoint():
    """An OpenAI-compatible endpoint on 127.0.0.1 whose every chat completion is ``GARBAGE``."""
    url, server = start_chat_endpoint(lambda _: (200, completion(GARBAGE)))
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def scripted_env(collection):
    return {"AMBIGQA_LLM": "fake", "AMBIGQA_COLLECTION": collection}


@pytest.fixture(scope="module")
def waiting(home, scripted_env):
    """Clarify threads started with the scripted model, each waiting for a choice: one per fault."""

    async def calls(client):
        return [await client.call_tool("clarify", {"question": QUESTION}) for _ in FAULTS]

    started = session(home, scripted_env, calls)
    assert all(r.structured_content["status"] == "needs_choice" for r in started)
    return dict(zip(FAULTS, (r.structured_content["thread_id"] for r in started)))


@pytest.fixture(scope="module")
def closed_port():
    return _free_port()  # nothing listens there


@pytest.fixture(scope="module")
def faulty(home, scripted_env, waiting, garbage_endpoint, closed_port):
    """``faulty(fault)``: every tool's result from a server with that fault (one server per fault, run once)."""
    openai = {"AMBIGQA_LLM": "openai", "AMBIGQA_OPENAI_API_KEY": "x"}
    envs = {
        "llm_down": {**openai, "AMBIGQA_OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port}/v1"},
        "llm_garbage": {**openai, "AMBIGQA_OPENAI_BASE_URL": garbage_endpoint},
        "database_down": {"AMBIGQA_DATABASE_URL": f"postgresql://ambigqa:s3cret@127.0.0.1:{closed_port}/db"},
        "missing_collection": {"AMBIGQA_COLLECTION": "nowhere"},
    }
    answered: dict[str, dict] = {}

    def results(fault):
        if fault not in answered:
            answered[fault] = session(home, {**scripted_env, **envs[fault]}, every_tool(waiting[fault]))
        return answered[fault]

    return results


@pytest.mark.parametrize("tool", GRAPH_TOOLS)
def test_an_llm_that_is_down_is_a_tool_error_saying_so(faulty, tool):
    assert "LLM endpoint unreachable" in one_line_error(faulty("llm_down")[tool])


FREE_TEXT = ("ask_sunar", "ask_madam")  # the papers' answers are free text: a reply without their labels is read as one


@pytest.mark.parametrize("tool", [t for t in GRAPH_TOOLS if t not in FREE_TEXT])
def test_an_llm_answering_garbage_is_a_tool_error_saying_so(faulty, tool):
    assert "no usable" in one_line_error(faulty("llm_garbage")[tool])


@pytest.mark.parametrize("tool", FREE_TEXT)
def test_free_text_methods_read_an_unlabelled_reply_as_their_answer(faulty, tool):
    """SUNAR's short answer is a reply's first line, a MADAM agent's its first sentence (their documented fallbacks):
    a reply with letters in it is an answer, not a fault, whatever it says."""
    result = faulty("llm_garbage")[tool]
    assert not result.is_error and "garbage" in result.content[0].text


@pytest.mark.parametrize("fault", ["llm_down", "llm_garbage"])
def test_passages_stay_readable_while_the_llm_fails(faulty, fault):
    read = faulty(fault)["read_passages"]
    assert not read.is_error and "4 November 2001" in read.content[0].text


@pytest.mark.parametrize("tool", [t for t in [*GRAPH_TOOLS, "read_passages"] if t != "ask_closed_book"])
def test_a_database_that_is_down_is_a_tool_error_naming_its_host_not_its_password(faulty, closed_port, tool):
    text = one_line_error(faulty("database_down")[tool])
    assert f"127.0.0.1:{closed_port}" in text and "s3cret" not in text, text


@pytest.mark.parametrize(
    "tool", [t for t in [*GRAPH_TOOLS, "read_passages"] if t not in ("ask_closed_book", "clarify")]
)
def test_a_missing_collection_is_a_tool_error_naming_it(faulty, tool):
    assert "'nowhere'" in one_line_error(faulty("missing_collection")[tool])


def test_what_needs_no_store_still_answers_without_one(faulty):
    """closed_book reads no collection and no database; clarify reads no passage before the person chooses."""
    for fault in ("database_down", "missing_collection"):
        assert not faulty(fault)["ask_closed_book"].is_error, fault
    assert faulty("missing_collection")["clarify"].structured_content["status"] == "needs_choice"


@pytest.mark.parametrize("fault", FAULTS)
def test_the_server_answers_the_call_after_a_fault(faulty, fault):
    after = faulty(fault)["after"]
    assert after.content[0].text and (after.is_error == fault.startswith("llm")), after.content[0].text


def test_a_resume_that_failed_leaves_its_thread_waiting(home, scripted_env, waiting, faulty):
    failed = [fault for fault in FAULTS if faulty(fault)["resume"].is_error]
    assert failed == list(FAULTS)

    async def calls(client):
        return [await client.call_tool("resume", {"thread_id": waiting[fault], "picks": [1]}) for fault in failed]

    for fault, done in zip(failed, session(home, scripted_env, calls)):
        assert not done.is_error and done.structured_content["status"] == "answered", (fault, done.content[0].text)
