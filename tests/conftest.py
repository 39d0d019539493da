"""Shared fixtures: a temp home (real Chroma on disk), a small real corpus, scripted models at the LLM boundary."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
_names = itertools.count(1)

# A small corpus: two readings of a Harry Potter question, plus unrelated passages.
PASSAGES = [
    {"id": "hp-premiere", "title": "Harry Potter and the Philosopher's Stone (film)",
     "text": "The film had its world premiere at the Odeon Leicester Square in London on 4 November 2001."},
    {"id": "hp-us", "title": "Harry Potter and the Philosopher's Stone (film)",
     "text": "It was released in cinemas in the United States and the United Kingdom on 16 November 2001."},
    {"id": "hp-book", "title": "Harry Potter and the Philosopher's Stone",
     "text": "The novel by J. K. Rowling was first published in the United Kingdom by Bloomsbury on 26 June 1997."},
    {"id": "volcano", "title": "Mount Etna",
     "text": "Mount Etna is an active stratovolcano on the east coast of Sicily, Italy."},
    {"id": "cricket", "title": "Cricket World Cup",
     "text": "The Cricket World Cup is the international championship of One Day International cricket."},
    {"id": "bread", "title": "Sourdough",
     "text": "Sourdough is bread made by the fermentation of dough using naturally occurring lactobacilli and yeast."},
]  # fmt: skip


@pytest.fixture(scope="session")
def home(tmp_path_factory) -> Path:
    """One temp AMBIGQA_HOME (Chroma store) per session; the GGUF cache (AMBIGQA_MODEL_DIR) stays the user's."""
    path = tmp_path_factory.mktemp("ambigqa-home")
    os.environ["AMBIGQA_HOME"] = str(path)
    from agent.settings import get_settings

    get_settings.cache_clear()
    return path


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    return path


@pytest.fixture(scope="session")
def collection(home, corpus_file) -> str:
    """A real Chroma collection of PASSAGES, embedded with the real encoder."""
    from agent.retrieval.ingest import ingest

    ingest(corpus_file, "tiny", progress=False)
    return "tiny"


@pytest.fixture(scope="session")
def served_home(tmp_path_factory, corpus_file) -> Path:
    """The store of the tests' subprocesses (servers, the CLI), holding the ``tiny`` collection; the tests' own process
    never opens it (Chroma's embedded store is single-process: the servers share it through their loopback Chroma
    server). A subprocess is never given ``home``, the store this process has open."""
    path = tmp_path_factory.mktemp("served-home")
    env = {**os.environ, "AMBIGQA_HOME": str(path), "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "agent", "ingest", str(corpus_file), "-c", "tiny"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL 16 with pgvector on 127.0.0.1 (pgserver's binaries), one per test session."""
    from agent.retrieval.local_postgres import start

    server = start(tmp_path_factory.mktemp("postgres") / "data")
    yield server.url
    server.stop()


@pytest.fixture
def scripted():
    """Register a ScriptedChatModel; returns a factory ``scripted(script, **kw) -> (name, model)``."""
    from agent.llm.factory import register_model, unregister_model
    from agent.llm.scripted import ScriptedChatModel

    names = []

    def make(script: dict | None = None, **kwargs):
        name = f"scripted-{next(_names)}"
        model = ScriptedChatModel(script=script or {}, **kwargs)
        register_model(name, model)
        names.append(name)
        return name, model

    yield make
    for name in names:
        unregister_model(name)


def completion(content: str) -> dict:
    """A finished chat completion whose message is ``content``."""
    return {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }  # fmt: skip


def start_chat_endpoint(respond):
    """An OpenAI-compatible endpoint on 127.0.0.1 (HTTP/1.1, connections kept alive) answering each POST with
    ``respond(request)`` (the request's JSON body): a status and a JSON body. Returns its base URL and the server (``shutdown()`` stops it)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            status, reply = respond(request)
            body = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", server


@pytest.fixture
def chat_endpoint():
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers every request with ``reply``: a status and a JSON body
    the test may change; by default a finished chat completion."""
    reply = {"status": 200, "body": completion("Final Answer: In November 2001.")}
    url, server = start_chat_endpoint(lambda _: (reply["status"], reply["body"]))
    yield url, reply
    server.shutdown()


@contextmanager
def langgraph_dev(env: dict[str, str]) -> Iterator[str]:
    """``langgraph dev`` from this checkout's langgraph.json on a free loopback port, offline, with ``env`` added to
    the environment; yields its base URL once ``/ok`` answers, and stops it (its whole process group) after."""
    import socket
    import subprocess
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true", **env}
    cli = Path(sys.executable).with_name("langgraph")
    proc = subprocess.Popen(
        [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
            assert proc.poll() is None, "langgraph dev exited at start"
        else:
            pytest.fail("langgraph dev did not start")
        yield base
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
