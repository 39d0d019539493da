"""RAMDocs in ``ambigqa eval``: its own format, each question answered over its own documents (no pooled collection),
EM on what the answer asserts and on its whole text, gold recall, misinformation stated, rejected-passage precision and
recall. Real embeddings and re-ranker; a scripted model at the LLM boundary."""

import json
import re

import pytest

from agent.eval import metrics as m
from agent.eval.datasets import load_examples
from agent.eval.harness import EvalConfig, evaluate
from agent.text import spelled_dates


def _row(id_: str, question: str, documents: list[tuple[str, str, str]], golds: list[str], wrongs: list[str]) -> dict:
    """A record in RAMDocs' own format; ``documents`` as (type, answer, text)."""
    docs = [{"text": text, "type": kind, "answer": answer} for kind, answer, text in documents]
    return {"id": id_, "question": question, "documents": docs, "disambig_entity": [], "gold_answers": golds,
            "wrong_answers": wrongs}  # fmt: skip


ROWS = [
    _row("r1", "In which year was Michael Jordan born?", [
        ("correct", "1963", "Michael Jeffrey Jordan, the basketball player, was born in 1963."),
        ("correct", "1956", "Michael Irwin Jordan, the American scientist, was born in 1956."),
        ("misinfo", "1998", "Michael Jeffrey Jordan, the basketball player, was born in 1998."),
        ("noise", "unknown", "Jordan won a college championship with North Carolina."),
    ], ["1963", "1956"], ["1998"]),
    _row("r2", "What sport is Bobby Carpenter associated with?", [
        ("correct", "American football", "Bobby Carpenter played American football as a linebacker."),
        ("noise", "unknown", "Bananas are yellow when ripe."),
    ], ["American football"], []),
]  # fmt: skip


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "ramdocs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def test_the_ramdocs_format_loads_as_it_is(dataset):
    examples = load_examples(dataset)
    assert [e.kind for e in examples] == ["ramdocs", "ramdocs"]
    assert examples[0].given_passages()[2] == {"id": "r1-d2", "text": ROWS[0]["documents"][2]["text"]}


def test_an_answer_that_names_a_rejected_answer_does_not_state_it():
    answer = "He was born in 1963; the scientist in 1956. One document claims 1998, which is wrong."
    stated = m.asserted_text(answer)
    assert "1998" not in stated and m.conflict_em(stated, ["1963", "1956"], ["1998"]) == 1.0
    assert m.conflict_em(answer, ["1963", "1956"], ["1998"]) == 0.0  # the whole text names it
    assert m.gold_recall("Born in 1963.", ["1963", "1956"]) == 0.5
    assert m.rejection_scores({"a", "b"}, {"b", "c"}) == {"reject_precision": 0.5, "reject_recall": 0.5}
    assert m.rejection_scores(set(), set()) == {}


def test_a_wrong_answer_that_is_also_gold_or_part_of_a_gold_one_is_not_misinformation():
    # RAMDocs dev lists valid answers among the wrong ones (ramdocs-203: 1860 both), and parts of gold ones (ramdocs-116)
    assert m.real_wrongs(["1858", "1860"], ["1860"]) == []
    assert m.real_wrongs(["Hindi"], ["Marathi", "hindi"]) == ["Marathi"]
    assert m.conflict_em("Fought in 1858 and 1860.", ["1858", "1860"], ["1860"]) == 1.0
    assert m.states_wrong("He played American football.", ["Baseball", "American football"], ["Football"]) == 0.0
    assert m.states_wrong("He played football and American football.", ["American football"], ["Football"]) == 1.0
    assert m.states_wrong("About 42,800 people.", ["428"], ["42,800"]) == 1.0  # a wrong answer that holds a gold one
    assert m.states_wrong("He played basketball.", ["American football"], ["Basketball", "Football"]) == 1.0


def test_a_date_counts_however_the_answer_words_it():
    # ramdocs-258: "Edmund Ralph Brockman was born on October 22, 1828." states the gold "22 October 1828"
    assert spelled_dates("born on October 22, 1828, in Kent") == "born on 22 October 1828, in Kent"
    assert spelled_dates("the 3rd of Sept. 1750 and 2000-07-04") == "the 3 September 1750 and 4 July 2000"
    assert spelled_dates("in Oct. 1828 and on 22 October") == "in October 1828 and on 22 October"
    assert m.gold_recall("He was born on October 22, 1828.", ["22 October 1828", "28 April 1882"]) == 0.5
    assert m.conflict_em("Released on 4 July 2000.", ["July 4, 2000"], ["2009"]) == 1.0
    assert m.states_wrong("Born on July 15, 1835.", ["22 October 1828"], ["15 July 1835"]) == 1.0
    assert m.real_wrongs(["4 July 2000"], ["July 4, 2000", "2001"]) == ["2001"]
    assert m.gold_recall("Born on 22 October 1829.", ["October 22, 1828"]) == 0.0


def _agent(call) -> str:
    document = call.user.split("document:", 1)[-1]
    year = re.search(r"\b(1\d{3})\b", document)
    sport = "American football" if "football" in document else None
    answer = year.group(1) if year else sport or "unknown"
    return f"Answer: {answer}. Explanation: my document says {answer}."


def _aggregate(call) -> str:
    said = re.findall(r"^Agent \d+: Answer: (.+?)\.", call.user, re.MULTILINE)
    kept = [a for a in dict.fromkeys(said) if a not in ("unknown", "1998")]
    return "All Correct Answers: " + json.dumps(kept) + ". Explanation: agent 3's year is wrong."


def test_each_question_is_answered_over_its_own_documents_and_scored(dataset, scripted, tmp_path):
    name, model = scripted(
        {"madam_agent": _agent, "madam_debate": _agent, "madam_aggregate": _aggregate,
         "rag_extract": "DQ 1: When was he born?\nDA 1: 1963", "rag_generate": "Answer: He was born in 1963.",
         "answer_revise": "Answer: He was born in 1963.",
         "closed_book": "Final Answer: He was probably born in the 1960s."},
    )  # fmt: skip
    out = tmp_path / "out"
    summary = evaluate(
        EvalConfig(dataset=dataset, methods=["closed_book", "rag", "madam"], out=out, llm=name, collection="nothing"),
        progress=False,
        log=lambda _: None,
    )
    rows = {(r["method"], r["id"]): r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert all("error" not in r for r in rows.values())
    for (method, question), row in rows.items():  # no pooled collection: every run read only its own documents
        assert all(i.startswith(f"{question}-d") for i in row["passage_ids"]), (method, row["passage_ids"])
    assert rows[("closed_book", "r1")]["passage_ids"] == []
    madam = rows[("madam", "r1")]["metrics"]
    assert madam["em"] == 1.0 and madam["misinfo_stated"] == 0.0 and madam["gold_recall"] == 1.0
    assert madam["reject_precision"] == 1.0 and madam["reject_recall"] == 1.0  # misinfo and noise rejected
    records = rows[("madam", "r1")]["records"]  # what the metrics read, kept so the row can be traced and re-scored
    assert records["answers"] == [
        {"answer": "1963", "passage_ids": ["r1-d0"]},
        {"answer": "1956", "passage_ids": ["r1-d1"]},
    ]
    assert set(records["rejected_ids"]) == {"r1-d2", "r1-d3"} and rows[("rag", "r1")]["records"] == {}
    rag = rows[("rag", "r1")]["metrics"]
    assert rag["em"] == 0.0 and rag["gold_recall"] == 0.5 and "reject_recall" not in rag
    assert rag["narrates"] == 0.0 and rows[("closed_book", "r1")]["metrics"]["narrates"] == 0.0
    assert "misinfo_stated" not in rows[("madam", "r2")]["metrics"]  # r2 has no wrong answer
    assert summary["madam"]["metrics"]["em"] == 1.0 and summary["madam"]["questions"] == 2
