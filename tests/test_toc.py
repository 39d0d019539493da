"""Tree of Clarifications with a scripted LLM over a real Chroma collection: BFS, termination, pruning, answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agent
from agent.registry import METHODS

AQ = "Who won the last olympic men's hockey?"

PASSAGES = [
    ("hockey-2018", "Ice hockey at the 2018 Winter Olympics", "Olympic Athletes from Russia won the men's ice hockey tournament at the 2018 Winter Olympics in Pyeongchang."),
    ("hockey-2014", "Ice hockey at the 2014 Winter Olympics", "Canada won the men's ice hockey tournament at the 2014 Winter Olympics in Sochi, beating Sweden in the final."),
    ("hockey-2010", "Ice hockey at the 2010 Winter Olympics", "Canada won the men's ice hockey tournament at the 2010 Winter Olympics in Vancouver after overtime."),
    ("hockey-2006", "Ice hockey at the 2006 Winter Olympics", "The Swedish team won the men's ice hockey tournament at the 2006 Winter Olympics in Turin."),
    ("hockey-2002", "Ice hockey at the 2002 Winter Olympics", "Canada won the men's ice hockey gold medal at the 2002 Winter Olympics in Salt Lake City."),
    ("hockey-1998", "Ice hockey at the 1998 Winter Olympics", "The Czech Republic won the first Olympic hockey tournament open to NHL players, in Nagano."),
    ("hockey-1980", "Miracle on Ice", "The United States beat the Soviet Union at Lake Placid in 1980 and went on to win the gold medal."),
    ("hockey-women-2014", "Women's ice hockey at the 2014 Winter Olympics", "Canada won the women's ice hockey tournament at the 2014 Winter Olympics."),
    ("hockey-women-2018", "Women's ice hockey at the 2018 Winter Olympics", "The United States won the women's ice hockey tournament at the 2018 Winter Olympics."),
    ("para-hockey-2018", "Para ice hockey at the 2018 Winter Paralympics", "The United States won the para ice hockey tournament at the 2018 Winter Paralympics."),
    ("volcano", "Mount Etna", "Mount Etna is an active stratovolcano on the east coast of Sicily, Italy."),
    ("bread", "Sourdough", "Sourdough is bread made by the fermentation of dough using lactobacilli and yeast."),
    ("cricket", "Cricket World Cup", "The Cricket World Cup is the international championship of One Day International cricket."),
    ("chess", "World Chess Championship", "The World Chess Championship decides the world champion in chess."),
    ("river", "Danube", "The Danube is the second-longest river in Europe, after the Volga."),
    ("piano", "Piano", "The piano is a keyboard instrument that produces sound when its keys are pressed."),
]  # fmt: skip


@pytest.fixture(scope="module")
def hockey_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("toc") / "hockey.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in PASSAGES))
    return path


@pytest.fixture(scope="module")
def hockey(home, hockey_corpus) -> str:
    from agent.retrieval.ingest import ingest

    ingest(hockey_corpus, "toc-hockey", progress=False)
    return "toc-hockey"


def question_of(call) -> str:
    return re.search(r"^Question: (.+)$", call.user, re.MULTILINE).group(1)


def pairs(*items: tuple[str, str]) -> str:
    return "\n".join(f"DQ {i}: {q}\nDA {i}: {a}" for i, (q, a) in enumerate(items, 1))


def by_question(replies: dict[str, str], default: str = ""):
    """An I_e reply chosen by the question the prompt asks to clarify."""
    return lambda call: replies.get(question_of(call), default)


NO_COMPLETION = ["narrates", "states_nothing", "borrows"]
PAPER_TREE = {"max_expansions": 15, "max_restarts": 3, "answer_checks": NO_COMPLETION}
"""The tree as the paper and the official code grow it (the defaults are smaller: notes/2026-11-toc-asqa.md), and the answer
step without the ``incomplete`` check, which the tests of its own below cover."""


def run(name: str, collection: str, **options):
    return agent.run(AQ, method="toc", llm=name, collection=collection, retries=0, **{**PAPER_TREE, **options})


GENERATE = "Answer: It depends on the year; Canada won in 2014 and Russia in 2018, among others."
DQ = {
    "A": ("Who won the men's hockey tournament at the 2014 Winter Olympics?", "Canada"),
    "B": ("Who won the men's hockey tournament at the 2006 Winter Olympics?", "Sweden"),
    "C": ("Who won the men's hockey tournament at the 2018 Winter Olympics?", "Olympic Athletes from Russia"),
    "D": ("Who won the men's hockey tournament at the 1998 Winter Olympics?", "Czech Republic"),
}


def test_a_tree_that_reaches_ten_nodes_stops_there_after_the_expansions_sequential_bfs_makes(hockey, scripted):
    replies = {AQ: pairs(*DQ.values())}
    for key, (question, _) in DQ.items():
        replies[question] = pairs(*((f"{question[:-1]}, reading {key}{j}?", f"answer {key}{j}") for j in (1, 2, 3)))
    name, model = scripted({"rag_extract": by_question(replies), "rag_generate": GENERATE})
    result = run(name, hockey)
    tree = result.extra["tree"]
    assert result.extra["stop_reason"] == "10 nodes"
    assert [n.parent for n in tree] == [None, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [n.id for n in tree] == list(range(11)) and {n.depth for n in tree[5:]} == {2}
    # four children from the root: the next round expands the two that should bring six more, not C and D
    assert result.extra["expansions"] == 3 and model.prompts().count("rag_extract") == 3
    assert len(result.disambiguations) == 10
    generate_call = next(c for c in model.calls if c.prompt == "rag_generate")
    assert "DQ 10: " in generate_call.user and "DQ 11: " not in generate_call.user


def two_readings(call) -> str:
    question = question_of(call)
    return pairs(*((f"{question[:-1]} (reading {j})?", f"answer {j}") for j in (1, 2)))


def test_by_default_the_tree_makes_at_most_four_expansions_and_never_restarts(hockey, scripted):
    name, _ = scripted({"rag_extract": two_readings, "rag_generate": GENERATE})
    result = agent.run(
        AQ,
        method="toc",
        llm=name,
        collection=hockey,
        retries=0,
        max_nodes=50,
        deduplicate=False,
        answer_checks=NO_COMPLETION,
    )
    assert result.extra["stop_reason"] == "4 expansions" and result.extra["expansions"] == 4
    assert [n.depth for n in result.extra["tree"] if n.expanded] == [0, 1, 1, 2]  # BFS order
    replies = {AQ: pairs(DQ["A"], DQ["B"]), DQ["A"][0]: pairs(DQ["B"]), DQ["B"][0]: pairs(DQ["A"])}
    name, model = scripted({"rag_extract": by_question(replies), "rag_generate": GENERATE})
    result = agent.run(AQ, method="toc", llm=name, collection=hockey, retries=0, answer_checks=NO_COMPLETION)
    assert result.extra["stop_reason"] == "0 restarts"  # the children only repeat their siblings: the queue is spent
    assert result.extra["expansions"] == 3 and model.prompts().count("rag_extract") == 3


def test_by_default_the_readings_an_answer_leaves_out_are_asked_for_again(hockey, scripted):
    both = "Answer: Canada won in 2014, and Olympic Athletes from Russia won the 2018 tournament."
    script = {"rag_extract": by_question({AQ: pairs(DQ["A"], DQ["C"])}), "rag_generate": "Answer: Canada won in 2014.",
              "answer_revise": both}  # fmt: skip
    name, model = scripted(script)
    nodes: list[str] = []
    result = agent.run(AQ, method="toc", llm=name, collection=hockey, retries=0, citations=False,
                       on_node=lambda node, update, seconds: nodes.append(node))  # fmt: skip
    assert nodes[-5:] == ["generate", "check_answer", "revise_answer", "check_answer", "finish_answer"]
    assert f"It leaves out these readings: {DQ['C'][0]} {DQ['C'][1]}" in model.calls[-1].user
    assert result.answer == both.removeprefix("Answer: ")


def test_a_model_that_finds_no_new_dqs_stops_after_three_failed_expansions(hockey, scripted):
    name, model = scripted({"rag_extract": "I cannot tell.", "rag_generate": GENERATE})
    result = run(name, hockey)
    root = result.extra["tree"][0]
    assert result.extra["stop_reason"] == "3 failed expansions in a row"
    assert result.extra["tree"] == [root] and result.disambiguations == []
    assert root.expanded == 3 and model.prompts() == ["rag_extract"] * 3 + ["rag_generate"]
    assert len(set(root.read_ids)) == 15  # each retry of the root reads five passages it has not read yet


def test_depth_never_exceeds_three_and_a_spent_frontier_restarts_from_the_root(hockey, scripted):
    name, _ = scripted({"rag_extract": two_readings, "rag_generate": GENERATE})
    result = run(name, hockey, max_nodes=50, deduplicate=False)
    tree = result.extra["tree"]
    assert max(n.depth for n in tree) == 3 and all(n.expanded == 0 for n in tree if n.depth == 3)
    assert tree[0].expanded == 2  # depth 3 was reached after 7 expansions: the root and valid nodes went again
    assert len(set(tree[0].read_ids)) == 10  # ... on passages the root had not read
    assert result.extra["stop_reason"] == "15 expansions" and result.extra["expansions"] == 15


def test_near_duplicates_fill_the_tree_as_the_official_code_counts_unless_count_duplicates_is_off(hockey, scripted):
    same_three = pairs(DQ["A"], DQ["B"], DQ["C"])  # every expansion finds the same readings again
    name, model = scripted({"rag_extract": same_three, "rag_generate": GENERATE})
    result = run(name, hockey)
    assert result.extra["stop_reason"] == "10 nodes" and result.extra["expansions"] == 4
    assert [d.answer for d in result.disambiguations] == ["Canada", "Sweden", "Olympic Athletes from Russia"]
    name, _ = scripted({"rag_extract": same_three, "rag_generate": GENERATE})
    assert run(name, hockey, count_duplicates=False).extra["stop_reason"] == "3 failed expansions in a row"


def test_answer_pairs_caps_the_pairs_the_answer_reads(hockey, scripted):
    replies = {AQ: pairs(*DQ.values())}
    name, model = scripted({"rag_extract": by_question(replies), "rag_generate": GENERATE})
    result = run(name, hockey, answer_pairs=2)
    generate_call = next(c for c in model.calls if c.prompt == "rag_generate")
    assert "DQ 2: " in generate_call.user and "DQ 3: " not in generate_call.user
    assert [d.answer for d in result.disambiguations] == ["Canada", "Sweden"]


def test_near_duplicate_children_are_dropped_by_default_without_an_llm_call(hockey, scripted):
    repeat = ("Who won the men's hockey tournament at the 2014 Winter Olympics?", "Canada")
    replies = {AQ: pairs(DQ["A"], DQ["B"]), DQ["A"][0]: pairs(repeat), DQ["B"][0]: pairs(DQ["C"])}
    name, model = scripted({"rag_extract": by_question(replies), "rag_generate": GENERATE})
    result = run(name, hockey)
    duplicates = [n for n in result.extra["tree"] if n.pruned_by == "duplicate"]
    assert (duplicates[0].question, duplicates[0].parent) == (repeat[0], 1) and duplicates[0].pruned
    assert {n.question for n in duplicates} <= {DQ["A"][0], DQ["B"][0], DQ["C"][0]}  # restarts repeat them too
    assert "toc_verify" not in model.prompts() and [d.question for d in result.disambiguations].count(repeat[0]) == 1


def test_expansions_of_one_level_run_concurrently(hockey, scripted):
    children = {q: pairs(*((f"{q[:-1]}, part {j}?", f"part {j}") for j in (1, 2, 3))) for q, _ in list(DQ.values())[:3]}
    replies = {AQ: pairs(*list(DQ.values())[:3]), **children}
    name, model = scripted({"rag_extract": by_question(replies), "rag_generate": GENERATE}, latency=0.3)
    nodes: list[str] = []
    run(name, hockey, reranker="none", deduplicate=False, on_node=lambda node, update, seconds: nodes.append(node))
    level_one = [c for c in model.calls if c.prompt == "rag_extract" and question_of(c) in children]
    assert len(level_one) == 3
    assert max(c.started for c in level_one) < min(c.ended for c in level_one)  # all three were in flight together
    assert nodes[:3] == ["retrieve", "expand/rerank", "expand/clarify"] and nodes[-3:] == [
        "generate", "check_answer", "finish_answer"
    ]  # fmt: skip
    assert nodes.count("grow") == 2


def verify_by_answer(rejected: set[str]):
    return lambda call: (
        "False" if re.search(r"^Proposed Answer: (.+)$", call.user, re.MULTILINE).group(1) in rejected else "True"
    )


def test_pruned_nodes_are_excluded_from_the_answer(hockey, scripted):
    replies = {AQ: pairs(*DQ.values())}
    name, model = scripted(
        {
            "rag_extract": by_question(replies),
            "toc_verify": verify_by_answer({"Czech Republic"}),
            "rag_generate": GENERATE,
        }
    )
    result = run(name, hockey, prune=True)
    tree = result.extra["tree"]
    assert [(n.answer, n.pruned, n.pruned_by) for n in tree[1:]] == [
        ("Canada", False, ""),
        ("Sweden", False, ""),
        ("Olympic Athletes from Russia", False, ""),
        ("Czech Republic", True, "verification"),
    ]
    assert tree[4].expanded == 0  # a pruned node is not expanded
    assert [d.answer for d in result.disambiguations] == ["Canada", "Sweden", "Olympic Athletes from Russia"]
    assert "Czech Republic" not in next(c for c in model.calls if c.prompt == "rag_generate").user
    assert result.usage.by_node["prune"].calls == 4


def test_undo_pruning_restores_the_nodes_closest_to_the_root_when_too_few_survive(hockey, scripted):
    replies = {AQ: pairs(DQ["A"], DQ["B"], DQ["C"])}  # the root's re-expansion repeats them: duplicates
    name, model = scripted(
        {
            "rag_extract": by_question(replies),
            "toc_verify": verify_by_answer({"Canada", "Sweden"}),
            "rag_generate": GENERATE,
        }
    )
    result = run(name, hockey, prune=True)
    tree = result.extra["tree"]
    assert result.extra["stop_reason"] == "3 failed expansions in a row"
    assert (
        [(n.id, n.parent, n.pruned, n.pruned_by) for n in tree[1:]]
        == [
            (1, 0, False, "verification"),  # restored: closest to the root
            (2, 0, True, "verification"),
            (3, 0, False, ""),
            (4, 0, True, "duplicate"),
            (5, 0, True, "duplicate"),
        ]
    )  # the re-expansion reads passages without "Sweden", which the casebook states: not a reading (rac.unborrowed_pairs)
    assert [d.answer for d in result.disambiguations] == ["Canada", "Olympic Athletes from Russia"]
    assert result.extra["restored"] == 1
    assert model.prompts().count("toc_verify") == 3  # duplicates are not verified again


def test_restoring_is_off_when_min_nodes_is_zero(hockey, scripted):
    replies = {AQ: pairs(DQ["A"], DQ["B"])}
    name, _ = scripted({"rag_extract": by_question(replies), "toc_verify": "False", "rag_generate": GENERATE})
    result = run(name, hockey, prune=True, min_nodes=0)
    assert result.disambiguations == [] and all(n.pruned for n in result.extra["tree"][1:])
    assert result.extra["restored"] == 0


def test_the_verifier_sees_the_root_question_the_answer_and_the_best_passage_holding_it(hockey, scripted):
    dq = ("Who won the men's hockey tournament at the Vancouver Winter Olympics?", "Canada")
    name, model = scripted(
        {"rag_extract": by_question({AQ: pairs(dq)}), "toc_verify": "True", "rag_generate": GENERATE}
    )
    run(name, hockey, prune=True)
    verify = next(c for c in model.calls if c.prompt == "toc_verify")
    assert f"Question: {AQ}" in verify.user and "Proposed Answer: Canada" in verify.user
    assert "in Vancouver after overtime" in verify.user  # of four passages naming Canada, the one closest to the DQ
    assert dq[0] not in verify.user


def test_answer_generation_prefers_passages_that_contain_the_answers(hockey, scripted):
    replies = {AQ: pairs(DQ["D"], ("Which team lost to the United States at Lake Placid in 1980?", "Soviet Union"))}
    answer = "Answer: The Czech Republic won in 1998, and the Soviet Union lost to the United States in 1980."
    name, _ = scripted({"rag_extract": by_question(replies), "rag_generate": answer})
    result = run(name, hockey, answer_passages=3)
    assert [p.id for p in result.passages][:2] == ["hockey-1998", "hockey-1980"]
    assert result.passages[2].id not in {"hockey-1998", "hockey-1980"}


def test_each_expansion_reranks_the_pool_for_its_own_question(hockey, scripted):
    dq = ("Who won the para ice hockey tournament at the 2018 Winter Paralympics?", "United States")
    name, _ = scripted({"rag_extract": by_question({AQ: pairs(dq)}), "rag_generate": GENERATE})
    result = run(name, hockey, max_failures=1)
    root, child = result.extra["tree"][:2]
    assert child.read_ids[0] == "para-hockey-2018" != root.read_ids[0]
    assert len(child.read_ids) == 5 and set(child.read_ids) <= {p[0] for p in PASSAGES}


def test_toc_is_registered_and_exports_the_shared_contract_and_its_tree():
    from graphs.toc import graph

    assert "toc" in METHODS
    langgraph = json.loads((Path(__file__).resolve().parents[1] / "langgraph.json").read_text())
    assert langgraph["graphs"]["toc"]["path"] == "./graphs/toc.py:graph"
    assert set(graph.get_input_jsonschema()["properties"]) == {"question", "messages"}  # agent.chat
    assert set(graph.get_output_jsonschema()["properties"]) == {
        "answer", "disambiguations", "passages", "retrieved", "usage", "tree", "stop_reason", "expansions", "restored",
        "answer_review", "messages",
    }  # fmt: skip
    assert {"rerank", "clarify", "prune"} <= set(graph.get_graph(xray=True).nodes) | {
        n.split(":")[-1] for n in graph.get_graph(xray=True).nodes
    }


def test_ask_method_toc_prints_the_tree(served_home, hockey_corpus):
    env = {**os.environ, "AMBIGQA_HOME": str(served_home), "PYTHONPATH": os.getcwd(), "COLUMNS": "200"}
    ingest = [sys.executable, "-m", "agent", "ingest", str(hockey_corpus), "-c", "toc-hockey"]
    subprocess.run(ingest, env=env, check=True, capture_output=True, timeout=300)  # the subprocesses' own store
    proc = subprocess.run(
        [sys.executable, "-m", "agent", "ask", AQ, "--method", "toc", "--llm", "fake", "-c", "toc-hockey", "--quiet"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Tree of clarifications" in proc.stdout
    assert f"#0 {AQ}" in proc.stdout and "#1 " in proc.stdout
