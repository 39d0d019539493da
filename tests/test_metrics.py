"""Metrics against hand-computed examples."""

import math

import pytest

from agent.eval.metrics import (
    answer_accuracy,
    answer_coverage,
    disambig_f1,
    dr_score,
    exact_match,
    mrecall_at_k,
    rouge_l,
    str_em,
    support_recall,
    token_f1,
)

RESPONSE = "The film premiered in London on 4 November 2001. It opened in the US on 16 November 2001."


def test_str_em_counts_disambiguations_whose_answer_appears():
    golds = [["4 November 2001", "November 4, 2001"], ["16 November 2001"], ["2002"]]
    assert str_em(RESPONSE, golds) == pytest.approx(2 / 3)
    assert str_em("", golds) == 0.0


def test_str_em_normalises_case_punctuation_and_articles():
    assert str_em("the answer is THE Beatles!", [["Beatles"]]) == 1.0


def test_token_f1_and_exact_match_by_hand():
    # pred tokens: {barack, obama}; gold: {obama}: P = 1/2, R = 1, F1 = 2/3
    assert token_f1("Barack Obama", "Obama") == pytest.approx(2 / 3)
    assert token_f1("The Beatles", "beatles") == 1.0
    assert token_f1("x", "y") == 0.0
    assert exact_match("The Beatles.", "beatles") == 1.0


def test_rouge_l_is_the_best_over_references():
    assert rouge_l("a b c d", ["a b c d", "z"]) == pytest.approx(1.0)
    # LCS of "a b x d" vs "a b c d" = 3 tokens: P = R = 3/4
    assert rouge_l("a b x d", ["a b c d"]) == pytest.approx(0.75)
    assert rouge_l("", ["a"]) == 0.0


def test_disambig_f1_uses_the_reader_on_the_response():
    def reader(question: str, context: str) -> str:
        return "4 November 2001" if "premiere" in question else "London"

    pairs = [("When was the premiere?", ["4 November 2001"]), ("When was the US release?", ["16 November 2001"])]
    assert disambig_f1(RESPONSE, pairs, reader) == pytest.approx(0.5)
    assert dr_score(0.5, 0.5) == pytest.approx(0.5)
    assert dr_score(0.25, 1.0) == pytest.approx(math.sqrt(0.25))


def test_mrecall_needs_all_answers_when_there_are_at_most_k():
    passages = ["premiere on 4 November 2001", "unrelated", "US release 16 November 2001"]
    golds = [["4 November 2001"], ["16 November 2001"]]
    assert mrecall_at_k(passages, golds, k=5) == 1.0
    assert mrecall_at_k(passages, golds, k=2) == 0.0  # only the first two passages count; one answer found of 2
    assert answer_coverage(passages[:2], golds) == 0.5


def test_mrecall_with_more_golds_than_k_needs_k_of_them():
    passages = [f"answer{i}" for i in range(5)]
    golds = [[f"answer{i}"] for i in range(7)]
    assert mrecall_at_k(passages, golds, k=5) == 1.0
    assert mrecall_at_k(passages[:4] + ["none"], golds, k=5) == 0.0


def test_hotpot_accuracy_and_support_recall():
    assert answer_accuracy("It hails from Fujioka, Gunma in Japan.", ["Fujioka, Gunma"]) == 1.0
    assert answer_accuracy("Tokyo", ["Fujioka, Gunma"]) == 0.0
    assert support_recall(["a", "b", "c"], ["b", "d"]) == 0.5


def test_cover_em_needs_whole_words_where_the_substring_test_does_not():
    from agent.eval.metrics import cover_em

    assert answer_accuracy("The answer is unknown.", ["no"]) == 1.0  # "no" inside "unknown"
    assert cover_em("The answer is unknown.", ["no"]) == 0.0
    assert cover_em("No, it was not.", ["no"]) == 1.0
    assert cover_em("It hails from Fujioka, Gunma in Japan.", ["Fujioka, Gunma"]) == 1.0


def test_hotpot_f1_scores_yes_no_only_when_they_match():
    from agent.eval.metrics import hotpot_f1

    assert hotpot_f1("no", "yes") == 0.0 and hotpot_f1("yes", "yes") == 1.0
    assert hotpot_f1("no it is not", "no") == 0.0  # the official script's yes/no rule, not a partial token match
    assert 0 < hotpot_f1("the Green Bay Packers team", "Green Bay Packers") < 1


def test_citation_marks_are_no_part_of_the_answer_scored():
    """As ALCE scores: once normalised, VerDICt's "[3]" would read as the number 3 and match a gold answer "3"."""
    from agent.eval.datasets import Document, Example, GoldPair
    from agent.eval.scoring import score
    from agent.schemas import RunResult
    from agent.text import without_citations

    assert (
        without_citations("It has 12 seasons [3]. It ended in 2011 [1, 4].") == "It has 12 seasons. It ended in 2011."
    )
    asqa = Example(id="q", question="How many seasons?", qa_pairs=[GoldPair(question="UK?", short_answers=["3"]),
                   GoldPair(question="US?", short_answers=["12"])], long_answers=["It has 12 seasons."])  # fmt: skip
    cited = RunResult(question="How many seasons?", method="verdict", answer="It has 12 seasons [3].")
    assert score(asqa, cited)["str_em"] == 0.5  # "3" is no answer here; "12" is
    ramdocs = Example(id="r", question="How many seasons?", documents=[Document(text="x", type="correct", answer="12")],
                      gold_answers=["12"], wrong_answers=["3"])  # fmt: skip
    scores = score(ramdocs, cited)
    assert scores["em"] == scores["em_text"] == 1.0 and scores["misinfo_stated"] == 0.0


def test_a_local_extractive_reader_returns_a_span_of_the_context(tmp_path):
    """``--reader DIR`` with a (tiny, untrained) BERT QA model saved locally: whatever its weights, the answer is a
    span of the context, short, found in long contexts too (windows), and empty for an empty context."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast

    from agent.eval.metrics import hf_reader

    context = "Hamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601 in London."
    words = sorted({w.strip(".?,").lower() for w in (context + " who wrote hamlet filler").split()})
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=512)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(tmp_path)

    read = hf_reader(str(tmp_path), max_answer_tokens=5)
    answer = read("Who wrote Hamlet?", context)
    assert answer and answer in context and len(answer.split()) <= 5
    long = " ".join(["filler"] * 900 + [context])  # three windows
    found = read("Who wrote Hamlet?", long)
    assert found and found in long and read("Who wrote Hamlet?", " ") == ""
