"""The answer checks on what the embedded model really writes: 157 drafts (and revisions) of qwen2.5-coder-1.5b Q4_K_M
for ASQA dev rows 0-29 under rag, DIVA, ToC and VerDICt, recorded with what each was checked against and which checks
failed it (notes/2026-12-answer-checks.md). A change to a check that flips a verdict on the model's own text shows
here, by question."""

import json
from pathlib import Path

import pytest

from agent.steps.checks import CHECKS, Grounds, Reading, failures

RECORDED = Path(__file__).parent / "recorded" / "local_model_drafts.jsonl"
DRAFTS = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]


def test_the_recording_holds_every_method_and_checks_that_pass_and_fail():
    assert {d["method"] for d in DRAFTS} == {"rag", "diva", "toc", "verdict"}
    failed = {check for d in DRAFTS for check in d["failed"]}
    assert {"narrates", "incomplete", "borrows"} <= failed <= set(CHECKS)
    assert sum(not d["failed"] for d in DRAFTS) > len(DRAFTS) / 2  # most drafts pass: the checks are not a sieve


@pytest.mark.parametrize("draft", DRAFTS, ids=lambda d: f"{d['method']}-{d['question'][:40]}-{d['draft']}")
def test_each_recorded_draft_gets_the_verdict_it_got_in_the_run(draft):
    grounds = Grounds(
        readings=tuple(Reading(q, (a,)) for q, a in draft["readings"]),
        foreign_figures=frozenset(draft["foreign_figures"]),
    )
    assert sorted(failures(draft["text"], grounds, draft["checks"])) == draft["failed"]
