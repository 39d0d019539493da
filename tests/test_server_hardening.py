"""The server as an attacker and an unlucky client meet it: a real uvicorn server on 127.0.0.1, raw sockets for slow
bodies, chunked uploads; every refusal is a 4xx/5xx with one line and the server stays up."""

import socket
import time

import httpx
import pytest

from tests.test_server import QUESTION, _start

pytestmark = pytest.mark.heavy  # serve processes

KEY = {"X-API-Key": "sesame"}


@pytest.fixture(scope="module")
def guarded(served_home):
    proc, base = _start(
        served_home, "tiny", "--api-key", "sesame", "--max-body-bytes", "4000", "--body-timeout", "1.5",
        "--max-concurrent", "2",
    )  # fmt: skip
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def post(base, path, payload=None, **kwargs):
    kwargs.setdefault("headers", KEY)
    return httpx.post(f"{base}{path}", json=payload, timeout=60, **kwargs)


@pytest.mark.parametrize(
    ("configurable", "field"),
    [({"llm": "local"}, "'llm' cannot be set"), ({"bogus": 1}, "'bogus' cannot be set"),
     ({"top_k": -5}, "top_k"), ({"top_k": 100000}, "top_k"), ({"collection": "secret"}, "'secret' is not served")],
)  # fmt: skip
def test_options_outside_the_operators_allowlist_are_422_naming_the_field(guarded, configurable, field):
    r = post(guarded, "/rag/invoke", {"input": {"question": QUESTION}, "config": {"configurable": configurable}})
    assert r.status_code == 422 and field in r.json()["detail"]


def test_the_llm_is_not_advertised_as_a_request_option(guarded):
    schema = httpx.get(f"{guarded}/rag/config_schema", headers=KEY).text
    assert "top_k" in schema and '"llm"' not in schema


def test_idle_connections_do_not_hold_graph_slots(guarded):
    host, port = guarded.removeprefix("http://").split(":")
    idle = []
    for _ in range(4):  # headers promising a body that never comes
        s = socket.create_connection((host, int(port)))
        s.sendall(
            b"POST /rag/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: sesame\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        idle.append(s)
    try:
        r = post(guarded, "/rag/invoke", {"input": {"question": QUESTION}})
        assert r.status_code == 200, r.text  # the two slots were free all along
        idle[0].settimeout(10)
        assert b" 408 " in idle[0].recv(1000)  # the body timeout answers the idle client
    finally:
        for s in idle:
            s.close()


def test_chunked_uploads_are_counted_as_read(guarded):
    def chunks():
        yield b'{"input": {"question": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}}'

    r = httpx.post(f"{guarded}/rag/invoke", content=chunks(), headers={**KEY, "content-type": "application/json"})
    assert r.status_code == 413


def test_a_batch_counts_each_question_against_the_slots(guarded):
    inputs = [{"question": QUESTION}] * 3
    r = post(guarded, "/closed_book/batch", {"inputs": inputs})
    assert r.status_code == 413 and "3 questions" in r.json()["detail"]
    ok = post(guarded, "/closed_book/batch", {"inputs": inputs[:2]})
    assert ok.status_code == 200 and len(ok.json()["output"]) == 2


def test_bad_input_gets_a_4xx_and_the_connection_stays_usable(guarded):
    with httpx.Client(base_url=guarded, headers=KEY, timeout=60) as client:
        cases = [
            (client.post("/rag/invoke", content=b"\xff\xfe{}", headers={"content-type": "application/json"}), 400),
            (client.post("/rag/invoke", content=b'{"input": {"question": "\\ud800"}}',
                         headers={"content-type": "application/json"}), 422),
            (client.post("/rag/invoke", content=b"{not json", headers={"content-type": "application/json"}), 400),
            (client.post("/rag/batch", json={"inputs": [{"question": QUESTION}, {"question": " "}]}), 422),
            (client.post("/rag/invoke", json={"input": {"question": QUESTION}}, headers={"X-Odd": b"caf\xe9"}), 200),
        ]  # fmt: skip
        for response, status in cases:
            assert response.status_code == status, response.text
            assert status == 200 or len(response.json()["detail"].splitlines()) == 1
        assert "inputs[1]" in cases[3][0].json()["detail"]
        assert client.post("/rag/invoke", json={"input": {"question": QUESTION}}).status_code == 200


def test_a_browser_logs_in_once_for_the_playground(guarded):
    assert httpx.get(f"{guarded}/rag/playground/").status_code == 401
    with httpx.Client(base_url=guarded, timeout=60) as browser:
        assert browser.post("/login", data={"key": "wrong"}).status_code == 401
        login = browser.post("/login", data={"key": "sesame", "next": "/rag/playground/"})
        assert login.status_code == 303 and "HttpOnly" in login.headers["set-cookie"]
        assert "sesame" not in login.headers["set-cookie"] and login.headers["location"] == "/rag/playground/"
        assert browser.get("/rag/playground/").status_code == 200
        assert browser.post("/rag/invoke", json={"input": {"question": QUESTION}}).status_code == 200


def test_a_run_past_the_deadline_gets_504_and_frees_its_slot(served_home):
    proc, base = _start(
        served_home, "tiny", "--request-timeout", "1", "--max-concurrent", "1", env_extra={"AMBIGQA_FAKE_LATENCY": "3"}
    )
    try:
        started = time.monotonic()
        r = httpx.post(f"{base}/closed_book/invoke", json={"input": {"question": QUESTION}}, timeout=60)
        assert r.status_code == 504 and "longer than 1 s" in r.json()["detail"]
        assert time.monotonic() - started < 3
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_missing_collection_is_404_with_one_line(served_home):
    proc, base = _start(served_home, "no-such-collection")
    try:
        r = httpx.post(f"{base}/rag/invoke", json={"input": {"question": QUESTION}}, timeout=60)
        assert r.status_code == 404 and "does not exist" in r.json()["detail"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
