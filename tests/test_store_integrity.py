"""Stores that never mix, lose or leak (issue 88): collections with long names keep their own PostgreSQL tables, an
interrupted edit never leaves the old text behind, a text listed under two ids is reported, and a database URL's
password, a non-UTF-8 file or a name with control characters is one line on the command line, never a traceback."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.errors import IngestError
from agent.retrieval.collections import open_store
from agent.retrieval.ingest import ingest
from agent.settings import get_settings
from tests.conftest import PASSAGES
from tests.test_server import _free_port
from tests.test_stores import store_kind  # noqa: F401 - the fixture: each test on Chroma and on PostgreSQL

_names = itertools.count(1)
EDITED_BREAD = "Sourdough is bread leavened by a starter culture of wild yeast, kept alive between bakes."


def _corpus(folder: Path, rows: list[dict]) -> Path:
    path = folder / f"corpus-{next(_names)}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def on_postgres(postgres_url, home, monkeypatch, request) -> str:
    monkeypatch.setenv("AMBIGQA_DATABASE_URL", postgres_url)
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)  # before monkeypatch restores the environment
    return postgres_url


def _relations(url: str, pattern: str) -> set[str]:
    from agent.retrieval.postgres_store import run

    return {r[0] for r in run(url, lambda c: c.execute("SELECT relname FROM pg_class WHERE relname LIKE %s",
                                                       (pattern,)).fetchall())}  # fmt: skip


def test_names_sharing_their_first_60_characters_keep_their_own_tables(on_postgres, tmp_path):
    stem = f"long-{next(_names)}-".ljust(60, "x")
    names = [f"{stem}one", f"{stem}two"]  # 63 characters, the most a name may have
    own = {names[0]: PASSAGES[:3], names[1]: PASSAGES[3:]}
    for name, rows in own.items():
        report = ingest(_corpus(tmp_path, rows), name, progress=False)
        assert (report.added, report.skipped) == (3, 0)
    for name, rows in own.items():
        store = open_store(name)
        assert store.count() == 3
        ids = [r["id"] for r in rows]
        assert {p.id for p in store.search("a film, a volcano, cricket or bread", 6)} == set(ids)
        assert [p.id for p in store.passages([p["id"] for p in PASSAGES])] == ids
        assert {p.id for p in store.sparse_many(["Harry Potter film Etna Sicily cricket sourdough"], 6)[0]} == set(ids)
    from agent.retrieval.postgres_store import RELATIONS, relation

    derived = [relation(name, kind) for name in names for kind in RELATIONS]
    assert len(set(derived)) == len(derived) and all(len(r.encode()) <= 63 for r in derived)
    assert {relation(n) for n in names} | {relation(n, "postings") for n in names} <= _relations(
        on_postgres, f"%{stem[:20]}%"
    )
    again = ingest(_corpus(tmp_path, own[names[1]]), names[1], progress=False)  # today's crash: the shared table
    assert (again.added, again.skipped) == (0, 3)


def test_a_short_name_keeps_the_relations_it_always_had(on_postgres, tmp_path):
    name = f"short-{next(_names)}"
    ingest(_corpus(tmp_path, PASSAGES[:2]), name, progress=False)
    found = _relations(on_postgres, f"ambigqa_{name}%")
    assert {f"ambigqa_{name}", f"ambigqa_{name}_postings", f"ambigqa_{name}_hnsw", f"ambigqa_{name}_bm25",
            f"ambigqa_{name}_doc"} <= found  # fmt: skip
    assert not any("$" in r for r in found)


def test_a_name_whose_tables_another_collection_owns_is_refused(on_postgres, tmp_path):
    name = f"owner-{next(_names)}"
    ingest(_corpus(tmp_path, PASSAGES[:2]), name, progress=False)
    for clash in (f"{name}_postings", "collections"):  # the owner's postings; the registry
        with pytest.raises(IngestError, match=f"collection name '{clash}' cannot be used on PostgreSQL") as error:
            ingest(_corpus(tmp_path, PASSAGES[2:4]), clash, progress=False)
        assert len(str(error.value).splitlines()) == 1
    assert open_store(name).count() == 2
    assert [p.id for p in open_store(name).sparse_many(["Harry Potter premiere"], 5)[0]][:1] == ["hp-premiere"]


class Killed(BaseException):
    """The process dying at that point (not an ``Exception``: nothing on the way catches it)."""


def _dies_before_the_old_version_goes(writer):
    """``writer``, whose removal of old versions dies after the new versions are written: on PostgreSQL inside the
    transaction that wrote them (``_remove``), on Chroma in the separate delete after its add."""
    from agent.retrieval.postgres_store import PostgresStore

    def die(*args) -> None:
        raise Killed

    setattr(writer, "_remove" if isinstance(writer, PostgresStore) else "delete", die)
    return writer


def test_an_edit_interrupted_before_the_old_version_goes_leaves_no_old_text(store_kind, tmp_path, monkeypatch):  # noqa: F811
    import agent.retrieval.ingest as ingest_module
    from agent.retrieval.embeddings import usable
    from agent.retrieval.writers import open_writer

    name = f"edit-{store_kind}-{next(_names)}"
    ingest(_corpus(tmp_path, PASSAGES), name, progress=False)
    edited = _corpus(tmp_path, [dict(p, text=EDITED_BREAD) if p["id"] == "bread" else p for p in PASSAGES])
    with monkeypatch.context() as patch:
        patch.setattr(
            ingest_module, "open_writer", lambda *a, **k: _dies_before_the_old_version_goes(open_writer(*a, **k))
        )
        with pytest.raises(Killed):
            ingest(edited, name, progress=False)
    writer = open_writer(name, usable(get_settings().embeddings))
    left = len(writer.versions(["bread"]))
    assert left == (1 if store_kind == "postgres" else 2)  # one transaction on PostgreSQL; both on Chroma
    report = ingest(edited, name, progress=False)
    assert report.removed == 1 and report.added == (1 if store_kind == "postgres" else 0)
    store = open_store(name)
    assert store.count() == len(PASSAGES)
    assert [p.text for p in store.passages(["bread"])] == [EDITED_BREAD]
    assert store.sparse_many(["lactobacilli"], 3) == [[]]  # a word only the old version had
    assert store.sparse_many(["starter culture wild yeast"], 1)[0][0].id == "bread"
    assert [p.id for p in store.search("sourdough bread", len(PASSAGES))].count("bread") == 1
    assert ingest(edited, name, progress=False).removed == 0


def test_an_id_whose_title_and_text_an_earlier_id_has_is_reported_by_name(store_kind, tmp_path):  # noqa: F811
    name = f"copies-{store_kind}-{next(_names)}"
    copy = dict(PASSAGES[5], id="bread-copy")
    corpus = _corpus(tmp_path, [*PASSAGES, copy])
    first = ingest(corpus, name, progress=False, batch_size=4)  # the copy in another batch than its original
    assert (first.added, first.skipped, first.dropped, first.dropped_ids) == (6, 0, 1, [("bread-copy", "bread")])
    assert first.summary() == (
        "6 added, 0 already stored, 1 left out, their title and text stored under an earlier id "
        "('bread-copy' as 'bread')"
    )
    store = open_store(name)
    assert [p.id for p in store.passages(["bread", "bread-copy"])] == ["bread"]
    again = ingest(corpus, name, progress=False, batch_size=4, prune=True)
    assert (again.added, again.relabelled, again.removed, again.skipped, again.dropped) == (0, 0, 0, 6, 1)
    assert [p.id for p in store.passages(["bread"])] == ["bread"]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})}
    return subprocess.run([sys.executable, "-m", "agent", *args], env=environ, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    """The run failed with one line on stderr and nothing on stdout; that line."""
    assert done.returncode != 0
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "url",
    [
        "postgresq://postgres:SECRET@127.0.0.1:5433/postgres",  # the scheme mistyped
        "postgresql://postgres:SECRET@127.0.0.1:5433/postgres?nonsense=1",  # libpq cannot parse it
        "postgresql://postgres@127.0.0.1:notaport/postgres?password=SECRET",
        "postgresql://postgres:SECRET@127.0.0.1:{port}/postgres?connect_timeout=2",  # nothing listens there
        "postgresql://postgres@127.0.0.1:{port}/postgres?password=SECRET&connect_timeout=2",
    ],
)
def test_a_database_url_never_shows_its_password(url, home, corpus_file, tmp_path):
    url = url.format(port=_free_port())
    env = {"AMBIGQA_DATABASE_URL": url, "AMBIGQA_HOME": str(tmp_path)}
    asked = _cli("ask", "Who wrote Hamlet?", "--llm", "fake", "--quiet", env=env)
    ingested = _cli("ingest", str(corpus_file), "-c", "secret", env=env)
    for done in (asked, ingested):
        assert "SECRET" not in done.stdout + done.stderr
        line = _one_error_line(done)
        assert "***" in line or "127.0.0.1" in line


def test_non_utf8_files_and_names_with_control_characters_are_one_line_errors(home, corpus_file, tmp_path):
    latin = tmp_path / "latin-1.jsonl"
    latin.write_bytes(json.dumps({"id": "a", "title": "Café", "text": "crème brûlée"}, ensure_ascii=False)
                      .encode("latin-1") + b"\n")  # fmt: skip
    env = {"AMBIGQA_HOME": str(tmp_path / "home")}
    asked = _one_error_line(_cli("ask", "What is it?", "--llm", "fake", "--quiet", "--passages", str(latin), env=env))
    assert f"{latin}:1: not UTF-8 (byte 0xe9" in asked
    ingested = _one_error_line(_cli("ingest", str(latin), "-c", "latin", env=env))
    assert f"{latin}:1: not UTF-8 (byte 0xe9" in ingested
    for name in ("a\nb", "abc\n", "ab\x1b[31mc"):
        line = _one_error_line(_cli("ingest", str(corpus_file), "-c", name, env=env))
        assert f"collection name {name!r} is not usable" in line
        line = _one_error_line(_cli("ask", "Who wrote Hamlet?", "--llm", "fake", "--quiet", "-c", name, env=env))
        assert f"collection name {name!r} is not usable" in line
