"""Both stores through one interface: the embedded Chroma store and a real PostgreSQL with pgvector on loopback.

Every test runs on each store: ingest as a sync, dense, sparse and hybrid search, stored vectors, passages by id,
neighbours from the index, precomputed vectors, and the retrieval pipeline and a method on top.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from agent.errors import CollectionError, IngestError, StoreError
from agent.retrieval.collections import open_store
from agent.retrieval.ingest import ingest
from agent.retrieval.pipeline import RetrievalOptions, first_stage, search
from agent.settings import get_settings
from tests.conftest import PASSAGES

_names = itertools.count(1)


@pytest.fixture(params=["chroma", "postgres"])
def store_kind(request, home):
    """Point the settings at one store for the test; back to the embedded default afterwards."""
    if request.param == "postgres":
        os.environ["AMBIGQA_DATABASE_URL"] = request.getfixturevalue("postgres_url")
    get_settings.cache_clear()
    yield request.param
    os.environ.pop("AMBIGQA_DATABASE_URL", None)
    get_settings.cache_clear()


def _corpus(folder: Path, rows: list[dict]) -> Path:
    path = folder / f"corpus-{next(_names)}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def tiny(store_kind, tmp_path) -> str:
    name = f"tiny-{store_kind}-{next(_names)}"
    ingest(_corpus(tmp_path, PASSAGES), name, progress=False)
    return name


def test_ingest_is_a_sync_on_each_store(store_kind, tmp_path):
    name = f"sync-{next(_names)}"
    first = ingest(_corpus(tmp_path, PASSAGES), name, progress=False, batch_size=4)
    assert (first.added, first.skipped) == (6, 0)
    again = ingest(_corpus(tmp_path, PASSAGES), name, progress=False, batch_size=4)
    assert (again.added, again.skipped, again.removed) == (0, 6, 0)
    edited = [dict(p, text=p["text"] + " (edited)") if p["id"] == "bread" else p for p in PASSAGES[1:]]
    report = ingest(_corpus(tmp_path, edited), name, progress=False, prune=True, batch_size=2)
    assert (report.added, report.updated, report.removed) == (1, 1, 2)  # bread replaced, hp-premiere pruned
    store = open_store(name)
    assert store.count() == 5
    assert [p.text for p in store.passages(["bread"])] == [edited[-1]["text"]]
    assert store.passages(["hp-premiere", "nope"]) == []
    assert store.sparse_many(["edited sourdough"], 1)[0][0].id == "bread"  # the new version is searchable
    assert all(p.id != "hp-premiere" for p in store.sparse_many(["Harry Potter premiere London"], 5)[0])


def test_an_id_listed_with_two_texts_stores_both_under_distinct_ids_and_a_rerun_changes_nothing(store_kind, tmp_path):
    second = dict(PASSAGES[0], text="The film's charity premiere in New York took place on 14 November 2001.")
    twice = [*PASSAGES, second, PASSAGES[0]]  # the id again with another text, then the first record repeated
    name = f"twice-{next(_names)}"
    first = ingest(_corpus(tmp_path, twice), name, progress=False, batch_size=3)
    assert (first.added, first.removed, first.renamed) == (7, 0, 1)
    assert first.summary() == "7 added, 1 already stored, 1 stored as ID#2, … (an id listed before with another text)"
    store = open_store(name)
    by_id = {p.id: p.text for p in store.passages(["hp-premiere", "hp-premiere#2"])}
    assert by_id == {"hp-premiere": PASSAGES[0]["text"], "hp-premiere#2": second["text"]}
    dense = store.search("Harry Potter film premiere", 7)
    assert len({p.id for p in dense}) == 7  # no two passages answer to one id
    fused = search(store, "Harry Potter premiere", 7, RetrievalOptions(first_stage="hybrid", reranker="none"))
    assert {"hp-premiere", "hp-premiere#2"} <= {p.id for p in fused}  # fusion keeps both texts
    again = ingest(_corpus(tmp_path, twice), name, progress=False, batch_size=3, prune=True)
    assert (again.added, again.removed, again.skipped, again.relabelled) == (0, 0, 8, 0)


def test_a_store_that_filed_two_texts_under_one_id_is_relabelled_without_embedding(store_kind, tmp_path):
    """Collections ingested before ids were made distinct hold both texts under the one id: a re-run fixes them."""
    from agent.retrieval.embeddings import embed, usable
    from agent.retrieval.store import Row, content_id
    from agent.retrieval.writers import open_writer

    name = f"legacy-{next(_names)}"
    second = dict(PASSAGES[0], text="The film's charity premiere in New York took place on 14 November 2001.")
    rows = [*PASSAGES, second]
    writer = open_writer(name, usable(get_settings().embeddings))
    vectors = embed([f"{r['title']} | {r['text']}" for r in rows], backend=writer.backend)
    writer.add([Row(content_id(r["title"], r["text"]), r["id"], r["title"], r["text"], "", v)
                for r, v in zip(rows, vectors)])  # fmt: skip
    report = ingest(_corpus(tmp_path, rows), name, progress=False)
    assert (report.added, report.relabelled, report.removed, report.skipped) == (0, 1, 0, 7)
    store = open_store(name)
    assert [p.text for p in store.passages(["hp-premiere#2"])] == [second["text"]]
    assert [p.text for p in store.passages(["hp-premiere"])] == [PASSAGES[0]["text"]]
    assert "hp-premiere#2" in {p.id for p in store.sparse_many(["charity premiere New York"], 3)[0]}


def test_an_unchanged_passage_under_a_new_id_is_relabelled_and_survives_prune(store_kind, tmp_path):
    name = f"moved-{next(_names)}"
    ingest(_corpus(tmp_path, PASSAGES), name, progress=False)
    moved = [dict(p, id="etna") if p["id"] == "volcano" else p for p in PASSAGES]
    report = ingest(_corpus(tmp_path, moved), name, progress=False, prune=True)
    assert (report.added, report.relabelled, report.removed) == (0, 1, 0)
    store = open_store(name)
    assert store.count() == 6 and store.passages(["volcano"]) == []
    assert [p.id for p in store.passages(["etna"])] == ["etna"]
    assert store.sparse_many(["stratovolcano Sicily"], 1)[0][0].id == "etna"


def test_dense_sparse_and_hybrid_find_the_relevant_passage(tiny):
    store = open_store(tiny)
    for kind in ("dense", "bm25", "hybrid"):
        ranked = first_stage(store, ["When was the Harry Potter film released in the United States?"], 3, kind)[0]
        assert ranked[0].id in {"hp-us", "hp-premiere"}, kind
        assert all(p.score is not None for p in ranked)
    assert store.sparse_many(["stratovolcano Sicily"], 2)[0][0].id == "volcano"
    assert store.sparse_many(["the of and"], 2) == [[]]  # stop words alone match nothing
    top = search(store, "sourdough fermentation", 2, RetrievalOptions(first_stage="hybrid", reranker="cross-encoder"))
    assert top[0].id == "bread"


def test_postgres_bm25_weights_rare_terms_and_a_collection_without_postings_says_to_ingest_again(
    postgres_url, home, tmp_path, monkeypatch, request
):
    from agent.retrieval.postgres_store import REGISTRY, run

    monkeypatch.setenv("AMBIGQA_DATABASE_URL", postgres_url)
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)  # before monkeypatch restores the environment
    name = f"bm25-{next(_names)}"
    rows = [{"id": f"common-{i}", "title": "Film", "text": f"A film released in {1990 + i}, a film about a film."}
            for i in range(8)] + [{"id": "rare", "title": "Film", "text": "A film shot on Kodachrome."}]  # fmt: skip
    corpus = _corpus(tmp_path, rows)
    ingest(corpus, name, progress=False)
    store = open_store(name)
    ranked = store.sparse_many(["Kodachrome film"], 9)[0]
    assert ranked[0].id == "rare" and ranked[0].score > 2 * ranked[1].score  # IDF: the rare term carries the rank
    assert store.sparse_many(["film 1993"], 1)[0][0].id == "common-3"

    def as_an_earlier_version_left_it(c):  # no row ids, no postings
        c.execute(f'DROP TABLE "ambigqa_{name}_postings"')
        c.execute(f'ALTER TABLE "ambigqa_{name}" DROP COLUMN rid')
        c.execute(f"UPDATE {REGISTRY} SET postings_rid = 0, average_length = NULL WHERE name = %s", (name,))

    run(postgres_url, as_an_earlier_version_left_it)
    with pytest.raises(CollectionError, match=f"no BM25 postings.*ambigqa ingest CORPUS.jsonl --collection {name}"):
        store.sparse_many(["Kodachrome film"], 1)
    edited = _corpus(tmp_path, [*rows[:-1], dict(rows[-1], text="A film shot on Ektachrome.")])
    report = ingest(edited, name, progress=False, prune=True)  # the next ingest migrates, replaces and builds
    assert (report.added, report.updated) == (1, 1)
    assert store.sparse_many(["Ektachrome film"], 1)[0][0].id == "rare"
    assert store.sparse_many(["Kodachrome"], 5) == [[]]  # the old version's postings went with it
    assert ingest(edited, name, progress=False).added == 0
    assert store.sparse_many(["film 1993"], 1)[0][0].id == "common-3"


def test_stored_vectors_passages_and_neighbours_come_from_the_index(tiny):
    store = open_store(tiny)
    hits = store.search("Harry Potter film premiere", 3)
    vectors = store.embeddings(hits)
    assert vectors.shape == (3, 384)
    assert np.allclose(vectors[0], store.embed([f"{hits[0].title} | {hits[0].text}"])[0], atol=0.02)
    assert [p.id for p in store.passages(["cricket", "volcano"])] == ["cricket", "volcano"]
    near = store.neighbours(store.passages(["hp-us"]), 2)
    assert [p.id for p, _ in near["hp-us"]][0] == "hp-premiere"  # the same film's other passage, not itself
    assert all(p.id != "hp-us" for p, _ in near["hp-us"]) and len(near["hp-us"]) == 2
    similarities = [s for _, s in near["hp-us"]]
    assert similarities == sorted(similarities, reverse=True)


def test_a_missing_collection_is_the_same_clear_error_on_each_store(store_kind):
    with pytest.raises(CollectionError, match="collection 'never-ingested' does not exist.*ambigqa ingest"):
        open_store("never-ingested")


def test_precomputed_vectors_load_without_embedding(store_kind, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agent.retrieval.embeddings import embed

    rows = PASSAGES
    vectors = embed([f"{r['title']} | {r['text']}" for r in rows])
    path = tmp_path / "vectors.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "vector": [list(map(float, v)) for v in vectors]}), path)
    name = f"vectors-{next(_names)}"
    report = ingest(_corpus(tmp_path, rows), name, vectors=path, progress=False, batch_size=4)
    assert report.added == 6
    assert open_store(name).search("active volcano in Sicily", 1)[0].id == "volcano"

    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in rows[::-1]], "vector": [list(map(float, v)) for v in vectors]}),
                   shuffled)  # fmt: skip
    with pytest.raises(IngestError, match="does not line up with the corpus"):
        ingest(_corpus(tmp_path, rows), f"vectors-{next(_names)}", vectors=shuffled, progress=False)
    noise = tmp_path / "noise.parquet"
    random = np.random.default_rng(0).normal(size=(len(rows), 384))
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "vector": random.tolist()}), noise)
    with pytest.raises(IngestError, match="do not match all-MiniLM-L6-v2"):
        ingest(_corpus(tmp_path, rows), f"vectors-{next(_names)}", vectors=noise, progress=False)


@pytest.mark.parametrize("method", ["diva", "toc", "verdict", "sunar", "router"])
def test_every_method_runs_on_postgresql(postgres_url, home, tmp_path, method, monkeypatch):
    """The demo model (``fake``) through each graph over a PostgreSQL collection: retrieval, re-ranking, neighbours."""
    import agent

    monkeypatch.setenv("AMBIGQA_DATABASE_URL", postgres_url)
    get_settings.cache_clear()
    try:
        name = "every-method"
        ingest(_corpus(tmp_path, PASSAGES), name, progress=False)
        result = agent.run("When did the Harry Potter film come out?", method, llm="fake", collection=name)
        assert result.answer and result.passages
        assert {p.id for p in result.passages} <= {p["id"] for p in PASSAGES}
    finally:
        get_settings.cache_clear()


def test_a_method_runs_unchanged_on_each_store(tiny, scripted):
    import agent

    name, _ = scripted({"rag_extract": "The film premiered in London on 4 November 2001.",
                        "rag_generate": "It premiered in London on 4 November 2001."})  # fmt: skip
    result = agent.run("When did the Harry Potter film come out?", "rag", llm=name, collection=tiny)
    assert result.passages and {p.id for p in result.passages} & {"hp-us", "hp-premiere"}


def test_an_unreachable_database_names_its_host_never_its_password(home, monkeypatch):
    from tests.test_server import _free_port

    url = f"postgresql://reader:s3cret-pw@127.0.0.1:{_free_port()}/passages?connect_timeout=2"
    monkeypatch.setenv("AMBIGQA_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        with pytest.raises(StoreError) as error:
            open_store("anything")
    finally:
        get_settings.cache_clear()
    message = str(error.value)
    assert "127.0.0.1" in message and "passages" in message and "s3cret-pw" not in message
    assert len(message.splitlines()) == 1


def test_a_database_that_goes_away_is_one_clear_error_and_serves_again_when_it_returns(home, tmp_path):
    from agent.retrieval.local_postgres import start
    from agent.settings import Settings

    server = start(tmp_path / "pg")
    settings = Settings(home=home, database_url=server.url)
    try:
        ingest(_corpus(tmp_path, PASSAGES), "comeback", settings=settings, progress=False)
        store = open_store("comeback", settings)
        assert store.search("volcano in Sicily", 1)[0].id == "volcano"
        server.stop()
        began = time.monotonic()
        with pytest.raises(StoreError, match=f"cannot reach PostgreSQL at 127.0.0.1:{server.port}"):
            store.search("volcano in Sicily", 1)
        assert time.monotonic() - began < 15
        start(tmp_path / "pg", server.port)
        assert store.search("volcano in Sicily", 1)[0].id == "volcano"  # the pool reconnected by itself
    finally:
        server.stop()


def test_a_killed_ingest_resumes_where_it_stopped(postgres_url, home, tmp_path):
    """SIGKILL an ingest mid-batch (real subprocess, PostgreSQL store); a re-run stores only what is missing. A trigger
    holds the ingest's row after the 16th on a lock this test owns, so the kill lands mid-batch on any CPU."""
    import psycopg

    from agent.retrieval.postgres_store import relation

    lines = (Path(__file__).resolve().parents[1] / "data" / "demo" / "corpus.jsonl").read_text().splitlines()
    corpus, first = tmp_path / "demo.jsonl", tmp_path / "first.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    first.write_text(lines[0] + "\n")
    unique = len({(json.loads(x)["title"], json.loads(x)["text"]) for x in lines})
    env = {**os.environ, "AMBIGQA_DATABASE_URL": postgres_url, "AMBIGQA_HOME": str(tmp_path), "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "agent", "ingest", str(corpus), "-c", "killed", "--batch-size", "8"]
    os.environ["AMBIGQA_DATABASE_URL"] = postgres_url
    get_settings.cache_clear()
    try:
        ingest(first, "killed", progress=False)  # the collection's table, for the trigger
        table = relation("killed")
        with psycopg.connect(postgres_url, autocommit=True) as held:
            held.execute("SELECT pg_advisory_lock(4242)")
            held.execute(
                "CREATE FUNCTION hold_the_ingest() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF (SELECT count(*) FROM {table}) >= 16 THEN PERFORM pg_advisory_lock(4242); END IF; "
                "RETURN NEW; END $$"
            )  # a row trigger's query sees the rows its statement wrote before: the 17th row waits for the lock
            held.execute(
                f"CREATE TRIGGER hold BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION hold_the_ingest()"
            )
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
            deadline = time.monotonic() + 240
            while held.execute(waiting).fetchone()[0] == 0:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the ingest never reached its 17th row"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)  # in the middle of its third batch's write
            proc.wait(timeout=30)
            held.execute(f"DROP TRIGGER hold ON {table}")
            held.execute("DROP FUNCTION hold_the_ingest()")
            held.execute("SELECT pg_advisory_unlock(4242)")
        before = open_store("killed").count()
        assert before == 16, before  # two whole batches (the first record was there); none of the third
        report = ingest(corpus, "killed", progress=False)
        assert report.added == unique - before and open_store("killed").count() == unique
    finally:
        os.environ.pop("AMBIGQA_DATABASE_URL", None)
        get_settings.cache_clear()


def test_the_postgres_command_serves_a_database_until_it_is_stopped(tmp_path):
    import psycopg

    from tests.test_server import _free_port

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "agent", "postgres", str(tmp_path / "pg"), "--port", str(port)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == f"AMBIGQA_DATABASE_URL=postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(line.split("=", 1)[1]) as connection:
            assert connection.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2)
