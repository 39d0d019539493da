"""The embedded LLM: llama-cpp-python's OpenAI-compatible server on loopback, started on first use, stopped at exit.

A separate process keeps llama.cpp's non-thread-safe context away from LangGraph's worker threads (the server
serialises requests) and a llama.cpp crash away from the app. llama.cpp reuses the KV cache of the longest prefix
shared with the previous prompt, so calls that share instructions and passages prefill them once; each reply says
how many prompt tokens came from that cache (``agent.llm.llama_server``).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import httpx

from agent.errors import LLMUnavailableError
from agent.llm.gguf import ensure_gguf
from agent.processes import die_with_parent
from agent.settings import Settings

_lock = threading.Lock()
_servers: dict[str, LocalServer] = {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, model_path: Path, settings: Settings):
        self.port = settings.local_port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threads = settings.local_threads or os.cpu_count() or 2
        log_dir = settings.home / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"llama-server-{self.port}.log"
        cmd = [
            sys.executable, "-m", "agent.llm.llama_server",  # llama_cpp.server + cached-token counts
            "--model", str(model_path),
            "--model_alias", "local",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(settings.local_ctx),
            "--n_threads", str(threads),
            "--n_threads_batch", str(threads),
            "--n_batch", "512",
        ]  # fmt: skip
        if settings.local_state_cache_mb > 0:  # contexts of the prompt families left (llama_server.PrefixStates)
            cmd += ["--state_cache_mb", str(settings.local_state_cache_mb)]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        atexit.register(self.stop)
        self._wait_ready(settings.local_startup_timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LLMUnavailableError(
                    f"the local llama.cpp server exited with code {self.process.returncode}: "
                    f"{self._log_tail()} (full log: {self.log_path})"
                )
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise LLMUnavailableError(
            f"the local llama.cpp server did not start within {timeout:.0f}s (log: {self.log_path})"
        )

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-3:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()


class _Owner:
    """A process-long thread that starts servers, so their parent-death signal fires only when the process dies."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[tuple[Callable[[], LocalServer], Future]] = queue.Queue()
        threading.Thread(target=self._loop, name="llama-server-owner", daemon=True).start()

    def _loop(self) -> None:
        while True:
            start, future = self.jobs.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller
                future.set_exception(exc)

    def start(self, start: Callable[[], LocalServer]) -> LocalServer:
        future: Future = Future()
        self.jobs.put((start, future))
        return future.result()


_owner: _Owner | None = None


def local_server(settings: Settings) -> LocalServer:
    """Start (once per process and model) and return the embedded server."""
    global _owner
    if importlib.util.find_spec("llama_cpp") is None:
        raise LLMUnavailableError(
            "the local LLM needs 'llama-cpp-python[server]==0.3.36': run `make setup` "
            "(or pip install -e '.[local]'), or use --llm openai / --llm fake"
        )
    with _lock:
        server = _servers.get(settings.local_model)
        if server is None or not server.alive():
            model_path = ensure_gguf(settings.local_model, settings.model_dir)
            _owner = _owner or _Owner()
            server = _owner.start(lambda: LocalServer(model_path, settings))
            _servers[settings.local_model] = server
        return server
