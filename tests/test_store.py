"""Ingest and retrieval on real Chroma in a temp dir with the real MiniLM encoder."""

import json

import pytest

from agent.errors import CollectionError, IngestError
from agent.retrieval.collections import open_store
from agent.retrieval.ingest import ingest
from tests.conftest import PASSAGES


def test_retrieval_ranks_the_relevant_passages_first(collection):
    hits = open_store(collection).search("When did the Harry Potter film come out?", 3)
    assert {h.id for h in hits[:2]} <= {"hp-premiere", "hp-us", "hp-book"}
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_reingesting_an_unchanged_corpus_embeds_nothing(collection, corpus_file):
    report = ingest(corpus_file, collection, progress=False)
    assert report.added == 0 and report.skipped == len(PASSAGES)
    assert open_store(collection).count() == len(PASSAGES)


def test_ingest_adds_only_new_passages(home, tmp_path):
    first = tmp_path / "a.jsonl"
    first.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES[:3]))
    assert ingest(first, "grow", progress=False).added == 3
    more = tmp_path / "b.jsonl"
    more.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    report = ingest(more, "grow", progress=False)
    assert (report.added, report.skipped) == (3, 3)


def test_a_bad_file_leaves_the_collection_untouched(collection, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "new", "title": "t", "text": "fresh passage"}) + "\n{not json\n")
    with pytest.raises(IngestError, match="bad.jsonl:2"):
        ingest(bad, collection, progress=False)
    assert open_store(collection).count() == len(PASSAGES)


def test_missing_fields_and_files_are_clear_errors(home, tmp_path):
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text(json.dumps({"id": "x", "title": "t"}) + "\n")
    with pytest.raises(IngestError, match="no_text.jsonl:1"):
        ingest(no_text, "whatever", progress=False)
    with pytest.raises(IngestError, match="does not exist"):
        ingest(tmp_path / "nope.jsonl", "whatever", progress=False)
    with pytest.raises(IngestError, match="at least 3 characters"):
        ingest(no_text, "ab", progress=False)


def test_missing_and_empty_collections_say_run_ingest(home):
    from agent.retrieval.chroma_store import get_client

    with pytest.raises(CollectionError, match="does not exist: run `ambigqa ingest"):
        open_store("never-made")
    from agent.retrieval.embeddings import MiniLMEmbeddingFunction

    get_client().get_or_create_collection("hollow", embedding_function=MiniLMEmbeddingFunction())
    with pytest.raises(CollectionError, match="is empty"):
        open_store("hollow")


def test_collection_reopens_without_passing_the_embedding_function(collection):
    from agent.retrieval.chroma_store import get_client

    reopened = get_client().get_collection(collection)  # our function is registered by name
    hits = reopened.query(query_texts=["volcano in Sicily"], n_results=1)
    assert hits["metadatas"][0][0]["doc_id"] == "volcano"


def test_stored_embeddings_are_returned_not_recomputed(collection):
    store = open_store(collection)
    hits = store.search("Sourdough bread", 2)
    vectors = store.embeddings(hits)
    assert vectors.shape == (2, 384)
    assert float(vectors[0] @ vectors[0]) == pytest.approx(1.0, abs=1e-3)


def test_the_sparse_side_ranks_by_term_overlap_from_its_index_on_disk(collection, home):
    store = open_store(collection)
    ranked = store.sparse_many(["Where is the stratovolcano Etna?", "the of and"], 2)
    assert ranked[0][0].id == "volcano" and ranked[0][0].score > 0
    assert ranked[1] == []  # stop words alone match nothing
    assert (home / "sparse" / f"{collection}.sqlite").is_file()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    """A real Chroma server (the `chroma` binary chromadb ships) on loopback."""
    import shutil
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    binary = Path(sys.executable).parent / "chroma"
    binary = str(binary) if binary.exists() else shutil.which("chroma")
    if binary is None:
        pytest.fail("chromadb's `chroma` server binary is missing")
    port = _free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    server = subprocess.Popen([binary, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("the Chroma server did not start")
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(10)


def test_a_chroma_server_ingests_and_searches_like_the_embedded_store(chroma_url, corpus_file, tmp_path):
    from agent.settings import Settings

    settings = Settings(home=tmp_path / "home", chroma_url=chroma_url)
    assert ingest(corpus_file, "remote", settings=settings, progress=False).added == len(PASSAGES)
    assert ingest(corpus_file, "remote", settings=settings, progress=False).skipped == len(PASSAGES)
    store = open_store("remote", settings=settings)
    assert store.count() == len(PASSAGES)
    assert store.search("Where is the Odeon Leicester Square premiere?", 1)[0].id == "hp-premiere"
    assert not settings.chroma_path.exists()  # nothing went to the embedded store


def test_an_unreachable_chroma_server_is_a_clear_error(tmp_path):
    from agent.settings import Settings

    settings = Settings(home=tmp_path / "home", chroma_url=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(
        CollectionError, match="cannot reach the Chroma server at http://127.0.0.1:.*AMBIGQA_CHROMA_URL"
    ):
        open_store("remote", settings=settings)


def test_ingest_syncs_edits_and_prunes_what_left_the_file(home, tmp_path):
    path = tmp_path / "sync.jsonl"
    rows = [dict(p) for p in PASSAGES[:3]]
    path.write_text("".join(json.dumps(p) + "\n" for p in rows))
    assert ingest(path, "synced", progress=False).added == 3
    rows[0]["text"] = "The film premiered in London on 4 November 2001, an edited sentence."
    path.write_text("".join(json.dumps(p) + "\n" for p in rows[:2]))  # the third passage left the file
    report = ingest(path, "synced", progress=False)
    assert (report.added, report.updated, report.removed, report.skipped) == (1, 1, 1, 1)  # the old version went
    store = open_store("synced")
    assert store.count() == 3  # without --prune the passage that left the file stays
    pruned = ingest(path, "synced", progress=False, prune=True)
    assert (pruned.added, pruned.removed) == (0, 1) and open_store("synced").count() == 2
    texts = {p.text for p in open_store("synced").search("premiere London", 2)}
    assert rows[0]["text"] in texts and PASSAGES[0]["text"] not in texts
    again = ingest(path, "synced", progress=False, prune=True)
    assert (again.added, again.removed, again.skipped) == (0, 0, 2)  # an unchanged file is a no-op


def test_a_file_that_is_not_utf8_is_one_clear_error(home, tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(
        json.dumps({"id": "a", "title": "t", "text": "ok"}).encode() + b"\n" + b'{"id": "b", "text": "caf\xe9"}\n'
    )
    with pytest.raises(IngestError, match=r"latin1.jsonl:2: not UTF-8 \(byte 0xe9"):
        ingest(bad, "latin", progress=False)
