"""The retrieval pipeline: dense, BM25 and hybrid first stages, re-ranking, and the agent.search / retrieve surfaces."""

import json
import subprocess
import sys

import pytest

import agent
from agent.errors import ConfigError
from agent.retrieval.collections import open_store
from agent.retrieval.pipeline import MemoScorer, RetrievalOptions, first_stage, fuse, rank_pool, search
from agent.schemas import Passage
from tests.conftest import PASSAGES

PREMIERE = "When was the world premiere of the Harry Potter film?"


def _p(pid: str) -> Passage:
    return Passage(id=pid, text=pid)


def test_reciprocal_rank_fusion_adds_one_over_sixty_plus_rank():
    fused = fuse([_p("a"), _p("b"), _p("c")], [_p("c"), _p("a")])
    assert [p.id for p in fused] == ["a", "c", "b"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62, abs=1e-6)
    assert fused[1].score == pytest.approx(1 / 63 + 1 / 61, abs=1e-6)
    assert fused[2].score == pytest.approx(1 / 62, abs=1e-6)


@pytest.mark.parametrize("kind", ["dense", "bm25", "hybrid"])
def test_every_first_stage_finds_the_passages_about_the_question(collection, kind):
    hits = first_stage(open_store(collection), [PREMIERE, "stratovolcano Sicily"], 3, kind)
    assert hits[0][0].id in {"hp-premiere", "hp-us"} and hits[1][0].id == "volcano"
    assert len(hits[0]) <= 3


@pytest.mark.parametrize("reranker", ["cross-encoder", "colbert"])
def test_the_reranker_orders_the_first_stages_top_depth(collection, reranker):
    options = RetrievalOptions(first_stage="bm25", reranker=reranker, depth=6)
    ranked = search(open_store(collection), PREMIERE, 3, options)
    assert ranked[0].id == "hp-premiere" and len(ranked) == 3
    assert [p.score for p in ranked] == sorted((p.score for p in ranked), reverse=True)


def test_rank_pool_reranks_only_the_pools_closest_passages(collection):
    store = open_store(collection)
    pool = store.passages([p["id"] for p in PASSAGES])
    calls: list[int] = []

    class Counting:
        def score(self, query, passages):
            calls.append(len(passages))
            return [float(p.id == "hp-us") for p in passages]

    top = rank_pool(store, PREMIERE, pool, 2, RetrievalOptions(depth=3, fusion=False), Counting())
    assert calls == [3] and top[0].id == "hp-us"  # the scorer alone decides the order among the 3 closest
    assert [p.id for p in rank_pool(store, PREMIERE, pool, 2, RetrievalOptions(reranker="none"))][0] in {
        "hp-premiere",
        "hp-us",
    }


def test_fusion_ranks_by_both_the_first_stage_and_the_reranker(collection):
    store = open_store(collection)
    pool = store.passages([p["id"] for p in PASSAGES])
    dense = [p.id for p in rank_pool(store, PREMIERE, pool, 3, RetrievalOptions(reranker="none"))]

    class Contrary:  # the re-ranker reverses the first stage's order
        def score(self, query, passages):
            return [float(i) for i in range(len(passages))]

    alone = rank_pool(store, PREMIERE, pool, 3, RetrievalOptions(depth=3, fusion=False), Contrary())
    fused = rank_pool(store, PREMIERE, pool, 3, RetrievalOptions(depth=3), Contrary())
    assert [p.id for p in alone] == dense[::-1]
    # ranks (first stage, re-ranker): (1, 3) and (3, 1) tie above (2, 2); the tie goes to the first stage's order
    assert [p.id for p in fused] == [dense[0], dense[2], dense[1]]
    assert [p.score for p in fused] == pytest.approx([1 / 61 + 1 / 63, 1 / 61 + 1 / 63, 2 / 62], abs=1e-6)


def test_memo_scorer_scores_each_pair_once():
    seen: list[str] = []

    class Recording:
        def score(self, query, passages):
            seen.extend(p.id for p in passages)
            return [1.0] * len(passages)

    memo = MemoScorer(Recording())
    memo.score("q", [_p("a"), _p("b")])
    assert memo.score("q", [_p("b"), _p("c"), _p("c")]) == [1.0, 1.0, 1.0]
    assert seen == ["a", "b", "c"]


def test_agent_search_runs_the_default_pipeline(collection):
    passages = agent.search(PREMIERE, k=2, collection=collection)
    assert {p.id for p in passages} == {"hp-premiere", "hp-us"}  # fused: each model puts one of them first
    assert [p.id for p in agent.search(PREMIERE, k=2, collection=collection, rerank_fusion=False)][0] == "hp-premiere"
    assert [p.id for p in agent.search(PREMIERE, k=1, collection=collection, reranker="none", first_stage="bm25")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"k": 0}, "k must be"), ({"rerankr": "none"}, "search has no option rerankr"), ({"reranker": "x"}, "reranker")],
)
def test_agent_search_rejects_bad_options_clearly(collection, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        agent.search(PREMIERE, collection=collection, **kwargs)


def test_cli_retrieve_prints_passages_as_json(home, collection):
    args = [sys.executable, "-m", "agent", "retrieve", PREMIERE, "-c", collection, "-k", "2", "--json", "--no-fusion"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    passages = json.loads(done.stdout)
    assert len(passages) == 2 and passages[0]["id"] == "hp-premiere" and "score" in passages[0]
