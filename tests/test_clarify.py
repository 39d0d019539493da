"""Clarify threads (``agent.clarify`` / ``agent.resume``): a run stops at the interpretations and any process sharing
the threads' database answers the person's pick; on SQLite by default, on a real PostgreSQL (``postgres_url``) when
``AMBIGQA_DATABASE_URL`` is set; over HTTP, a thread started on one server replica resumes on another."""

import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import psycopg
import pytest

from tests.test_server import _free_port, _start

QUESTION = "When did the Harry Potter film come out?"
KEY = {"X-API-Key": "sesame"}
RESUME = "import sys, agent; print(agent.resume(sys.argv[1], [1]).model_dump_json())"


@pytest.fixture
def database(monkeypatch):
    """Point this process's settings at a PostgreSQL URL for one test."""
    from agent.settings import get_settings

    def use(url: str) -> None:
        monkeypatch.setenv("AMBIGQA_DATABASE_URL", url)
        get_settings.cache_clear()

    yield use
    monkeypatch.undo()
    get_settings.cache_clear()


def _ingest_here(corpus_file) -> str:
    """The test corpus in whichever store the current settings name."""
    from agent.retrieval.ingest import ingest

    ingest(corpus_file, "clarify-tiny", progress=False)
    return "clarify-tiny"


def test_a_thread_waits_for_a_choice_then_answers_the_picked_interpretation(home, collection):
    import agent

    nodes = []
    waiting = agent.clarify(QUESTION, llm="fake", collection=collection, on_node=lambda node, *_: nodes.append(node))
    assert waiting.status == "needs_choice" and waiting.question == QUESTION and len(waiting.interpretations) >= 2
    assert waiting.answer is None and nodes == ["type_ambiguity", "interpret"]
    done = agent.resume(waiting.thread_id, [2], on_node=lambda node, *_: nodes.append(node))
    assert done.status == "answered" and done.thread_id == waiting.thread_id and done.route == "clarify"
    assert done.chosen == waiting.interpretations[1:2] and done.answer and done.disambiguations
    assert nodes[-1] == "answer_chosen"
    assert (home / "checkpoints.sqlite").is_file() and not (home / "clarify").exists()  # the thread is all in SQLite
    with pytest.raises(agent.errors.UnknownThreadError, match="it has been answered"):
        agent.resume(waiting.thread_id, [1])


def test_unknown_threads_and_picks_out_of_range_are_one_line_errors(home, collection):
    import agent
    from agent.errors import ConfigError, UnknownThreadError

    with pytest.raises(UnknownThreadError, match="no clarify thread 'clarify-nope' to resume"):
        agent.resume("clarify-nope", [1])
    waiting = agent.clarify(QUESTION, llm="fake", collection=collection)
    count = len(waiting.interpretations)
    for picks in ([0], [count + 1], [1, 99]):
        with pytest.raises(ConfigError, match=f"choose numbers from 1 to {count}"):
            agent.resume(waiting.thread_id, picks)
    assert agent.resume(waiting.thread_id, []).chosen == waiting.interpretations  # still waiting; none picked: all


def test_on_postgres_a_thread_started_here_resumes_in_another_process_with_its_own_options(
    home, corpus_file, postgres_url, database, tmp_path
):
    import agent

    database(postgres_url)
    collection = _ingest_here(corpus_file)
    waiting = agent.clarify(QUESTION, llm="fake", collection=collection, max_interpretations=1)
    assert waiting.status == "needs_choice" and len(waiting.interpretations) == 1
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (waiting.thread_id,)).fetchone()
    assert rows[0] > 0
    # the other process is told neither the LLM nor the collection: both come with the thread
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "AMBIGQA_DATABASE_URL": postgres_url, "AMBIGQA_HOME": str(tmp_path),
           "AMBIGQA_LLM": "no-such-llm", "AMBIGQA_COLLECTION": "no-such-collection"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", RESUME, waiting.thread_id], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(proc.stdout)
    assert done["status"] == "answered" and done["chosen"] == waiting.interpretations and done["answer"]


def test_a_database_that_goes_away_is_one_error_naming_its_host_and_the_thread_resumes_when_it_returns(
    home, corpus_file, tmp_path, database
):
    import agent
    from agent.errors import StoreError
    from agent.retrieval.local_postgres import start
    from agent.threads import open_threads

    server = start(tmp_path / "pg")
    try:
        database(server.url.replace("postgres@", "postgres:s3cret@"))  # trust auth: any password is accepted
        collection = _ingest_here(corpus_file)
        waiting = agent.clarify(QUESTION, llm="fake", collection=collection)
        server.stop()
        # a long outage (about 12 s of requests) would leave a pool with an unbounded backoff sleeping 8 s past the return
        for attempt in (lambda: agent.resume(waiting.thread_id, [1]), *[open_threads().ping] * 3):
            with pytest.raises(StoreError) as down:
                attempt()
            message = str(down.value)
            assert f"127.0.0.1:{server.port}" in message and "Connection refused" in message and "s3cret" not in message
            assert len(message.splitlines()) == 1
        start(server.data, server.port)  # the same data, the same port
        open_threads().ping()
        assert agent.resume(waiting.thread_id, [1]).status == "answered"  # the pool reconnected
    finally:
        server.stop()


@pytest.fixture(scope="module")
def replica_homes(tmp_path_factory, corpus_file, postgres_url):
    """Two copies of a home holding the corpus, one per replica (as on two machines)."""
    homes = [tmp_path_factory.mktemp("replica-home") for _ in range(2)]
    env = {**os.environ, "AMBIGQA_HOME": str(homes[0]), "PYTHONPATH": os.getcwd(), "AMBIGQA_DATABASE_URL": postgres_url}
    command = [sys.executable, "-m", "agent", "ingest", str(corpus_file), "-c", "clarify-tiny"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
    shutil.copytree(homes[0], homes[1], dirs_exist_ok=True)
    return homes


@pytest.fixture(scope="module")
def replicas(replica_homes, postgres_url):
    """Two `serve` processes, each on its own home, sharing only the PostgreSQL their threads live in."""
    extra = {"AMBIGQA_DATABASE_URL": postgres_url}
    started = [_start(home, "clarify-tiny", "--api-key", "sesame", env_extra=extra) for home in replica_homes]
    yield [base for _, base in started]
    for proc, _ in started:
        proc.terminate()
        proc.wait(timeout=30)


def post(base: str, path: str, payload: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=payload, headers=KEY if headers is None else headers, timeout=120)


@pytest.mark.heavy  # serve processes
def test_a_clarify_thread_started_on_one_replica_resumes_on_another(replicas, replica_homes):
    one, other = replicas
    started = post(one, "/clarify", {"question": QUESTION})
    assert started.status_code == 200, started.text
    waiting = started.json()
    assert waiting["status"] == "needs_choice" and waiting["interpretations"] and "answer" not in waiting
    resumed = post(other, f"/clarify/{waiting['thread_id']}/resume", {"picks": [1]})
    assert resumed.status_code == 200, resumed.text
    done = resumed.json()
    assert done["status"] == "answered" and done["chosen"] == waiting["interpretations"][:1] and done["answer"]
    again = post(one, f"/clarify/{waiting['thread_id']}/resume", {"picks": [1]})
    assert again.status_code == 404 and "has been answered" in again.json()["detail"]
    assert not any((home / "checkpoints.sqlite").exists() for home in replica_homes)


@pytest.mark.heavy  # serve processes
def test_an_unknown_thread_is_404_with_one_line(replicas):
    r = post(replicas[1], "/clarify/clarify-0000/resume", {"picks": [1]})
    assert r.status_code == 404 and r.json()["detail"].startswith("no clarify thread 'clarify-0000' to resume")
    assert "\n" not in r.json()["detail"]


@pytest.mark.heavy  # serve processes
@pytest.mark.parametrize(
    ("path", "payload", "status", "fragment"),
    [("/clarify", {"question": ""}, 422, "the question is empty"),
     ("/clarify", {"question": QUESTION, "options": {"llm": "local"}}, 422, "'llm' cannot be set"),
     ("/clarify", {"question": QUESTION, "options": {"collection": "secret"}}, 422, "'secret' is not served"),
     ("/clarify", {"question": QUESTION, "options": {"top_k": -1}}, 422, "top_k"),
     ("/clarify/clarify-0000/resume", {"picks": ["one"]}, 422, "picks: a list of interpretation numbers")],
)  # fmt: skip
def test_clarify_requests_pass_the_guard_of_the_graph_routes(replicas, path, payload, status, fragment):
    r = post(replicas[0], path, payload)
    assert r.status_code == status and fragment in r.json()["detail"], r.text
    assert post(replicas[0], path, payload, headers={}).status_code == 401


@pytest.mark.heavy  # serve processes
def test_a_pick_out_of_range_over_http_is_422_and_the_thread_still_waits(replicas):
    waiting = post(replicas[0], "/clarify", {"question": QUESTION, "options": {"max_interpretations": 2}}).json()
    r = post(replicas[1], f"/clarify/{waiting['thread_id']}/resume", {"picks": [3]})
    assert r.status_code == 422 and "choose numbers from 1 to 2" in r.json()["detail"]
    assert post(replicas[1], f"/clarify/{waiting['thread_id']}/resume", {"picks": [2]}).status_code == 200


def _serve_on_a_database_that_is_down(home, collection: str, url: str) -> tuple[subprocess.Popen, str]:
    """`serve` with the fake LLM, ready once /health answers at all (it is 503 while the database is down)."""
    port = _free_port()
    env = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), "AMBIGQA_DATABASE_URL": url}
    command = [sys.executable, "-m", "agent", "serve", "--port", str(port), "--llm", "fake", "-c", collection]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/health", timeout=10)
            return proc, base
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.mark.heavy  # serve processes
def test_a_database_on_a_closed_port_is_503_naming_its_host_and_not_its_password(served_home):
    port = _free_port()  # nothing listens there
    url = f"postgresql://ambigqa:s3cret@127.0.0.1:{port}/threads"
    proc, base = _serve_on_a_database_that_is_down(served_home, "tiny", url)
    try:
        r = post(base, "/clarify", {"question": QUESTION}, headers={})
        detail = r.json()["detail"]
        assert r.status_code == 503 and f"127.0.0.1:{port}" in detail and "s3cret" not in detail, r.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
