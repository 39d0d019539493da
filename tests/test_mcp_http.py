"""`ambigqa mcp --port` over real streamable HTTP on 127.0.0.1, driven by the MCP SDK's own client: the operator's key
on every request (any Unicode key, compared as UTF-8 bytes), and at most --max-concurrent graph runs at once, the
rest a tool error instead of a queue."""

import os
import subprocess
import sys
import threading
import time

import anyio
import httpx
import pytest

from tests.conftest import completion, start_chat_endpoint
from tests.test_server import _free_port

pytestmark = pytest.mark.heavy  # MCP servers over HTTP

QUESTION = "When did the Harry Potter film come out?"
KEY = "ключ-🔑"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def serve_mcp(home, *args, env_extra=None):
    """``ambigqa mcp --port`` in a subprocess; (process, URL of /mcp) once it answers."""
    port = _free_port()
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), **(env_extra or {})}
    env.pop("AMBIGQA_API_KEY", None)
    command = [sys.executable, "-m", "agent", "mcp", "--port", str(port), *args]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read())
        try:
            httpx.get(url, timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("the MCP server did not start")


def session(url, headers, calls):
    """Run ``calls(client)`` in an MCP client session over streamable HTTP that sends ``headers``."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await calls(client)

    return anyio.run(main)


@pytest.fixture(scope="module")
def keyed(served_home):
    proc, url = serve_mcp(served_home, "--llm", "fake", "-c", "tiny", "--api-key", KEY)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.parametrize(
    "headers",
    [{}, {"X-API-Key": b"????"}, {"X-API-Key": KEY[:-1].encode()}, {"X-API-Key": (KEY + "x").encode()},
     {"X-API-Key": KEY.encode("utf-8").decode("latin-1").encode("utf-8")}, {"Authorization": b"Basic " + KEY.encode()},
     {"Authorization": b"Bearer ????"}, {"X-API-Key": b""}],
)  # fmt: skip
def test_mcp_over_http_refuses_a_request_without_the_key(keyed, headers):
    other = keyed.replace("/mcp", "/elsewhere")
    for method, url in [("POST", keyed), ("GET", keyed), ("DELETE", keyed), ("POST", other)]:
        r = httpx.request(method, url, headers={**ACCEPT, **headers}, json=INITIALIZE, timeout=30)
        assert r.status_code == 401 and "X-API-Key" in r.json()["detail"], (method, url, r.status_code)


def test_mcp_over_http_takes_the_unicode_key_as_utf8_in_either_header(keyed):
    for header in [{"X-API-Key": KEY.encode()}, {"Authorization": b"Bearer " + KEY.encode()}]:
        r = httpx.post(keyed, headers={**ACCEPT, **header}, json=INITIALIZE, timeout=30)
        assert r.status_code == 200 and "serverInfo" in r.text

    async def calls(client):
        tools = (await client.list_tools()).tools
        return tools, await client.call_tool("ask_rag", {"question": QUESTION})

    tools, answer = session(keyed, {"Authorization": b"Bearer " + KEY.encode()}, calls)
    assert "ask_rag" in {t.name for t in tools}
    assert not answer.is_error and answer.structured_content["answer"] == answer.content[0].text


@pytest.fixture
def slow_endpoint():
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers each chat completion after ``delay`` seconds and records
    the most requests it held at once."""
    state = {"delay": 2.0, "now": 0, "most": 0, "served": 0}
    lock = threading.Lock()

    def respond(_request):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(state["delay"])
        with lock:
            state["now"] -= 1
            state["served"] += 1
        return 200, completion("Final Answer: In November 2001.")

    url, server = start_chat_endpoint(respond)
    yield url, state
    server.shutdown()


def test_mcp_over_http_runs_at_most_max_concurrent_graphs_and_refuses_the_rest(served_home, slow_endpoint):
    home, collection = served_home, "tiny"
    url, state = slow_endpoint
    env = {"AMBIGQA_OPENAI_BASE_URL": url, "AMBIGQA_OPENAI_API_KEY": "x", "AMBIGQA_LLM_TIMEOUT": "30"}
    args = ("--llm", "openai", "-c", collection, "--max-concurrent", "2", "--queue-timeout", "0.5", "--api-key", KEY)
    proc, mcp_url = serve_mcp(home, *args, env_extra=env)
    try:

        async def calls(client):
            results = []

            async def ask():
                results.append(await client.call_tool("ask_closed_book", {"question": QUESTION}))

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(ask)
            return results, await client.call_tool("ask_closed_book", {"question": QUESTION})

        burst, after = session(mcp_url, {"X-API-Key": KEY.encode()}, calls)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    answered = [r for r in burst if not r.is_error]
    busy = [r.content[0].text for r in burst if r.is_error]
    assert len(answered) == 2 and all("2001" in r.content[0].text for r in answered), [r.content for r in burst]
    assert len(busy) == 4 and all("busy" in text and "\n" not in text for text in busy), busy
    assert state["most"] <= 2  # never more graph runs at the LLM than slots
    assert not after.is_error  # the slots came back
