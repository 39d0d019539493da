"""The documented fault answers on every method's route and through `ask`: an LLM that is down (503), one that answers
garbage (502), a database that is down (503) and a missing collection (404), each one line, the server still up.
Real servers on 127.0.0.1: `serve`, an OpenAI-compatible endpoint (``chat_endpoint``), no mocks."""

import os
import subprocess
import sys
import time

import httpx
import pytest

from agent.registry import METHODS
from tests.test_server import QUESTION, _free_port, _start

pytestmark = pytest.mark.heavy  # serve processes and CLI runs against endpoints that are down

RETRIEVING = [m for m in METHODS if m != "closed_book"]
GARBAGE = {"not": "a chat completion"}


def _stop(proc):
    proc.terminate()
    proc.wait(timeout=10)


def _openai_env(base_url: str) -> dict[str, str]:
    return {
        "AMBIGQA_OPENAI_BASE_URL": base_url, "AMBIGQA_OPENAI_API_KEY": "k", "AMBIGQA_OPENAI_MODEL": "m",
        "AMBIGQA_LLM_MAX_RETRIES": "0", "AMBIGQA_LLM_TIMEOUT": "10",
    }  # fmt: skip


def _serve(home, llm: str, env_extra: dict[str, str], health: int = 200):
    """``serve --llm LLM -c tiny`` with ``env_extra``, started once /health answers ``health``."""
    port = _free_port()
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), **env_extra}
    command = [sys.executable, "-m", "agent", "serve", "--port", str(port), "--llm", llm, "-c", "tiny"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            assert httpx.get(f"{base}/health", timeout=30).status_code == health
            return proc, base
        except httpx.TransportError:
            assert proc.poll() is None
            time.sleep(0.3)
    _stop(proc)
    raise RuntimeError("server did not start")


def _serve_openai(home, base_url: str):
    return _serve(home, "openai", _openai_env(base_url))


def _ask_each(base: str, methods: list[str]) -> dict[str, httpx.Response]:
    body = {"input": {"question": QUESTION}}
    return {m: httpx.post(f"{base}/{m}/invoke", json=body, timeout=120) for m in methods}


def _one_line(response: httpx.Response) -> str:
    detail = response.json()["detail"]
    assert len(detail.splitlines()) == 1, detail
    return detail


@pytest.fixture(scope="module")
def llm_down(served_home):
    proc, base = _serve_openai(served_home, f"http://127.0.0.1:{_free_port()}/v1")
    yield base
    _stop(proc)


def test_an_llm_that_is_down_is_503_on_every_method_route(llm_down):
    for method, response in _ask_each(llm_down, list(METHODS)).items():
        assert response.status_code == 503, (method, response.text)
        assert "unreachable" in _one_line(response) or "refused" in _one_line(response), method
    assert httpx.get(f"{llm_down}/health").status_code == 200


def test_an_llm_that_answers_garbage_is_502_on_every_method_route(served_home, chat_endpoint):
    url, reply = chat_endpoint
    reply["body"] = GARBAGE
    proc, base = _serve_openai(served_home, url)
    try:
        for method, response in _ask_each(base, list(METHODS)).items():
            assert response.status_code == 502, (method, response.text)
            _one_line(response)
    finally:
        _stop(proc)


def test_a_database_that_is_down_is_503_on_every_retrieving_route(served_home):
    url = f"postgresql://ambigqa:s3cret@127.0.0.1:{_free_port()}/db"
    proc, base = _serve(served_home, "fake", {"AMBIGQA_DATABASE_URL": url}, health=503)
    try:
        for method, response in _ask_each(base, RETRIEVING).items():
            assert response.status_code == 503, (method, response.text)
            assert "s3cret" not in _one_line(response), method
    finally:
        _stop(proc)


def test_a_missing_collection_is_404_on_every_retrieving_route(served_home):
    proc, base = _start(served_home, "no-such-collection")
    try:
        for method, response in _ask_each(base, RETRIEVING).items():
            assert response.status_code == 404, (method, response.text)
            assert "no-such-collection" in _one_line(response), method
    finally:
        _stop(proc)


def _ask(home, method: str, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), **(env_extra or {})}
    command = [sys.executable, "-m", "agent", "ask", QUESTION, "-m", method, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("fault", "methods", "expected"),
    [("llm down", METHODS, "unreachable"), ("garbage", METHODS, "LLM"), ("database down", RETRIEVING, "127.0.0.1"),
     ("missing collection", RETRIEVING, "no-such-collection")],
)  # fmt: skip
def test_ask_says_each_fault_in_one_line_for_every_method(served_home, chat_endpoint, fault, methods, expected):
    url, reply = chat_endpoint
    reply["body"] = GARBAGE
    args, env = {
        "llm down": (["--llm", "openai"], _openai_env(f"http://127.0.0.1:{_free_port()}/v1")),
        "garbage": (["--llm", "openai"], _openai_env(url)),
        "database down": (["--llm", "fake"], {"AMBIGQA_DATABASE_URL": f"postgresql://a:s3cret@127.0.0.1:{_free_port()}/d"}),
        "missing collection": (["--llm", "fake", "-c", "no-such-collection"], {}),
    }[fault]  # fmt: skip
    for method in methods:
        done = _ask(served_home, method, *args, env_extra=env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and "Traceback" not in done.stderr, (method, done.stderr)
        assert expected in lines[-1] and lines[-1].startswith("error:") and "s3cret" not in done.stderr, (method, lines)
