"""A bounded load test for the LangServe app: N concurrent requests to a loopback server; counts, throughput, p95."""

from __future__ import annotations

import asyncio
import ipaddress
import statistics
import time
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel

from agent.errors import ConfigError


class LoadReport(BaseModel):
    requests: int
    ok: int
    busy_503: int
    other: int
    seconds: float
    throughput_rps: float
    p50_ms: float
    p95_ms: float


def _require_loopback(url: str) -> None:
    host = urlparse(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(f"load tests only target this machine (127.0.0.0/8, ::1, localhost), not '{host}'")


def _require_server(url: str) -> None:
    """A burst at nothing would report every request as failed; say instead that no server answers there."""
    try:
        httpx.get(f"{url}/health", timeout=10)
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"no server answers at {url} ({type(exc).__name__}): start one with `ambigqa serve`"
        ) from None


async def _load(
    url: str, method: str, requests: int, concurrency: int, question: str, timeout: float, api_key: str | None
) -> LoadReport:
    gate = asyncio.Semaphore(concurrency)
    headers = {b"X-API-Key": api_key.encode("utf-8")} if api_key else {}  # any Unicode key, sent as UTF-8
    latencies: list[float] = []
    codes: list[int] = []

    async def one(client: httpx.AsyncClient) -> None:
        async with gate:
            start = time.perf_counter()
            try:
                r = await client.post(f"{url}/{method}/invoke", json={"input": {"question": question}}, headers=headers)
                codes.append(r.status_code)
            except httpx.HTTPError:
                codes.append(0)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=concurrency)) as client:
        await asyncio.gather(*(one(client) for _ in range(requests)))
    seconds = time.perf_counter() - start
    ok = codes.count(200)
    ordered = sorted(latencies)
    return LoadReport(
        requests=requests,
        ok=ok,
        busy_503=codes.count(503),
        other=requests - ok - codes.count(503),
        seconds=round(seconds, 2),
        throughput_rps=round(ok / seconds, 2) if seconds else 0.0,
        p50_ms=round(statistics.median(ordered), 1),
        p95_ms=round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
    )


def run_load(
    url: str, method: str = "rag", requests: int = 50, concurrency: int = 50, question: str = "When did the Harry Potter film come out?",
    timeout: float = 120.0, api_key: str | None = None,
) -> LoadReport:  # fmt: skip
    _require_loopback(url)
    if not 1 <= requests <= 1000:
        raise ConfigError("requests must be between 1 and 1000")
    _require_server(url.rstrip("/"))
    return asyncio.run(_load(url.rstrip("/"), method, requests, min(concurrency, requests), question, timeout, api_key))
