"""The server as an operator exposes it and an attacker meets it: every route classified by the guard or refused,
keys compared as UTF-8 bytes, no key in a URL, Host/Origin allow-lists, JSON-only run routes, a header deadline,
/health that tells the truth. A real uvicorn server on 127.0.0.1 with the scripted (`fake`) LLM."""

import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.test_server import QUESTION, _free_port, _start

pytestmark = pytest.mark.heavy  # serve processes

KEY = {"X-API-Key": "sesame"}
UNICODE_KEY = "ключ-🔑"


def sample_path(path: str) -> str:
    """A concrete path for a route pattern (its parameters filled in)."""
    return re.sub(r"\{file_path:path\}", "index.html", re.sub(r"\{thread_id\}", "clarify-00000000", path))


@pytest.fixture(scope="module")
def app_routes(tmp_path_factory):
    """The guard and the (method, path) pairs of every route its FastAPI app has, LangServe's included."""
    from agent.settings import Settings, get_settings
    from agent.surfaces.server import create_app

    settings = Settings(home=tmp_path_factory.mktemp("routes"), llm="fake", collection="tiny")
    try:
        guard = create_app(settings, api_key="sesame", collections=("tiny",))  # installs settings in this process
    finally:
        get_settings.cache_clear()  # the other tests' settings (their AMBIGQA_HOME) again
    pairs = {
        (method, sample_path(route.path))
        for route in guard.app.routes
        for method in getattr(route, "methods", None) or {"GET"}
    }
    return guard, sorted(pairs)


def test_every_route_of_the_app_is_classified_by_the_guard(app_routes):
    from agent.surfaces.guard import Kind, Refusal

    guard, pairs = app_routes
    kinds, refused = {}, []
    for method, path in pairs:
        try:
            kinds[(method, path)] = guard.classify(method, path)
        except Refusal as refusal:  # the app has the route, the guard refuses it before the app sees the request
            assert refusal.status in (404, 405)
            refused.append((method, path))
    assert refused == [], refused  # today every route the app has is one the guard classifies
    assert not [path for _, path in pairs if "/c/" in path]  # no config-hash routes
    runs = {path for (method, path), kind in kinds.items() if kind is Kind.RUN}
    assert {"/rag/invoke", "/rag/batch", "/rag/stream", "/rag/stream_log", "/rag/stream_events"} <= runs
    assert {"/clarify", "/clarify/clarify-00000000/resume", "/passages"} <= runs
    assert all(method == "POST" for (method, _), kind in kinds.items() if kind is Kind.RUN)
    assert all(method in ("GET", "HEAD") for (method, _), kind in kinds.items() if kind is Kind.PAGE)
    assert {path for (_, path), kind in kinds.items() if kind is Kind.PAGE} >= {"/docs", "/openapi.json"}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/rag/c/N4XyA/invoke", 404), ("GET", "/rag/c/N4XyA/playground/index.html", 404), ("GET", "/admin", 404),
     ("POST", "/nosuch/invoke", 404), ("GET", "/rag/invoke", 405), ("POST", "/rag/input_schema", 405),
     ("PUT", "/clarify", 405), ("DELETE", "/passages", 405)],
)  # fmt: skip
def test_what_no_route_names_is_refused_before_the_app(app_routes, method, path, status):
    from agent.surfaces.guard import Refusal

    guard, _ = app_routes
    with pytest.raises(Refusal) as refused:
        guard.classify(method, path)
    assert refused.value.status == status


def test_the_collection_is_checked_again_where_the_run_context_is_built(app_routes):
    from agent.errors import ConfigError
    from agent.registry import load_graph
    from agent.surfaces.server import GraphRunnable, question_type

    runnable = GraphRunnable(load_graph("rag"), question_type(100), ["collection", "top_k"], ("tiny", "other"))
    assert runnable._context({"configurable": {"collection": "other"}}).collection == "other"
    assert runnable._context(None).collection == "tiny"
    with pytest.raises(ConfigError, match="'secret' is not served"):
        runnable._context({"configurable": {"collection": "secret"}})


@pytest.fixture(scope="module")
def exposed(served_home):
    proc, base = _start(served_home, "tiny", "--api-key", "sesame", "--max-body-bytes", "4000")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


RUN_BODIES = {  # each run route with a body that names a collection the operator does not serve
    "/rag/invoke": {"input": {"question": QUESTION}, "config": {"configurable": {"collection": "secret"}}},
    "/rag/stream": {"input": {"question": QUESTION}, "config": {"configurable": {"collection": "secret"}}},
    "/rag/stream_log": {"input": {"question": QUESTION}, "config": {"configurable": {"collection": "secret"}}},
    "/rag/stream_events": {"input": {"question": QUESTION}, "config": {"configurable": {"collection": "secret"}}},
    "/rag/batch": {"inputs": [{"question": QUESTION}], "config": {"configurable": {"collection": "secret"}}},
    "/clarify": {"question": QUESTION, "options": {"collection": "secret"}},
    "/passages": {"ids": ["x"], "collection": "secret"},
}


@pytest.mark.parametrize("path", sorted(RUN_BODIES))
def test_every_run_route_wants_the_key_json_a_small_body_and_a_served_collection(exposed, path):
    body = RUN_BODIES[path]
    with httpx.Client(base_url=exposed, timeout=60) as client:
        assert client.post(path, json=body).status_code == 401
        assert client.post(path, json=body, headers={"X-API-Key": "wrong"}).status_code == 401
        plain = client.post(path, content=json.dumps(body), headers={**KEY, "content-type": "text/plain"})
        assert plain.status_code == 415
        assert client.post(path, content=json.dumps(body), headers=KEY).status_code == 415  # no content type
        big = client.post(path, content=b"{" + b" " * 5000 + b"}", headers={**KEY, "content-type": "application/json"})
        assert big.status_code == 413
        unserved = client.post(path, json=body, headers=KEY)
        assert unserved.status_code == 422 and "'secret' is not served" in unserved.json()["detail"]


def test_resume_passes_the_same_checks(exposed):
    with httpx.Client(base_url=exposed, timeout=60) as client:
        path = "/clarify/clarify-00000000/resume"
        assert client.post(path, json={"picks": [1]}).status_code == 401
        assert client.post(path, content='{"picks": [1]}', headers=KEY).status_code == 415
        assert client.post(path, json={"picks": "all"}, headers=KEY).status_code == 422


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/redoc", "/rag/input_schema", "/rag/playground/"])
def test_pages_want_the_key(exposed, path):
    assert httpx.get(f"{exposed}{path}").status_code == 401
    assert httpx.get(f"{exposed}{path}", headers=KEY).status_code == 200


def test_every_run_route_takes_a_slot(served_home):
    """With the one slot held by a slow run, each other run route is a 503 after the queue timeout."""
    proc, base = _start(
        served_home, "tiny", "--max-concurrent", "1", "--queue-timeout", "0.3", "--api-key", "sesame",
        env_extra={"AMBIGQA_FAKE_LATENCY": "8"},
    )  # fmt: skip
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held_body = {"input": {"question": QUESTION}}
            held = pool.submit(httpx.post, f"{base}/closed_book/invoke", json=held_body, headers=KEY, timeout=60)
            _wait_for_busy_slots(base, 1)  # the held run is in its slot (its LLM call sleeps 8 s)
            served = {path: {**body, "config": {}} if "config" in body else body for path, body in RUN_BODIES.items()}
            served["/clarify"], served["/passages"] = {"question": QUESTION}, {"ids": ["x"]}
            codes = {
                path: httpx.post(f"{base}{path}", json=body, headers=KEY, timeout=30).status_code
                for path, body in served.items()
            }
            assert held.result().status_code == 200
        assert set(codes.values()) == {503}, codes
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_for_busy_slots(base: str, busy: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (slots := httpx.get(f"{base}/health", headers=KEY, timeout=10).json()["slots"])["busy"] != busy:
        assert time.monotonic() < deadline, slots
        time.sleep(0.05)


@pytest.mark.parametrize(
    "body",
    [b'{"input": {"question": "q"}, "config": {"configurable": {"top_k": ' + b"9" * 5000 + b"}}}",
     b"[" * 20_000 + b"]" * 20_000],
)  # fmt: skip
def test_a_huge_number_or_deep_nesting_is_a_400_with_one_line(served_home, body):
    proc, base = _start(served_home, "tiny", "--max-body-bytes", "100000")
    try:
        r = httpx.post(f"{base}/rag/invoke", content=body, headers={"content-type": "application/json"}, timeout=60)
        assert r.status_code == 400 and len(r.json()["detail"].splitlines()) == 1
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def unicode_keyed(served_home):
    proc, base = _start(served_home, "tiny", "--api-key", UNICODE_KEY)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_a_unicode_key_matches_itself_only(unicode_keyed):
    body = {"input": {"question": QUESTION}}
    right = {"X-API-Key": UNICODE_KEY.encode()}
    assert httpx.post(f"{unicode_keyed}/closed_book/invoke", json=body, headers=right, timeout=60).status_code == 200
    for wrong in (
        b"????-?",
        "ключ-?".encode(),
        UNICODE_KEY.encode().decode("latin-1").encode(),
        UNICODE_KEY.encode()[:-1],
        b"",
    ):
        r = httpx.post(f"{unicode_keyed}/closed_book/invoke", json=body, headers={"X-API-Key": wrong}, timeout=60)
        assert r.status_code == 401, wrong


def test_load_sends_a_unicode_key(unicode_keyed):
    from agent.surfaces.loadtest import run_load

    report = run_load(unicode_keyed, "closed_book", requests=2, concurrency=2, api_key=UNICODE_KEY)
    assert report.ok == 2


def test_login_is_a_form_post_and_the_key_never_rides_in_a_url(unicode_keyed):
    with httpx.Client(base_url=unicode_keyed, timeout=60) as browser:
        page = browser.get(f"/login?key={UNICODE_KEY}")
        assert page.status_code == 200 and "<form method=post" in page.text and "set-cookie" not in page.headers
        assert browser.get("/rag/playground/").status_code == 401  # the key in the URL logged nobody in
        assert browser.post("/login", data={"key": "ключ-?"}).status_code == 401
        assert browser.post("/login", json={"key": UNICODE_KEY}).status_code == 415
        login = browser.post("/login", data={"key": UNICODE_KEY, "next": "/diva/playground/"})
        assert login.status_code == 303 and login.headers["location"] == "/diva/playground/"
        assert UNICODE_KEY.encode().hex() not in login.headers["set-cookie"].encode().hex()
        assert browser.get("/rag/playground/").status_code == 200


@pytest.mark.parametrize(
    "target", ["/\\evil.example/x", "//evil.example/x", "https://evil.example/", "/rag\r\nSet-Cookie: x=1", "/%0d%0ax"]
)
def test_login_never_redirects_off_this_server(unicode_keyed, target):
    login = httpx.post(f"{unicode_keyed}/login", data={"key": UNICODE_KEY, "next": target}, timeout=60)
    assert login.status_code == 303 and login.headers["location"] == "/rag/playground/"
    assert "x=1" not in login.headers.get("set-cookie", "")


def test_foreign_hosts_and_origins_are_refused_unless_allowed(served_home):
    proc, base = _start(served_home, "tiny", "--allowed-hosts", "qa.example.org")
    body = {"input": {"question": QUESTION}}
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            assert client.post("/closed_book/invoke", json=body, headers={"Host": "evil.example"}).status_code == 400
            cross = client.post("/closed_book/invoke", json=body, headers={"Origin": "http://evil.example"})
            assert cross.status_code == 403
            assert client.post("/closed_book/invoke", json=body, headers={"Origin": "null"}).status_code == 403
            named = {"Host": "qa.example.org", "Origin": "https://qa.example.org"}
            assert client.post("/closed_book/invoke", json=body, headers=named).status_code == 200
            assert client.post("/closed_book/invoke", json=body, headers={"Origin": base}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_host_beyond_loopback_wants_a_key_or_insecure(served_home):
    env = {**os.environ, "AMBIGQA_HOME": str(served_home), "PYTHONPATH": os.getcwd()}
    env.pop("AMBIGQA_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "agent",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        str(_free_port()),
        "--llm",
        "fake",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode != 0 and "--api-key" in done.stderr and "--insecure" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_clients_that_trickle_headers_are_cut_off(served_home):
    proc, base = _start(served_home, "tiny", "--header-timeout", "1")
    host, port = base.removeprefix("http://").split(":")
    sockets = [socket.create_connection((host, int(port))) for _ in range(20)]
    try:
        started = time.monotonic()
        for s in sockets:
            s.sendall(b"POST /rag/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(15):  # a header line every 0.2 s, never the blank line that ends them
            for s in sockets:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
            time.sleep(0.2)
        for s in sockets:
            s.settimeout(10)
            try:
                assert s.recv(100) == b""  # closed by the server
            except ConnectionResetError:
                pass
        assert time.monotonic() - started < 10
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200  # the server still answers
    finally:
        for s in sockets:
            s.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_health_reports_the_store_and_threads_and_is_503_when_the_database_is_down(served_home):
    port, down = _free_port(), _free_port()
    env = {**os.environ, "AMBIGQA_HOME": str(served_home), "PYTHONPATH": os.getcwd()}
    env["AMBIGQA_DATABASE_URL"] = f"postgresql://ambigqa:SECRET@127.0.0.1:{down}/db"
    command = [sys.executable, "-m", "agent", "serve", "--port", str(port), "--llm", "fake", "--api-key", "sesame"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                anonymous = httpx.get(f"{base}/health", timeout=30)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
        assert anonymous.status_code == 503 and anonymous.json() == {"status": "down"}
        keyed = httpx.get(f"{base}/health", headers=KEY, timeout=30)
        details = keyed.json()
        assert keyed.status_code == 503 and details["store"]["state"] == "down"
        assert details["clarify_threads"]["state"] == "down" and "SECRET" not in keyed.text
    finally:
        proc.terminate()
        out, errors = proc.communicate(timeout=10)
    assert "SECRET" not in out + errors


def test_health_reports_the_store_and_threads_ok(exposed):
    details = httpx.get(f"{exposed}/health", headers=KEY).json()
    assert details["status"] == "ok" and details["store"] == {"state": "ok", "missing_collections": []}
    assert details["clarify_threads"] == {"state": "ok"}


def test_a_zero_queue_timeout_takes_free_slots_and_refuses_only_when_none_is_free():
    import asyncio

    from agent.surfaces.guard import Slots

    async def scenario():
        slots = Slots(2)
        await slots.take(2, 0)  # free now: taken without waiting
        with pytest.raises(TimeoutError):
            await slots.take(1, 0)
        await slots.give(1)
        await slots.take(1, 0)
        return slots.free

    assert asyncio.run(scenario()) == 0


@pytest.mark.parametrize(
    "url",
    ["postgresq://postgres:SECRET@127.0.0.1:5433/postgres", "postgresql://postgres:SECRET@[bad",
     "postgresql://postgres:SECRET@host/db?sslmode=bogus x"],
)  # fmt: skip
def test_serve_with_a_malformed_database_url_says_so_in_one_line_without_its_password(served_home, url):
    env = {**os.environ, "AMBIGQA_HOME": str(served_home), "PYTHONPATH": os.getcwd(), "AMBIGQA_DATABASE_URL": url}
    command = [sys.executable, "-m", "agent", "serve", "--port", str(_free_port()), "--llm", "fake"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0 and "SECRET" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
