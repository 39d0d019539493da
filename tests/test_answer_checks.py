"""The answer step's checks against good text: ASQA dev's human long answers pass them untouched.

Each of the 400 long answers (200 questions, 1–2 answers each) is checked as if a model had written it for that
question: its readings are the question's gold pairs (every short answer an alias), its passages the annotators'
evidence in the corpus, and its worked examples rag's casebook for the question. What a check flags here it would
flag in a capable model's answer too."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from agent.steps.casebook import casebook
from agent.steps.checks import CHECKS, Grounds, Reading, failures, foreign_figures
from agent.steps.fewshot import Shots
from tests.conftest import SHARED_DATA

ASQA = SHARED_DATA / "asqa"
pytestmark = pytest.mark.skipif(not (ASQA / "dev.jsonl").is_file(), reason="needs ../shared/data/asqa")


def _own_passages() -> dict[str, list[str]]:
    """The annotators' evidence passages of each dev question (ids ``asqa-knowledge:<question id>:n``)."""
    own = defaultdict(list)
    with (ASQA / "corpus.jsonl").open() as lines:
        for line in lines:
            passage = json.loads(line)
            if passage["source"] != "dpr-wiki-2018":
                own[passage["id"].split(":")[1]].append(f"{passage['title']} {passage['text']}")
    return own


def test_at_least_98_percent_of_the_human_long_answers_pass_every_check(home):
    rows = [json.loads(line) for line in (ASQA / "dev.jsonl").read_text().splitlines()]
    own = _own_passages()
    answers, failed, fired = 0, 0, Counter()
    for row in rows:
        readings = tuple(Reading(p["question"], tuple(p["short_answers"])) for p in row["qa_pairs"])
        book = casebook(row["question"], Shots(k=5, selection="nearest", budget=2000), "pool")
        read = [row["question"], *(f"{r.question} {' '.join(r.answers)}" for r in readings), *own[row["id"]]]
        grounds = Grounds(readings=readings, foreign_figures=foreign_figures(book, read))
        for text in row["long_answers"]:
            found = failures(text, grounds, CHECKS)
            answers, failed = answers + 1, failed + bool(found)
            fired.update(found)
    assert answers == 400
    assert failed <= 0.02 * answers, f"{failed} of {answers} human answers fail a check: {dict(fired)}"
    assert fired["narrates"] == fired["states_nothing"] == 0
