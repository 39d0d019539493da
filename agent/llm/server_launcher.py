"""The embedded LLM: llama-cpp-python's OpenAI-compatible server on loopback, started on first use, stopped at exit.

A separate process keeps llama.cpp's non-thread-safe context away from LangGraph's worker threads (the server
serialises requests) and a llama.cpp crash away from the app. llama.cpp reuses the KV cache of the longest prefix
shared with the previous prompt, so calls that share instructions and passages prefill them once; each reply says
how many prompt tokens came from that cache (``agent.llm.server_child``).

A server that dies is reported as a crash (its signal or exit code, the log's last lines, the log's path), and the next
call starts a fresh one. Weight repacking (``repacking``) is off where llama.cpp is known to crash with it.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent.errors import LLMCrashError, LLMUnavailableError
from agent.llm.gguf import ensure_gguf
from agent.processes import die_with_parent
from agent.settings import Settings

_lock = threading.Lock()
_servers: dict[str, LocalServer] = {}  # the current server of each model
_by_url: dict[str, LocalServer] = {}  # every server this process started, by its API URL
_crashed_repacking: dict[str, str] = {}  # model → how its server died with repacking on


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


AMX_FLAGS = {"amx_int8", "amx_tile", "amx_bf16"}


def cpu_flags() -> set[str]:
    """The CPU feature flags the kernel reports (``/proc/cpuinfo``); empty where there is no such file."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


@dataclass(frozen=True)
class Repacking:
    """Whether llama.cpp repacks the weights into its CPU-specific buffer types at load, and why."""

    on: bool
    reason: str


def repacking(settings: Settings, flags: set[str] | None = None) -> Repacking:
    """Repacking lays Q4_K weights out for the CPU's widest kernels (llama.cpp's ``CPU_REPACK`` buffer, and its ``AMX``
    buffer where the build has AMX). On AMX CPUs (Sapphire Rapids and later) llama.cpp 0.3.36's AMX matrix kernel
    can die on the first completion (SIGSEGV, llama.cpp issue 20824; SIGILL at ``tilezero`` on an Emerald Rapids VM:
    docs/local-llm.md), and llama.cpp offers no switch for the AMX buffer alone, so ``auto`` turns all repacking off
    there; the same applies once a server died by a signal with it on, so an unknown CPU with the same defect answers
    on the next call. ``ambigqa doctor --compare-repack`` measures what it costs. ``flags``: the CPU's (default: this
    machine's)."""
    if settings.local_repack != "auto":
        return Repacking(settings.local_repack == "on", f"AMBIGQA_LOCAL_REPACK={settings.local_repack}")
    if crash := _crashed_repacking.get(settings.local_model):
        return Repacking(False, f"the previous server {crash} with repacking on")
    if amx := sorted(AMX_FLAGS & (cpu_flags() if flags is None else flags)):
        return Repacking(False, f"this CPU has AMX ({', '.join(amx)}): llama.cpp's AMX kernels crash (issue 20824)")
    return Repacking(True, "default")


def exit_status(returncode: int) -> str:
    """``died by SIGSEGV`` for a signal (negative return code), ``exited with code N`` otherwise."""
    if returncode < 0:
        try:
            return f"died by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died by signal {-returncode}"
    return f"exited with code {returncode}"


def disk_states_folder(model_path: Path, settings: Settings, repack: bool) -> Path:
    """Where the server keeps system messages' states: one folder per model file, llama.cpp build, context size and
    weight layout, since a state loads only into the same."""
    from importlib.metadata import version

    build = f"llama-cpp-python-{version('llama-cpp-python')}"
    layout = ("repacked" if repack else "plain") + ("-all-logits" if settings.local_draft_tokens else "")
    size = model_path.stat().st_size if model_path.is_file() else 0
    name = f"{model_path.stem}-{size}-{build}-ctx{settings.local_ctx}-{layout}"
    return settings.home / "llm-states" / name


class LocalServer:
    def __init__(self, model_path: Path, settings: Settings, repack: Repacking | None = None):
        self.model = settings.local_model
        self.repack = repack or repacking(settings)
        self.stopped = False  # by us (stop), not by a crash
        self.port = settings.local_port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threads = settings.local_threads or os.cpu_count() or 2
        log_dir = settings.home / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"llama-server-{self.port}.log"
        cmd = [
            sys.executable, "-m", "agent.llm.server_child",  # llama_cpp.server + cached-token counts
            "--model", str(model_path),
            "--model_alias", "local",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(settings.local_ctx),
            "--n_threads", str(threads),
            "--n_threads_batch", str(threads),
            "--n_batch", "512",
            "--interrupt_requests", "false",  # else a queued call cuts a streaming answer off after its first chunk
        ]  # fmt: skip
        if settings.local_state_cache_mb > 0:  # contexts of the prompt families left (agent.llm.prefix_states)
            cmd += ["--state_cache_mb", str(settings.local_state_cache_mb)]
        if settings.local_draft_tokens > 0:  # prompt lookup needs every position's logits
            cmd += ["--draft_model", "prompt-lookup-decoding"]
            cmd += ["--draft_model_num_pred_tokens", str(settings.local_draft_tokens)]
        else:  # the stock server computes logits for every prompt token by default
            cmd += ["--logits_all", "false"]
        if settings.local_disk_states_mb > 0:  # system messages' states for the next process (prefix_states)
            cmd += ["--disk_states", str(disk_states_folder(model_path, settings, self.repack.on))]
            cmd += ["--disk_states_mb", str(settings.local_disk_states_mb)]
        if not self.repack.on:
            cmd += ["--no_repack"]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        atexit.register(self.stop)
        self._wait_ready(settings.local_startup_timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                _note_death(self)
                raise LLMCrashError(self.crash_report("while starting"))
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

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return []

    def _log_tail(self) -> str:
        """The log's last lines; after a fatal signal, the crash and the innermost frames of the thread it hit (the
        child enables ``faulthandler``, which writes them; llama.cpp itself logs nothing as it dies)."""
        lines = self.log_lines()
        fatal = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
        if fatal:
            frames = [line.strip() for line in lines[fatal[-1] + 1 :] if line.strip().startswith("File ")]
            return " | ".join([lines[fatal[-1]], *frames[:2]])
        return " | ".join(line.strip() for line in lines[-3:])

    def crash_report(self, when: str) -> str:
        """One line: how the process ended, ``when``, the log's last lines and its path."""
        return (
            f"the local llama.cpp server {exit_status(self.process.returncode)} {when}; log: {self._log_tail()} "
            f"(full log: {self.log_path})"
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def died(self, grace: float) -> bool:
        """Whether the process has ended, waiting up to ``grace`` seconds for it to finish dying."""
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self) -> None:
        self.stopped = True
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
            if server is not None:
                _note_death(server)
            model_path = ensure_gguf(settings.local_model, settings.model_dir)
            _owner = _owner or _Owner()
            server = _owner.start(lambda: LocalServer(model_path, settings))
            _servers[settings.local_model] = server
            _by_url[server.url] = server
        return server


def _note_death(server: LocalServer) -> None:
    """Remember a death by signal with repacking on: the model's next server starts without it (``repacking``)."""
    code = server.process.returncode
    if code is not None and code < 0 and server.repack.on and not server.stopped:
        _crashed_repacking[server.model] = exit_status(code)
        print(
            f"warning: the local llama.cpp server {exit_status(code)} with weight repacking on; "
            "starting the next one without it (AMBIGQA_LOCAL_REPACK=on to keep it)",
            file=sys.stderr,
        )


def crash_report(base_url: str | None, grace: float = 2.0) -> str | None:
    """After a failed call to ``base_url``: the crash report of the embedded server there if it died (waiting up to
    ``grace`` seconds, as a dying process closes its socket first), else None (not ours, or alive and slow)."""
    server = _by_url.get(base_url or "")
    if server is None or not server.died(grace):
        return None
    return server.crash_report("during the call") + "; the next call starts a fresh server"
