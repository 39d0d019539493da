"""Demonstrations come only from the few-shot pool, nearest to the question, and fit the prompt's token budget."""

import json
import re
from pathlib import Path

import pytest

import agent
from agent.llm.prompts import estimate_tokens
from agent.steps.fewshot import PoolExample, Shots, fit_examples, load_demos, pool_demos
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "When did the Harry Potter film come out?"


def _normal(question: str) -> str:
    return " ".join(question.lower().strip().rstrip("?").split())


def _scored_questions() -> set[str]:
    """Every question a benchmark scores: ASQA dev questions and their gold interpretations, HotpotQA dev questions."""
    asqa = [json.loads(line) for line in (SHARED_DATA / "asqa" / "dev.jsonl").read_text().splitlines()]
    hotpot = [json.loads(line) for line in (SHARED_DATA / "hotpotqa" / "dev.jsonl").read_text().splitlines()]
    questions = {r["question"] for r in asqa} | {p["question"] for r in asqa for p in r["qa_pairs"]}
    return {_normal(q) for q in questions | {r["question"] for r in hotpot} if len(q) > 20}


@pytest.mark.skipif(not (SHARED_DATA / "asqa" / "dev.jsonl").is_file(), reason="needs ../shared/data")
def test_no_prompt_or_demonstration_holds_a_scored_dev_question():
    scored = _scored_questions()
    files = [*(ROOT / "prompts").glob("*.txt"), *(ROOT / "data" / "fewshot").glob("*.jsonl")]
    assert len(files) > 15
    for path in files:
        text = " ".join(path.read_text().lower().split())
        assert not [q for q in scored if q in text], path.name


def _gold_paragraphs() -> tuple[set[str], list[str]]:
    """The titles and texts of the passages that support a scored HotpotQA dev question."""
    supporting = {
        i for line in (SHARED_DATA / "hotpotqa" / "dev.jsonl").open() for i in json.loads(line)["supporting_ids"]
    }
    titles, texts = set(), []
    for line in (SHARED_DATA / "hotpotqa" / "corpus.jsonl").open():
        passage = json.loads(line)
        if passage["id"] in supporting:
            titles.add(passage["title"].lower())
            texts.append(" ".join(passage["text"].lower().split()))
    return titles, texts


@pytest.mark.skipif(not (SHARED_DATA / "hotpotqa" / "corpus.jsonl").is_file(), reason="needs ../shared/data")
def test_no_demonstration_is_built_from_a_scored_questions_gold_passages():
    """A paraphrased demonstration keeps its passages' titles, or runs of their words: neither may come from a passage
    that supports a scored question."""
    titles, texts = _gold_paragraphs()
    for path in (ROOT / "prompts").glob("*.txt"):
        text = path.read_text()
        shown = {t.strip().lower() for t in re.findall(r"^\[\d+\]\s*([^|\n]+?)\s*\|", text, re.MULTILINE)}
        assert not shown & titles, (path.name, shown & titles)
        words = " ".join(text.lower().split()).split()
        runs = {" ".join(words[i : i + 8]) for i in range(len(words) - 7)}
        assert not [r for r in runs if any(r in t for t in texts)], path.name


@pytest.mark.skipif(not (SHARED_DATA / "asqa" / "fewshot_pool.jsonl").is_file(), reason="needs ../shared/data")
def test_the_shipped_pool_is_the_shared_few_shot_pool():
    shipped = (ROOT / "data" / "fewshot" / "asqa_pool.jsonl").read_text().splitlines()
    assert shipped == (SHARED_DATA / "asqa" / "fewshot_pool.jsonl").read_text().splitlines()


def test_pool_demonstrations_are_the_nearest_questions_most_similar_last():
    demos = pool_demos("Who wrote the christmas song mary did you know?", Shots(k=3))
    assert len(demos) == 3 and demos[-1].question == "Who wrote the song mary did you know?"
    fixed = pool_demos("anything at all", Shots(k=3, selection="fixed"))
    assert fixed == list(load_demos("asqa_pool", PoolExample)[:3])


def test_fit_examples_shortens_demo_passages_then_drops_the_least_similar():
    demos = pool_demos(QUESTION, Shots(k=5))

    def render(demo: PoolExample, words: int) -> str:
        return "\n".join(" ".join(p.text.split()[:words]) for p in demo.passages) + f"\n{demo.question}"

    roomy = fit_examples(demos, render, 100_000)
    assert roomy.count("Example\n") == 5
    tight = estimate_tokens(roomy) // 2
    shortened = fit_examples(demos, render, tight)
    assert 0 < estimate_tokens(shortened) <= tight
    assert demos[-1].question in shortened  # the nearest demo is the last one dropped
    assert fit_examples(demos, render, 5) == ""


def test_rag_extract_shows_the_nearest_pool_demos_with_their_evidence_and_gold_pairs(collection, scripted):
    name, model = scripted(
        {
            "rag_extract": "DQ 1: When was the premiere?\nDA 1: 4 November 2001",
            "rag_generate": "Answer: In 2001, twice.",
        }
    )
    agent.run(QUESTION, method="rag", llm=name, collection=collection, reranker="none")
    extract = next(c for c in model.calls if c.prompt == "rag_extract")
    nearest = pool_demos(QUESTION, Shots())
    assert extract.system.count("Example\n") >= 4  # the least similar may not fit the budget
    assert f"Question: {nearest[-1].question}\nEvidence:\n" in extract.system
    assert f"Disambiguations:\nDQ 1: {nearest[-1].pairs[0].question}" in extract.system
    assert nearest[-1].passages[0].title in extract.system
    assert nearest[-1].long_answer[:60] in extract.system  # I_g's part of the demonstration: the human long answer
    assert extract.user.rstrip().endswith(f"Question: {QUESTION}\nDisambiguations:")  # the per-call part comes last


def test_every_prompt_stays_within_the_budget(collection, scripted):
    name, model = scripted({"rag_extract": "DQ 1: When?\nDA 1: 2001", "rag_generate": "Answer: In 2001, twice."})
    budget = 2000
    agent.run(QUESTION, method="rag", llm=name, collection=collection, reranker="none", prompt_tokens=budget)
    for call in model.calls:
        assert sum(estimate_tokens(str(m.content)) for m in call.messages) <= budget
        assert "Example\n" in call.system  # room was left for some demonstrations
    agent.run(QUESTION, method="rag", llm=name, collection=collection, reranker="none", prompt_tokens=1300)
    assert "Example\n" not in model.calls[-1].system  # no room at all: no demonstrations, never an overflow of ours


def test_the_call_room_holds_five_passages_the_instruction_and_the_call():
    """The casebook leaves CALL_ROOM tokens: enough for top-5 passages of ASQA's usual length (where the prompt reads
    them), the prompt's instruction and a generous per-call part."""
    from agent.llm.prompts import load_prompt
    from agent.steps.casebook import CALL_ROOM

    passages = 5 * estimate_tokens("[1] A title | «" + "word " * 110 + "»")
    per_call = {"rag_generate": 300}  # its DQ/DA pairs; elsewhere the question (and verify's reading) alone
    for prompt, reads in [
        ("rag_extract", 1),
        ("rag_extract_short", 1),
        ("rag_generate", 1),
        ("verify", 1),
        ("closed_book", 0),
        ("type_ambiguity", 0),
        ("interpret", 0),
    ]:
        instruction = estimate_tokens(load_prompt(prompt).instruction.template)
        assert reads * passages + instruction + per_call.get(prompt, 100) <= CALL_ROOM, prompt


def test_consecutive_calls_of_a_question_prefill_the_examples_and_passages_once(collection, scripted):
    name, model = scripted(
        {"rag_extract": "DQ 1: When was the premiere?\nDA 1: 4 November 2001", "rag_generate": "Answer: In 2001."}
    )
    result = agent.run(QUESTION, method="rag", llm=name, collection=collection, reranker="none")
    extract, generate = model.calls
    assert extract.system == generate.system  # examples, then passages: one prefix, then each call's own part
    assert generate.system.index("Example\n") < generate.system.index("Passages retrieved for the question:")
    used = result.usage.by_node["rag_generate"]
    assert used.cached_tokens > 0.7 * used.input_tokens  # the simulated prefix cache served the shared part


def test_prompt_files_cap_replies_at_what_they_need(collection, scripted):
    name, model = scripted({"closed_book": "Final Answer: It came out in 2001 and 2002."})
    agent.run(QUESTION, method="closed_book", llm=name)
    assert model.calls[-1].kwargs["max_tokens"] == 200  # prompts/closed_book.txt: one paragraph
    book = model.calls[-1].system  # a lone call: the short examples, question and long answer
    assert book.count("Long answer: ") >= 4 and "Evidence:" not in book and "DQ 1:" not in book
    agent.run(QUESTION, method="closed_book", llm=name, max_tokens=64)
    assert model.calls[-1].kwargs["max_tokens"] == 64  # the run's cap still bounds every call
