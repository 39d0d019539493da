"""The LangGraph Agent Server (`langgraph dev` from langgraph.json) with our auth and http.app: the key, the request
checks, /passages, and a clarify thread driven by the LangGraph SDK client."""

import httpx
import pytest

from tests.conftest import langgraph_dev

pytestmark = pytest.mark.heavy

KEY = "sesame"
QUESTION = "When did the Harry Potter film come out?"


@pytest.fixture(scope="module")
def server(served_home):
    env = {
        "AMBIGQA_HOME": str(served_home), "AMBIGQA_LLM": "fake", "AMBIGQA_COLLECTION": "tiny",
        "AMBIGQA_API_KEY": KEY, "AMBIGQA_SERVED_COLLECTIONS": "tiny,never-ingested",
    }  # fmt: skip
    with langgraph_dev(env) as base:
        yield base


def post(base: str, path: str, body: dict, key: str | None = KEY) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, headers={"X-API-Key": key} if key else {}, timeout=120)


@pytest.mark.parametrize("key", [None, "wrong", KEY.upper()])
@pytest.mark.parametrize("path", ["/assistants/search", "/runs/wait", "/passages"])
def test_every_route_wants_the_key(server, path, key):
    body = {"assistant_id": "rag", "input": {"question": QUESTION}} if path == "/runs/wait" else {"ids": ["hp-us"]}
    r = post(server, path, body, key)
    assert r.status_code == 401, r.text
    assert "X-API-Key" in r.text and KEY not in r.text


@pytest.mark.parametrize(
    ("run", "fragment"),
    [({"input": {"question": "  "}}, "the question is empty"),
     ({"input": {"question": "x" * 5000}}, "characters; the limit is"),
     ({"input": {"messages": [{"type": "ai", "content": "hello"}]}}, "the question is empty"),
     ({"input": {"question": QUESTION}, "context": {"collection": "secret"}}, "'secret' is not served"),
     ({"input": {"question": QUESTION}, "context": {"llm": "local"}}, "'llm' cannot be set"),
     ({"input": {"question": QUESTION}, "context": {"top_k": 0}}, "top_k")],
)  # fmt: skip
def test_a_bad_run_is_a_one_line_422_before_any_run_starts(server, run, fragment):
    r = post(server, "/runs/wait", {"assistant_id": "rag", **run})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert fragment in detail and "\n" not in detail


def test_an_oversized_body_is_refused(server):
    r = post(server, "/runs/wait", {"assistant_id": "rag", "input": {"question": QUESTION, "pad": "x" * 70_000}})
    assert r.status_code == 413, r.text


def test_a_run_with_the_key_answers_and_passages_come_whole(server):
    r = post(server, "/runs/wait", {"assistant_id": "rag", "input": {"question": QUESTION}})
    assert r.status_code == 200, r.text
    output = r.json()
    assert output["answer"] and output["passages"]
    cited = [p["id"] for p in output["passages"]]
    got = post(server, "/passages", {"ids": cited[:2]})
    assert got.status_code == 200, got.text
    assert [p["id"] for p in got.json()] == cited[:2] and all(p["text"] for p in got.json())
    unknown = post(server, "/passages", {"ids": ["no-such-id"]})
    assert unknown.status_code == 404 and "no-such-id" in unknown.json()["detail"]


def test_clarify_through_the_sdk_client_interrupts_and_resumes(server):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=KEY)  # the SDK sends its api_key as X-API-Key
    thread = client.threads.create()
    waiting = client.runs.wait(thread["thread_id"], "router", input={"question": QUESTION}, context={"clarify": True})
    interrupts = waiting["__interrupt__"]
    offered = interrupts[0]["value"]["interpretations"]
    assert len(offered) >= 2 and interrupts[0]["value"]["question"] == QUESTION
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["clarify"]
    done = client.runs.wait(thread["thread_id"], "router", command={"resume": [1]}, context={"clarify": True})
    assert done["answer"] and done["chosen"] == offered[:1], done
    assert "__interrupt__" not in done


def test_a_chat_front_end_runs_the_clarify_flow_with_messages_and_human_responses(server):
    """What agent-chat-ui sends: a messages list, then its human response to the interrupt; the answer comes back as
    the thread's last AI message."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=KEY)
    thread = client.threads.create()["thread_id"]
    asked = {"messages": [{"type": "human", "content": QUESTION}]}
    waiting = client.runs.wait(thread, "router", input=asked, context={"clarify": True})
    value = waiting["__interrupt__"][0]["value"]
    assert value["action_request"]["args"]["interpretations"] == value["interpretations"]
    assert value["config"]["allow_respond"] and "1. " in value["description"]
    done = client.runs.wait(thread, "router", command={"resume": [{"type": "response", "args": "2"}]})
    assert done["chosen"] == value["interpretations"][1:2]
    last = done["messages"][-1]
    assert last["type"] == "ai" and last["content"].startswith(done["answer"].strip())
    assert [m["type"] for m in done["messages"]] == ["human", "ai"]


def test_the_messages_stream_carries_the_answer_tokens_tagged(server):
    from langgraph_sdk import get_sync_client

    from agent.llm.calls import ANSWER_TAG

    client = get_sync_client(url=server, api_key=KEY)
    tokens = []
    for part in client.runs.stream(None, "rag", input={"question": QUESTION}, stream_mode="messages-tuple"):
        if part.event == "messages":
            message, metadata = part.data
            if ANSWER_TAG in metadata.get("tags", []):
                tokens.append(message["content"])
    assert len(tokens) > 5 and "can be read in" in "".join(tokens)


def test_a_streamed_run_that_fails_ends_with_one_error_event(server):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=KEY)
    parts = list(
        client.runs.stream(
            None, "rag", input={"question": QUESTION}, context={"collection": "never-ingested"}, stream_mode="updates"
        )
    )
    errors = [p for p in parts if p.event == "error"]
    assert len(errors) == 1 and parts[-1].event == "error", [p.event for p in parts]
    assert errors[0].data["error"] == "CollectionError"  # named; the server keeps exception texts to its log
