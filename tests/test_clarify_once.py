"""Exactly-once clarify resume: of concurrent resumes of one thread exactly one runs and answers its own caller's
picks, the others are refused (``ThreadBusyError``, HTTP 409); in one process, on one SQLite-backed server, and on two
server replicas sharing one PostgreSQL. A resume that fails leaves the thread waiting for a choice again."""

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.test_server import _start

pytestmark = pytest.mark.heavy  # serve replicas on SQLite and PostgreSQL

QUESTION = "When did the Harry Potter film come out?"
PICKS = [[1], [2], [1, 2], [2, 1], []]  # five callers, five different choices
LATENCY = {"AMBIGQA_FAKE_LATENCY": "1"}  # the winning run's LLM calls take seconds: the others arrive during it


def chosen_for(picks: list[int], interpretations: list[str]) -> list[str]:
    """The interpretations a caller picked (none: all), in its order."""
    return [interpretations[p - 1] for p in picks] or interpretations


@pytest.fixture
def llm(scripted) -> str:
    """The name of a copy of the ``fake`` model whose calls take 0.3 s: the winning resume outlasts the others' claims."""
    from agent.llm.scripted import DEMO_SCRIPT

    name, _ = scripted(dict(DEMO_SCRIPT), default="Yes.", latency=0.3)
    return name


def claims(home) -> list[tuple]:
    with sqlite3.connect(home / "checkpoints.sqlite") as conn:
        return conn.execute("SELECT * FROM ambigqa_resume_claims").fetchall()


def test_concurrent_resumes_in_one_process_run_once_and_the_runner_gets_its_own_picks(home, collection, llm):
    import agent
    from agent.errors import ThreadBusyError

    waiting = agent.clarify(QUESTION, llm=llm, collection=collection)

    async def together() -> list:
        runs = [agent.aresume(waiting.thread_id, picks) for picks in PICKS]
        return await asyncio.gather(*runs, return_exceptions=True)

    outcomes = asyncio.run(together())
    done = [(picks, o) for picks, o in zip(PICKS, outcomes) if not isinstance(o, Exception)]
    assert len(done) == 1, outcomes
    assert all(isinstance(o, ThreadBusyError) for o in outcomes if o is not done[0][1]), outcomes
    picks, result = done[0]
    assert result.status == "answered" and result.chosen == chosen_for(picks, waiting.interpretations)
    with pytest.raises(agent.errors.UnknownThreadError, match="it has been answered"):
        agent.resume(waiting.thread_id, [1])
    assert claims(home) == []  # a claim lives only while its resume runs


def test_a_resume_that_fails_leaves_the_thread_waiting_and_the_next_one_answers_its_own_picks(home, collection, llm):
    import agent
    from agent.errors import LLMUnavailableError
    from agent.llm.factory import register_model
    from agent.llm.scripted import ScriptedChatModel, demo_model

    waiting = agent.clarify(QUESTION, llm=llm, collection=collection)
    register_model(llm, ScriptedChatModel(fail_with=LLMUnavailableError("the LLM is down")))
    with pytest.raises(LLMUnavailableError):
        agent.resume(waiting.thread_id, [1])  # fails after the choice, in answer_chosen
    assert claims(home) == []
    register_model(llm, demo_model())  # back up
    done = agent.resume(waiting.thread_id, [2])
    assert done.status == "answered" and done.chosen == waiting.interpretations[1:2] and done.answer
    with pytest.raises(agent.errors.UnknownThreadError, match="it has been answered"):
        agent.resume(waiting.thread_id, [1])


def test_a_held_claim_refuses_a_resume_and_a_crashed_processs_stale_claim_is_taken_over(home, collection):
    import agent
    from agent.errors import ThreadBusyError
    from agent.threads import CLAIM_S

    waiting = agent.clarify(QUESTION, llm="fake", collection=collection)
    with sqlite3.connect(home / "checkpoints.sqlite") as conn:
        conn.execute("INSERT INTO ambigqa_resume_claims VALUES (?, 'elsewhere', ?)", (waiting.thread_id, time.time()))
    with pytest.raises(ThreadBusyError, match=f"clarify thread '{waiting.thread_id}' is already being resumed"):
        agent.resume(waiting.thread_id, [1])
    with sqlite3.connect(home / "checkpoints.sqlite") as conn:
        conn.execute("UPDATE ambigqa_resume_claims SET claimed_at = ?", (time.time() - CLAIM_S - 1,))
    assert agent.resume(waiting.thread_id, [1]).chosen == waiting.interpretations[:1]
    assert claims(home) == []


def test_ping_passes_on_a_usable_file_and_is_a_store_error_on_one_that_is_not_a_database(home, tmp_path):
    from agent.errors import StoreError
    from agent.threads import Threads, open_threads

    open_threads().ping()
    garbage = tmp_path / "checkpoints.sqlite"
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match=f"the clarify threads' file {garbage} cannot be used"):
        Threads(str(garbage), False).ping()


def resume_together(bases: list[str], thread_id: str) -> list[httpx.Response]:
    """POST every one of PICKS to ``/clarify/THREAD/resume`` at once, spread over ``bases``."""
    barrier = threading.Barrier(len(PICKS))

    def one(i: int) -> httpx.Response:
        with httpx.Client(base_url=bases[i % len(bases)], headers={"X-API-Key": "sesame"}, timeout=120) as client:
            client.get("/health")  # connected before the start
            barrier.wait()
            return client.post(f"/clarify/{thread_id}/resume", json={"picks": PICKS[i]})

    with ThreadPoolExecutor(len(PICKS)) as pool:
        return list(pool.map(one, range(len(PICKS))))


def assert_one_ran_with_its_own_picks(responses: list[httpx.Response], interpretations: list[str]) -> None:
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 409, 409, 409, 409], [r.text for r in responses]
    for picks, r in zip(PICKS, responses):
        if r.status_code == 200:
            assert r.json()["chosen"] == chosen_for(picks, interpretations), (picks, r.json()["chosen"])
        else:
            assert "is already being resumed by another request" in r.json()["detail"]


def start_thread(base: str) -> dict:
    r = httpx.post(f"{base}/clarify", json={"question": QUESTION}, headers={"X-API-Key": "sesame"}, timeout=120)
    assert r.status_code == 200 and r.json()["status"] == "needs_choice", r.text
    return r.json()


@pytest.fixture(scope="module")
def sqlite_server(served_home):
    proc, base = _start(served_home, "tiny", "--api-key", "sesame", "--max-concurrent", "8", env_extra=LATENCY)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.parametrize("trial", range(3))
def test_concurrent_http_resumes_on_sqlite_answer_one_200_and_409s(sqlite_server, trial):
    waiting = start_thread(sqlite_server)
    assert_one_ran_with_its_own_picks(
        resume_together([sqlite_server], waiting["thread_id"]), waiting["interpretations"]
    )
    again = httpx.post(
        f"{sqlite_server}/clarify/{waiting['thread_id']}/resume", json={"picks": [1]}, headers={"X-API-Key": "sesame"}
    )
    assert again.status_code == 404 and "has been answered" in again.json()["detail"]


@pytest.fixture(scope="module")
def postgres_replicas(tmp_path_factory, corpus_file, postgres_url):
    """Two `serve` processes, each on its own home, sharing the PostgreSQL that holds the collection and the threads."""
    homes = [tmp_path_factory.mktemp("once-replica") for _ in range(2)]
    env = {**os.environ, "AMBIGQA_HOME": str(homes[0]), "PYTHONPATH": os.getcwd(), "AMBIGQA_DATABASE_URL": postgres_url}
    command = [sys.executable, "-m", "agent", "ingest", str(corpus_file), "-c", "once-tiny"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
    shutil.copytree(homes[0], homes[1], dirs_exist_ok=True)
    extra = {"AMBIGQA_DATABASE_URL": postgres_url, **LATENCY}
    args = ("--api-key", "sesame", "--max-concurrent", "8")
    started = [_start(home, "once-tiny", *args, env_extra=extra) for home in homes]
    yield [base for _, base in started]
    for proc, _ in started:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("trial", range(3))
def test_concurrent_http_resumes_over_two_postgres_replicas_answer_one_200_and_409s(
    postgres_replicas, postgres_url, trial
):
    import psycopg

    waiting = start_thread(postgres_replicas[trial % 2])
    responses = resume_together(postgres_replicas, waiting["thread_id"])
    assert_one_ran_with_its_own_picks(responses, waiting["interpretations"])
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM ambigqa_resume_claims").fetchone()[0] == 0
