"""The answer step: the draft, named checks that send it back once with what failed, the fallback, citations by code.

rag drives it here with a scripted model over the tiny real collection; ToC, DIVA and VerDICt wire the same nodes
(their own tests)."""

import pytest

import agent
from agent.answer_step import AnswerReview, cited, listed
from agent.llm.calls import OutputError
from agent.schemas import Disambiguation, Passage
from agent.steps.checks import Grounds, Reading, failures, figures, foreign_figures, narrates

QUESTION = "When did the Harry Potter film come out?"
EXTRACT = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001"
PREMIERE = "The film premiered in London on 4 November 2001."
US = "It reached US cinemas on 16 November 2001."
GOOD = f"Answer: {PREMIERE} {US}"
NARRATED = f"Answer: {PREMIERE} According to the passages, it reached US cinemas on 16 November 2001."
LISTED_US = "When was it released in US cinemas? 16 November 2001."


def run(scripted, collection, script, **options):
    name, model = scripted({"rag_extract": EXTRACT, **script})
    nodes: list[str] = []
    result = agent.run(
        QUESTION, llm=name, collection=collection, citations=False, on_node=lambda n, u, s: nodes.append(n), **options
    )
    return result, model, nodes


def test_a_draft_that_passes_every_check_costs_no_more_calls(collection, scripted):
    result, model, nodes = run(scripted, collection, {"rag_generate": GOOD})
    assert nodes == ["retrieve", "rag_extract", "rag_generate", "check_answer", "finish_answer"]
    assert model.prompts() == ["rag_extract", "rag_generate"]
    assert result.answer == f"{PREMIERE} {US}"
    assert result.extra["answer_review"] == AnswerReview(checks=["narrates", "states_nothing", "borrows"])


def test_a_draft_that_talks_about_its_sources_goes_back_once_in_its_own_conversation(collection, scripted):
    result, model, nodes = run(scripted, collection, {"rag_generate": NARRATED, "answer_revise": GOOD})
    assert nodes[2:] == ["rag_generate", "check_answer", "revise_answer", "check_answer", "finish_answer"]
    draft, revise = model.calls[1], model.calls[2]
    assert revise.messages[:-2] == draft.messages and revise.messages[-2].content == NARRATED  # cached prefix
    assert "«According to the passages, it reached US cinemas on 16 November 2001.»" in revise.user
    assert result.answer == f"{PREMIERE} {US}"
    review = result.extra["answer_review"]
    assert (review.fired, review.revisions, review.failed, review.fallback) == (["narrates"], 1, [], [])
    assert result.usage.by_node["revise_answer"].calls == 1


def test_a_revision_that_still_narrates_loses_that_sentence_and_its_reading_is_listed(collection, scripted):
    result, model, _ = run(scripted, collection, {"rag_generate": NARRATED, "answer_revise": NARRATED})
    assert model.prompts().count("answer_revise") == 1  # one round by default, then the fallback
    assert result.answer == f"{PREMIERE} {LISTED_US}"
    review = result.extra["answer_review"]
    assert review.failed == ["narrates"] and review.fallback == ["dropped_sentences"]


def test_the_kept_draft_is_the_one_failing_fewest_checks(collection, scripted):
    nothing = "Answer: The passages do not provide this information."
    result, _, _ = run(scripted, collection, {"rag_generate": NARRATED, "answer_revise": nothing})
    assert result.answer == f"{PREMIERE} {LISTED_US}"  # the first draft failed one check, the revision two


def test_a_draft_that_says_nothing_becomes_the_readings_listed(collection, scripted):
    nothing = "Answer: The passages do not provide this information."
    result, _, _ = run(scripted, collection, {"rag_generate": nothing, "answer_revise": nothing})
    assert result.answer == listed(result.disambiguations)
    assert result.extra["answer_review"].fallback == ["listed_readings"]


def test_no_usable_answer_and_no_readings_is_an_output_error(collection, scripted):
    name, _ = scripted({"rag_extract": "I don't know.", "rag_generate": "%%%", "answer_revise": "%%%"})
    with pytest.raises(OutputError, match="no usable answer"):
        agent.run(QUESTION, llm=name, collection=collection, retries=0)


def _borrowed_year() -> str:
    """A year the question's worked examples state and no passage of the tiny collection holds."""
    from graphs.rag import RagContext

    book = RagContext().casebook(QUESTION)
    assert "2014" in book
    return "2014"


def test_a_date_only_the_worked_examples_hold_is_sent_back_and_left_out_if_it_stays(collection, scripted):
    borrowed = f"Answer: {PREMIERE} It reached US cinemas on 16 November {_borrowed_year()}."
    result, model, _ = run(scripted, collection, {"rag_generate": borrowed, "answer_revise": borrowed})
    assert "It states 2014, which only the worked examples hold" in model.calls[2].user
    assert result.answer == f"{PREMIERE} {LISTED_US}"
    assert result.extra["answer_review"].failed == ["borrows"]


def test_a_left_out_reading_is_asked_for_where_incomplete_is_checked_then_listed(collection, scripted):
    one = f"Answer: {PREMIERE}"
    result, model, _ = run(scripted, collection, {"rag_generate": one, "answer_revise": one})
    assert result.answer == PREMIERE and model.prompts() == ["rag_extract", "rag_generate"]  # rag's default: off
    checks = ["narrates", "states_nothing", "borrows", "incomplete"]
    result, model, _ = run(scripted, collection, {"rag_generate": one, "answer_revise": one}, answer_checks=checks)
    assert "It leaves out these readings: When was it released in US cinemas? 16 November 2001" in model.calls[2].user
    assert result.answer == f"{PREMIERE} {LISTED_US}"
    assert result.extra["answer_review"].fallback == ["appended_readings"]


def test_with_no_checks_or_no_revisions_the_draft_is_the_answer_or_meets_the_fallback_at_once(collection, scripted):
    result, model, _ = run(scripted, collection, {"rag_generate": NARRATED}, answer_checks=[])
    assert result.answer == NARRATED.removeprefix("Answer: ") and model.prompts() == ["rag_extract", "rag_generate"]
    result, model, _ = run(scripted, collection, {"rag_generate": NARRATED}, answer_revisions=0)
    assert result.answer == f"{PREMIERE} {LISTED_US}" and "answer_revise" not in model.prompts()


def test_good_text_about_passages_and_contexts_in_the_world_is_left_alone(collection, scripted):
    world = (
        "Answer: A Passage to India was published in 1924. The Northwest Passage was first navigated by Roald "
        "Amundsen in 1906. The treaty was signed in the context of the Cold War in 1987."
    )
    result, model, _ = run(scripted, collection, {"rag_generate": world})
    assert result.answer == world.removeprefix("Answer: ") and model.prompts() == ["rag_extract", "rag_generate"]


@pytest.mark.parametrize(
    "sentence",
    [
        "According to the passages, the film premiered in 2001.",
        "Passage [2] states that it premiered in London.",
        "[3] says that it opened in 2001.",
        "The provided context does not mention a date.",
        "These documents do not give the US date.",
        "The disambiguated questions ask about two releases.",
        "DQ 1 asks about the premiere.",
        "Based on the retrieved passages, it came out in 2001.",
    ],
)
def test_talk_about_the_given_material_is_narration(sentence):
    assert narrates(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "A Passage to India was published in 1924.",
        "The passage of the bill came in 1850.",
        "The Passage tells the story of a girl.",
        "The treaty was signed in the context of the Cold War.",
        "It was mentioned in documents from 1850.",
        "The Drake Passage lies between Cape Horn and Antarctica.",
    ],
)
def test_the_world_s_passages_contexts_and_documents_are_not_narration(sentence):
    assert not narrates(sentence)


def test_a_figure_is_borrowed_only_when_the_examples_hold_it_and_nothing_read_does():
    foreign = foreign_figures("Released on June 22, 2001; 1,000 copies; season 2.", ["It opened in 2001."])
    assert foreign == {"6/22", "1000"}  # the year is held, "2" is too common to tell
    grounds = Grounds(foreign_figures=foreign)
    assert failures("It opened on 22 June 2001.", grounds, ["borrows"]) == {
        "borrows": "It states June 22, which only the worked examples hold, not this question, its readings or its "
        "passages."
    }
    assert failures("It opened in June 2001 and sold 999 copies.", grounds, ["borrows"]) == {}
    assert figures("On the 3rd of March 1999 [2], 12,500 fans came.") == {"3/3", "1999", "12500"}


def test_a_reading_is_stated_in_any_wording_of_its_answer():
    readings = [Reading("Which season?", ("Season 8", "eighth season")), Reading("Who coached?", ("Bill Belichick",))]
    assert (
        failures(
            "The crash came in season 8's finale; Bill Belicheck coached.", Grounds(tuple(readings)), ["incomplete"]
        )
        == {}
    )
    assert (
        failures("India came 5th in 2014 and 4th in 2006.", Grounds((Reading("2014?", ("5",)),)), ["incomplete"]) == {}
    )
    left = failures("The crash came in season 8.", Grounds(tuple(readings)), ["incomplete"])
    assert left == {"incomplete": "It leaves out these readings: Who coached? Bill Belichick"}
    assert failures("No.", Grounds((Reading("Was it first?", ("No",)),)), ["incomplete"]) == {}  # yes/no: not checked


def test_citations_follow_each_sentence_from_the_readings_it_states():
    passages = [Passage(id=i, text=i) for i in ("a", "b", "c")]
    pairs = [
        Disambiguation(question="Premiere?", answer="4 November 2001", passage_ids=["b"]),
        Disambiguation(question="US?", answer="16 November 2001", passage_ids=["c", "a"]),
        Disambiguation(question="Known?", answer="Rowling", passage_ids=[]),
    ]
    text = "It premiered on November 4, 2001 [3]. In the US it came out on 16 November 2001 and was a hit! Rowling wrote it"
    assert cited(text, pairs, passages) == (
        "It premiered on November 4, 2001 [2]. In the US it came out on 16 November 2001 and was a hit [1][3]! "
        "Rowling wrote it"
    )


def test_the_readings_listed_state_a_question_once_with_all_its_answers():
    pairs = [Disambiguation(question="Who sings Wake Me Up?", answer=a) for a in ("Avicii", "Aloe Blacc.", "Avicii")]
    assert listed(pairs) == "Who sings Wake Me Up? Avicii; Aloe Blacc."
