"""One store, many processes: a Chroma server on loopback that ``serve`` starts over the embedded store's folder.

Chroma's embedded client is single-process: a second process writing the same folder leaves the first one's readers
stale ("Nothing found on disk") until it restarts. So ``serve`` runs ``chroma run`` on the store's folder (started and
stopped like the LLM server) and registers it in ``<store>/.server.json``; every other process of this project that
opens the same store (``ingest``, ``ask``, ``eval``) finds the registration and talks to that server instead of opening
the folder itself. Writes and reads then go through one process, and a collection ingested elsewhere is queryable
through the running server at once.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from agent.errors import CollectionError
from agent.processes import die_with_parent

SERVER_FILE = ".server.json"


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


def registered_url(store: Path) -> str | None:
    """The URL of the live Chroma server registered for ``store``, if any (a stale registration is removed)."""
    path = store / SERVER_FILE
    try:
        entry = json.loads(path.read_text())
        url, pid = str(entry["url"]), int(entry["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _alive(pid) and _heartbeat(url):
        return url
    path.unlink(missing_ok=True)
    return None


def _chroma_command() -> str:
    local = Path(sys.executable).with_name("chroma")
    found = str(local) if local.is_file() else shutil.which("chroma")
    if not found:
        raise CollectionError("the `chroma` command is missing: reinstall chromadb (`pip install chromadb`)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StoreServer:
    """``chroma run`` on ``store`` at 127.0.0.1, registered for other processes while it runs."""

    def __init__(self, store: Path, startup_timeout: float = 60.0):
        self.store = store
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        if existing := registered_url(self.store):
            raise CollectionError(f"a Chroma server already serves the store {self.store} ({existing}): use it")
        self.store.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = (self.store / "chroma-server.log").open("ab")
        self.process = subprocess.Popen(
            [_chroma_command(), "run", "--path", str(self.store), "--host", "127.0.0.1", "--port", str(port)],
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
        (self.store / SERVER_FILE).write_text(json.dumps({"url": self.url, "pid": self.process.pid}))
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
