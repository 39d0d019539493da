"""One store, many processes: a Chroma server on loopback that ``serve`` starts over the embedded store's folder, and
that answers only the processes holding this run's token.

Chroma's embedded client is single-process: a second process writing the same folder leaves the first one's readers
stale ("Nothing found on disk") until it restarts. So ``serve`` runs a Chroma server on the store's folder (started and
stopped like the LLM server) and registers it in ``<store>/.server.json``; every other process of this project that
opens the same store (``ingest``, ``ask``, ``eval``) finds the registration and talks to that server instead of opening
the folder itself. Writes and reads then go through one process, and a collection ingested elsewhere is queryable
through the running server at once.

A loopback port is open to every process on the machine, so the server wants a token on every request that reads or
writes: a random one per run, handed to the server in its environment and written to the registration, which only the
store's owner can read (mode 0600). ``chroma run`` (Chroma's Rust server) checks no credentials, so the server is
Chroma's Python one (``chromadb.server.fastapi``, the same embedded engine) with Chroma's own token authentication.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from agent.errors import CollectionError
from agent.processes import die_with_parent

SERVER_FILE = ".server.json"
TOKEN_HEADER = "X-Chroma-Token"
TOKEN_ENV = "AMBIGQA_STORE_TOKEN"  # the token's way into the server process: its environment, readable by its owner


class Registration(NamedTuple):
    url: str
    token: str


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _heartbeat(url: str, timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/api/v2/heartbeat", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def registration(store: Path) -> Registration | None:
    """The live Chroma server registered for ``store`` and its token, if any (a stale registration is removed)."""
    path = store / SERVER_FILE
    try:
        entry = json.loads(path.read_text())
        url, pid, token = str(entry["url"]), int(entry["pid"]), str(entry["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _alive(pid) and _heartbeat(url):
        return Registration(url, token)
    path.unlink(missing_ok=True)
    return None


def registered_url(store: Path) -> str | None:
    """The URL of the live Chroma server registered for ``store``, if any."""
    found = registration(store)
    return found.url if found else None


def _register(path: Path, entry: dict[str, object]) -> None:
    """Write ``entry`` to ``path`` readable by its owner only, whole or not at all."""
    draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when a stale draft existed with wider permissions
    with os.fdopen(fd, "w") as handle:
        json.dump(entry, handle)
    os.replace(draft, path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StoreServer:
    """Chroma's server on ``store`` at 127.0.0.1, wanting a per-run token, registered for other processes while it
    runs."""

    def __init__(self, store: Path, startup_timeout: float = 60.0):
        self.store = store
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.token = ""

    def start(self) -> str:
        if existing := registered_url(self.store):
            raise CollectionError(f"a Chroma server already serves the store {self.store} ({existing}): use it")
        self.store.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self.url, self.token = f"http://127.0.0.1:{port}", secrets.token_hex(32)
        log = (self.store / "chroma-server.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent.retrieval.store_server", str(self.store), str(port)],
            env={**os.environ, TOKEN_ENV: self.token},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + self.startup_timeout
        while not _heartbeat(self.url, timeout=1.0):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise CollectionError(f"the Chroma server did not start; see {self.store / 'chroma-server.log'}")
            time.sleep(0.2)
        _register(self.store / SERVER_FILE, {"url": self.url, "pid": self.process.pid, "token": self.token})
        return self.url

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        registration = self.store / SERVER_FILE
        try:
            if self.process is not None and json.loads(registration.read_text()).get("pid") == self.process.pid:
                registration.unlink()
        except (OSError, ValueError):
            pass
        self.process = None

    def __enter__(self) -> StoreServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _without_spans() -> None:
    """Chroma's Python server imports OpenTelemetry's FastAPI instrumentation, which only chromadb's ``dev`` extra
    installs: a stand-in that instruments nothing lets it import (the server makes no spans)."""
    import types

    stand_in = types.ModuleType("opentelemetry.instrumentation.fastapi")
    stand_in.FastAPIInstrumentor = types.SimpleNamespace(instrument_app=lambda app, **_: None)  # type: ignore[attr-defined]
    sys.modules.setdefault(stand_in.__name__, stand_in)


def main(store: str, port: int) -> None:
    """The server process: Chroma's Python server over ``store`` on 127.0.0.1:``port``, every request that reads or
    writes checked for the token in ``TOKEN_HEADER`` by Chroma's token authentication."""
    import uvicorn
    from chromadb.config import Settings as ChromaSettings

    # our embedding function, registered on import: the server rebuilds it from a collection's configuration
    import agent.retrieval.embeddings  # noqa: F401

    _without_spans()
    from chromadb.server.fastapi import FastAPI

    settings = ChromaSettings(
        is_persistent=True,
        persist_directory=store,
        anonymized_telemetry=False,
        chroma_server_authn_provider="chromadb.auth.token_authn.TokenAuthenticationServerProvider",
        chroma_server_authn_credentials=os.environ.pop(TOKEN_ENV),
        chroma_auth_token_transport_header=TOKEN_HEADER,
    )
    server = FastAPI(settings)
    _vectors_as_arrays(server._api)
    uvicorn.run(server.app(), host="127.0.0.1", port=port, log_level="warning")


def _vectors_as_arrays(api: Any) -> None:
    """Chroma's Python server calls ``.tolist()`` on each embedding its engine returns, and the Rust engine returns
    plain lists (chromadb 1.5.9: "'list' object has no attribute 'tolist'" on every ``get``/``query`` that includes
    embeddings): hand the server arrays, as its code expects."""
    import numpy as np

    def arrays(result: Any, nested: bool) -> Any:
        vectors = result.get("embeddings")
        if vectors is not None:
            convert = (lambda rows: [np.asarray(v) for v in rows]) if nested else np.asarray
            result["embeddings"] = [convert(v) for v in vectors]
        return result

    get, query = api._get, api._query
    api._get = lambda *args, **kwargs: arrays(get(*args, **kwargs), nested=False)
    api._query = lambda *args, **kwargs: arrays(query(*args, **kwargs), nested=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
