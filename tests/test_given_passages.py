"""Bring your own passages: every method reads exactly the passages a caller gives (re-ranked and pruned within
them where the method does so), with no collection at all; bad passages are one clear error. Real embeddings and
re-rankers; the scripted ``fake`` model."""

import pytest

import agent
from agent.errors import ConfigError, InvalidPassagesError
from agent.registry import METHODS

QUESTION = "When did the Harry Potter film come out?"
TEXTS = [
    "Harry Potter and the Philosopher's Stone premiered in London on 4 November 2001.",
    "The film was released in the United States on 16 November 2001.",
    "Paris is the capital of France.",
    "The film opened across the United Kingdom on 16 November 2001.",
    "Chess is a board game for two players.",
    "Bananas are yellow when ripe.",
    "Rome is the capital of Italy.",
    "The Warner Bros. film was directed by Chris Columbus.",
]
GIVEN = [
    {"id": f"doc-{i}", "title": "Harry Potter" if i in (0, 1, 3, 7) else "", "text": t} for i, t in enumerate(TEXTS)
]
IDS = {d["id"] for d in GIVEN}
NO_COLLECTION = "no-such-collection"  # never opened: a run over given passages needs none


@pytest.mark.parametrize("method", [m for m in METHODS if m != "closed_book"])
def test_every_method_reads_only_the_given_passages_without_a_collection(method):
    result = agent.run(QUESTION, method=method, llm="fake", collection=NO_COLLECTION, passages=GIVEN)
    assert result.answer and result.passages
    assert {p.id for p in result.passages} <= IDS and {p.id for p in result.retrieved or []} <= IDS


def test_rag_and_verdict_read_every_given_passage_best_first():
    for method in ("rag", "verdict"):
        result = agent.run(QUESTION, method=method, llm="fake", collection=NO_COLLECTION, passages=GIVEN, top_k=3)
        assert {p.id for p in result.passages} == IDS  # all of them, whatever top_k says
        assert result.passages[-1].id not in {"doc-0", "doc-1", "doc-3"}  # re-ranked: the off-topic ones last


def test_diva_prunes_within_the_given_passages():
    result = agent.run(QUESTION, method="diva", llm="fake", collection=NO_COLLECTION, passages=GIVEN, top_k=3)
    kept = [p.id for p in result.extra["kept"]]
    assert len(kept) == 3 and set(kept) <= IDS


def test_texts_alone_get_ids_in_order_and_sunar_finds_neighbours_among_them():
    result = agent.run(QUESTION, method="sunar", llm="fake", collection=NO_COLLECTION, passages=TEXTS)
    assert {p.id for p in result.passages} <= {f"p{i}" for i in range(1, len(TEXTS) + 1)}
    assert result.extra["hops"]


@pytest.mark.parametrize("method", ["sunar", "rag"])
def test_the_demo_model_answers_from_untitled_passages(method):
    options = {"answer_style": "short"} if method == "rag" else {}
    result = agent.run(QUESTION, method=method, llm="fake", collection=NO_COLLECTION, passages=TEXTS[:3], **options)
    assert result.answer != "unknown" and result.answer in " ".join(TEXTS[:3])
    assert result.answer in result.extra["reasoning"]


@pytest.mark.parametrize(
    ("passages", "message"),
    [
        ([], "at least one passage"),
        ("just a string", "at least one passage"),
        ([{"title": "no text"}], "passage 1 is neither a text"),
        (["fine", "   "], "passage 2 has no text"),
        (["x" * 20_001], "passage 1 has 20,001 characters; the limit is 20,000"),
        ([f"passage {i}" for i in range(101)], "101 passages given; the limit is 100"),
        ([{"id": "a", "text": "one"}, {"id": "a", "text": "two"}], "passage id 'a' is given twice"),
    ],
)
def test_bad_passages_are_one_line_errors(passages, message):
    with pytest.raises(InvalidPassagesError) as caught:
        agent.run(QUESTION, method="rag", llm="fake", collection=NO_COLLECTION, passages=passages)
    assert message in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_closed_book_refuses_passages():
    with pytest.raises(ConfigError, match="reads no passages"):
        agent.run(QUESTION, method="closed_book", llm="fake", passages=TEXTS)


def test_the_same_passages_are_embedded_once_per_process():
    from agent.retrieval.passage_set import given_passages, passage_set

    passages = given_passages(GIVEN)
    assert passage_set(passages) is passage_set(given_passages(GIVEN))
