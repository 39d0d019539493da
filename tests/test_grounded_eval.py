"""Grounded evaluation (VerDICt §4.3, App. A) with a scripted judge: G-Precision, G-Recall, G-F1, ungrounded recall."""

import re

import pytest

from agent.eval.grounded import evaluate_grounded, gold_evidence, gold_pairs
from agent.llm.scripted import ScriptedChatModel
from agent.schemas import Disambiguation, Passage, QAPair

QUESTION = "When did the Harry Potter film come out?"
PASSAGES = [
    Passage(id="premiere", title="Film", text="The film had its world premiere in London on 4 November 2001."),
    Passage(id="us", title="Film", text="It was released in cinemas in the United States on 16 November 2001."),
    Passage(id="book", title="Novel", text="The novel was first published by Bloomsbury on 26 June 1997."),
]
DIRECTOR = Passage(id="director", title="Film", text="The film was directed by Chris Columbus.")

PREMIERE = ("When did the film premiere?", "4 November 2001")
US = ("When was the film released in the US?", "16 November 2001")
ITALY = ("When was the film released in Italy?", "3 December 2001")
NOVEL = ("When was the novel published?", "26 June 1997")
DIRECTED = ("Who directed the film?", "Chris Columbus")


def judge_verify(call) -> str:
    """Yes when the passage text contains the answer: a judge that checks grounding."""
    answer = re.search(r"^Answer: (.+)$", call.user, re.MULTILINE).group(1)
    return "Decision: Yes" if answer in call.user.split("Passage:", 1)[1] else "Decision: No"


def judge_match(call) -> str:
    """Yes for each reference question that appears verbatim among the generated ones."""
    generated_part, reference_part = call.user.split("Reference disambiguations:")
    generated = set(re.findall(r"^- (.+)$", generated_part, re.MULTILINE))
    references = re.findall(r"^\d+\. (.+)$", reference_part, re.MULTILINE)
    return "\n".join(f"{i}: {'Yes' if q in generated else 'No'}" for i, q in enumerate(references, 1))


def judge_dedup(call) -> str:
    questions = re.findall(r"^\d+\. (.+)$", call.user.split("Distinct questions:")[0], re.MULTILINE)
    return "\n".join(f"{i}. {q}" for i, q in enumerate(dict.fromkeys(questions), 1))


def judge(**overrides) -> ScriptedChatModel:
    script = {"eval_verify": judge_verify, "eval_match": judge_match, "eval_dedup": judge_dedup, **overrides}
    return ScriptedChatModel(script=script)


def predicted(*pairs_and_ids) -> list[Disambiguation]:
    return [Disambiguation(question=q, answer=a, passage_ids=ids) for (q, a), ids in pairs_and_ids]


def gold(*pairs) -> list[QAPair]:
    return [QAPair(question=q, answer=a) for q, a in pairs]


def test_grounded_precision_recall_and_f1_follow_the_paper():
    predictions = predicted((PREMIERE, ["premiere"]), (US, ["us"]), (ITALY, ["us"]), (NOVEL, ["book"]))
    references = gold(PREMIERE, ITALY, US, DIRECTED)
    evidence = [PASSAGES, PASSAGES, PASSAGES, [DIRECTOR]]
    scores = evaluate_grounded(QUESTION, predictions, PASSAGES, references, judge=judge(), evidence=evidence)
    assert scores.verified == [True, True, False, True]  # Italy's date is not in the passage it cites
    assert scores.g_precision == 0.75
    assert scores.gold_grounded == [True, False, True, True]  # no passage grounds the Italian release
    assert scores.gold_recalled == [True, True, True, False]
    assert scores.recall == 0.75  # ungrounded: the unsupported Italy reading still earns credit
    assert scores.grounded_gold_recalled == [True, True, False]  # premiere, US; the director is missed
    assert scores.extra_grounded == 1  # the verified novel reading joins the grounded gold set Q̄
    assert scores.g_recall == 3 / 4  # (2 + 1) / (3 + 1)
    assert scores.g_f1 == pytest.approx(0.75)
    assert scores.predictions == 4 and scores.distinct == 4 and scores.judge_failures == 0
    assert scores.prediction_matched == [True, True, True, False]  # Eq. 14: no human reading asks about the novel
    assert scores.precision == 0.75
    assert scores.counts() == {
        "predictions": 4, "verified": 3, "matched": 3, "gold": 4, "gold_recalled": 3,
        "grounded_pool": 4, "grounded_recalled": 3, "distinct": 4,
    }  # fmt: skip


def test_judge_calls_are_counted_and_verification_is_one_call_per_interpretation():
    model = judge()
    predictions = predicted((PREMIERE, ["premiere"]), (US, ["us"]))
    scores = evaluate_grounded(QUESTION, predictions, PASSAGES, gold(PREMIERE, US), judge=model)
    assert model.prompts().count("eval_verify") == 4  # 2 predictions + 2 gold
    assert scores.usage.calls == len(model.calls) and scores.usage.input_tokens > 0
    assert scores.g_precision == scores.g_recall == scores.g_f1 == 1.0


def test_interpretations_without_a_passage_are_verified_against_all_passages():
    model = judge()
    scores = evaluate_grounded(QUESTION, predicted((US, [])), PASSAGES, gold(US), judge=model)
    first_verify = next(c for c in model.calls if c.prompt == "eval_verify" and US[0] in c.user)
    assert "[1] Film | «The film had its world premiere" in first_verify.user and "[3] Novel" in first_verify.user
    assert scores.verified == [True]


def test_duplicates_count_once_in_distinct():
    predictions = predicted((PREMIERE, ["premiere"]), (PREMIERE, ["premiere"]), (US, ["us"]))
    scores = evaluate_grounded(QUESTION, predictions, PASSAGES, gold(PREMIERE), judge=judge())
    assert scores.predictions == 3 and scores.distinct == 2


def test_unusable_judge_replies_count_as_no_and_are_reported():
    model = judge(eval_verify="It depends.")
    predictions = predicted((PREMIERE, ["premiere"]))
    scores = evaluate_grounded(QUESTION, predictions, PASSAGES, gold(PREMIERE), judge=model)
    assert scores.verified == [False] and scores.g_precision == 0.0
    assert scores.judge_failures == 2 and scores.g_recall is None and scores.g_f1 is None  # Q̄ is empty


def test_no_predictions_leave_precision_undefined_and_recall_zero():
    scores = evaluate_grounded(QUESTION, [], PASSAGES, gold(PREMIERE), judge=judge())
    assert scores.g_precision is None and scores.g_recall == 0.0 and scores.recall == 0.0
    assert scores.precision is None
    assert scores.counts()["grounded_pool"] == 1 and scores.counts()["predictions"] == 0  # recall 0 in the sums


def test_judge_can_be_a_provider_name(scripted):
    name, model = scripted({"eval_verify": judge_verify, "eval_match": judge_match, "eval_dedup": judge_dedup})
    scores = evaluate_grounded(QUESTION, predicted((US, ["us"])), PASSAGES, gold(US), judge=name)
    assert scores.g_f1 == 1.0 and model.calls
    assert all(c.kwargs.get("temperature") == 0.0 for c in model.calls)  # greedy judge


def test_gold_pairs_and_evidence_from_an_asqa_row(collection):
    from agent.retrieval.collections import open_store

    row = {"qa_pairs": [{"question": "When was the novel published?", "short_answers": ["26 June 1997", "1997"]}]}
    pairs = gold_pairs(row)
    assert pairs == [QAPair(question="When was the novel published?", answer="26 June 1997 / 1997")]
    evidence = gold_evidence(open_store(collection), pairs, k=2)
    assert len(evidence) == 1 and evidence[0][0].id == "hp-book"
