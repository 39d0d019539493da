"""The conflict step: disambiguations of one interpretation whose answers differ are judged once, the losers and the
passages behind only them dropped and reported; DIVA and VerDICt turn it on with ``settle_conflicts``. Real
embeddings; a scripted model at the LLM boundary."""

import asyncio
import importlib
import re

import pytest
from langgraph.runtime import Runtime

import agent
from agent.llm.calls import LLMOptions
from agent.schemas import Disambiguation, Passage
from agent.steps.conflict import (
    answer_key,
    answer_keys,
    conflicting_groups,
    disputes,
    parse_keep,
    refines,
    same_subject,
    settle,
    subject_of,
)

QUESTION = "In which year was Michael Jordan born?"
PASSAGES = [
    Passage(id="player", text="Michael Jeffrey Jordan, the basketball player, was born on February 17, 1963."),
    Passage(id="misinfo", text="Michael Jeffrey Jordan, the basketball player, was born in 1998."),
    Passage(id="scientist", text="Michael Irwin Jordan, the American scientist, was born in 1956."),
]
PAIRS = [
    Disambiguation(question="In which year was the basketball player Michael Jordan born?", answer="1963",
                   passage_ids=["player"]),
    Disambiguation(question="In what year was the basketball player Michael Jordan born?", answer="1998",
                   passage_ids=["misinfo"]),
    Disambiguation(question="In which year was the scientist Michael I. Jordan born?", answer="1956",
                   passage_ids=["scientist"]),
]  # fmt: skip


def test_only_disagreeing_answers_to_one_interpretation_form_a_group():
    assert conflicting_groups(PAIRS, PASSAGES) == [[0, 1]]
    agreeing = [PAIRS[0], PAIRS[1].model_copy(update={"answer": "1963."})]
    assert conflicting_groups(agreeing, PASSAGES) == []


def test_a_date_and_a_place_answer_different_questions_and_do_not_compete():
    born = "When was Joseph Lafontaine born in Canada East?"
    grew_up = "Where did Joseph Lafontaine grow up in Canada East?"
    pairs = [
        Disambiguation(question=born, answer="1865", passage_ids=["d0"]),
        Disambiguation(question=grew_up, answer="Saint-Barthélémi", passage_ids=["d0", "d1"]),
        Disambiguation(question=born, answer="March 15, 1870", passage_ids=["d2"]),
    ]
    told = "Joseph Lafontaine was born on {} in Canada East and grew up in Saint-Barthélémi."
    docs = [
        Passage(id="d0", text=told.format("November 25, 1865")),
        Passage(id="d1", text="Joseph Lafontaine grew up in Saint-Barthélémi, Canada East, where his father farmed."),
        Passage(id="d2", text=told.format("March 15, 1870")),
    ]
    assert conflicting_groups(pairs[:2], docs) == []  # not one interpretation: the place cannot outvote the year
    assert conflicting_groups(pairs, docs) == [[0, 2]]  # the two years still compete


def test_answers_are_compared_by_what_they_add_to_their_question(scripted):
    asked = "Where is Fort Buchanan located?"
    worded = [
        "Fort Buchanan is located in Arizona",
        "Fort Buchanan, Arizona",
        "Arizona",
        "Fort Buchanan is in Virginia",
    ]
    pairs = [Disambiguation(question=asked, answer=a, passage_ids=[f"d{n}"]) for n, a in enumerate(worded)]
    assert [answer_key(p) for p in pairs] == ["arizona", "arizona", "arizona", "virginia"]
    assert answer_key(Disambiguation(question=asked, answer="Fort Buchanan")) == "fort buchanan"  # nothing added
    docs = [Passage(id=f"d{n}", text=f"Fort Buchanan: {a}.") for n, a in enumerate(worded)]
    assert conflicting_groups(pairs[:3], docs) == []
    counted = [Disambiguation(question="What is the population of Sherbourne?", answer=a) for a in ("9,523", "9 523")]
    assert {answer_key(p) for p in counted} == {"9523"} and conflicting_groups(counted, []) == []
    name, model = scripted({"conflict_judge": "Keep: 2"})
    kept, passages, conflicts = asyncio.run(settle(asked, pairs, docs, LLMOptions(llm=name), both_orders=True))
    assert model.calls == [] and [p.answer for p in kept] == worded[:3] and "d3" not in {p.id for p in passages}
    assert [(c.answers, c.kept, c.by) for c in conflicts] == [
        (["Fort Buchanan is located in Arizona", "Fort Buchanan is in Virginia"], ["Fort Buchanan is located in Arizona"],
         "majority")
    ]  # fmt: skip


def test_a_longer_wording_of_an_answer_counts_with_it(scripted):
    asked = "What is the broadcast format of WCMA?"  # ramdocs-148: three correct documents, two edited copies
    worded = ["Classical Music", "AM radio station broadcasting a Spanish Tropical format", "Tropical",
              "Spanish Tropical", "Classical Music"]  # fmt: skip
    pairs = [Disambiguation(question=asked, answer=a, passage_ids=[f"d{n}"]) for n, a in enumerate(worded)]
    keys = answer_keys(pairs)
    assert len(set(keys)) == 2 and keys[1] == keys[2] == keys[3] != keys[0] == keys[4]
    told = "WCMA is an AM radio station licensed to Bayamón, Puerto Rico, broadcasting a {} format."
    docs = [
        Passage(id=f"d{n}", text=told.format("Classical Music" if n in (0, 4) else "Spanish Tropical"))
        for n in range(5)
    ]
    name, model = scripted({"conflict_judge": "Keep: 1"})  # a judge that would keep the misinformation
    kept, _, conflicts = asyncio.run(settle(asked, pairs, docs, LLMOptions(llm=name)))
    assert model.calls == [] and conflicts[0].by == "majority" and "Classical Music" not in {p.answer for p in kept}
    dates = [Disambiguation(question="When was Richard Aldworth born?", answer=a) for a in ("1750", "12 December 1750")]
    lanterns = [Disambiguation(question="What is the common name for Yellow Lantern?", answer=a)
                for a in ("Yellow lantern", "yellow lantern banksia", "Red lantern banksia")]  # fmt: skip
    assert len(set(answer_keys(dates))) == 2  # another number: another answer
    assert len(set(answer_keys(lanterns))) == 2 and answer_keys(lanterns)[0] == answer_keys(lanterns)[1]


def test_a_date_at_coarser_precision_does_not_compete_with_it(scripted):
    asked = "When was Edmund Brockman born?"  # ramdocs-258: the step left both undecided and lost the gold date
    told = "Edmund Ralph Brockman ({} – 17 September 1908) was an Australian farmer and politician."
    docs = [Passage(id=f"d{n}", text=told.format(day)) for n, day in enumerate(["22 October 1828", "1828", "1835"])]
    read = ["Edmund Brockman was born on 22 October 1828.", "1828", "October 1828", "15 July 1835"]
    pairs = [Disambiguation(question=asked, answer=a, passage_ids=[f"d{min(n, 2)}"]) for n, a in enumerate(read)]
    assert refines("1828", "22 october 1828") and refines("october 1828", "22nd october 1828")
    assert not refines("2", "2 million") and not refines("3 july 1750", "12 december 1750")
    assert conflicting_groups(pairs[:3], docs) == []  # one date, three precisions
    assert conflicting_groups(pairs, docs) == [[0, 1, 2, 3]]  # another year contradicts them all
    name, model = scripted({"conflict_judge": "Keep: 2"})  # a judge that would drop the full date
    kept, _, conflicts = asyncio.run(settle(asked, pairs[:2], docs, LLMOptions(llm=name), both_orders=True))
    assert model.calls == [] and conflicts == [] and kept == pairs[:2]


def test_answers_from_passages_about_different_subjects_both_stand(scripted):
    asked = "Who directed the film Baby Doll?"  # readers often repeat the ambiguous question word for word
    told = "Baby Doll is a 1956 American black comedy film directed by {}, starring Carroll Baker and Karl Malden."
    docs = [
        Passage(id="kazan", text=told.format("Elia Kazan")),
        Passage(id="giraldi", text="La bambolona (Baby Doll) is a 1968 Italian film directed by Franco Giraldi."),
        Passage(id="edited", text=told.format("Martin Scorsese")),  # an edited copy: misinformation
    ]
    pairs = [
        Disambiguation(question=asked, answer=name, passage_ids=[doc.id])
        for name, doc in zip(("Elia Kazan", "Franco Giraldi", "Martin Scorsese"), docs)
    ]
    assert conflicting_groups(pairs[:2], docs) == []  # two films, two directors: ambiguity, not a conflict
    assert conflicting_groups(pairs, docs) == [[0, 2]]
    name, model = scripted({"conflict_judge": lambda call: "Keep: " + re.search(r"Answer (\d): Elia", call.user)[1]})
    kept, passages, conflicts = asyncio.run(settle(asked, pairs, docs, LLMOptions(llm=name), both_orders=True))
    assert [p.answer for p in kept] == ["Elia Kazan", "Franco Giraldi"] and [p.id for p in passages] == [
        "kazan",
        "giraldi",
    ]
    assert [(c.answers, c.kept) for c in conflicts] == [(["Elia Kazan", "Martin Scorsese"], ["Elia Kazan"])]


def test_the_judge_reads_each_answer_with_its_passages_and_the_loser_goes(scripted):
    name, model = scripted({"conflict_judge": "Keep: 1"})
    pairs, passages, conflicts = asyncio.run(settle(QUESTION, PAIRS, PASSAGES, LLMOptions(llm=name)))
    assert [p.answer for p in pairs] == ["1963", "1956"] and [p.id for p in passages] == ["player", "scientist"]
    assert [(c.answers, c.kept, c.dropped_ids) for c in conflicts] == [(["1963", "1998"], ["1963"], ["misinfo"])]
    shown = model.calls[0].user
    assert re.search(r"Answer 1: 1963\n.+born on February 17, 1963", shown)
    assert re.search(r"Answer 2: 1998\n.+born in 1998", shown) and "scientist" not in shown


def test_an_answer_more_passages_state_wins_without_a_call_and_a_tie_goes_to_the_judge(scripted):
    second = Passage(id="player-2", text="Jordan, the Chicago Bulls guard, was born in Brooklyn in 1963.")
    backed = [*PAIRS, Disambiguation(question=PAIRS[0].question, answer="1963", passage_ids=["player-2"])]
    name, model = scripted({"conflict_judge": "Keep: 2"})  # a judge that would keep the misinformation
    pairs, passages, conflicts = asyncio.run(settle(QUESTION, backed, [*PASSAGES, second], LLMOptions(llm=name)))
    assert model.calls == [] and {p.answer for p in pairs} == {"1963", "1956"}
    assert [(c.kept, c.dropped_ids, c.by) for c in conflicts] == [(["1963"], ["misinfo"], "majority")]
    pairs, _, conflicts = asyncio.run(settle(QUESTION, backed, [*PASSAGES, second], LLMOptions(llm=name), rule="judge"))
    assert len(model.calls) == 1 and conflicts[0].by == "judge" and "1963" not in {p.answer for p in pairs}
    _, _, conflicts = asyncio.run(settle(QUESTION, PAIRS, PASSAGES, LLMOptions(llm=name)))  # one passage each: a tie
    assert len(model.calls) == 2 and conflicts[0].by == "judge" and conflicts[0].kept == ["1998"]


def test_an_unusable_verdict_keeps_every_answer(scripted):
    name, model = scripted({"conflict_judge": "I cannot tell."})
    pairs, passages, conflicts = asyncio.run(settle(QUESTION, PAIRS, PASSAGES, LLMOptions(llm=name, retries=1)))
    assert pairs == PAIRS and passages == PASSAGES and conflicts[0].kept == ["1963", "1998"]
    assert len(model.calls) == 2  # retried once, then the documented fallback


def test_in_both_orders_an_answer_stands_only_if_kept_both_times(scripted):
    name, model = scripted({"conflict_judge": "Keep: 2"})  # a judge that keeps whatever comes second
    pairs, passages, conflicts = asyncio.run(settle(QUESTION, PAIRS, PASSAGES, LLMOptions(llm=name), both_orders=True))
    assert len(model.calls) == 2 and re.search(r"Answer 1: 1998\n", model.calls[1].user)
    assert [p.answer for p in pairs] == ["1956"] and [p.id for p in passages] == ["scientist"]
    assert [(c.kept, c.by, c.dropped_ids) for c in conflicts] == [([], "undecided", ["misinfo", "player"])]
    assert disputes(conflicts) == (
        'The sources contradict each other on "In which year was the basketball player Michael Jordan born?": '
        "1963 or 1998."
    )
    assert disputes([conflicts[0].model_copy(update={"answers": ["forward.", "Defender", "Forward"]})]).endswith(
        ": forward or Defender."
    )
    name, model = scripted({"conflict_judge": lambda call: "Keep: " + re.search(r"Answer (\d): 1963", call.user)[1]})
    pairs, _, conflicts = asyncio.run(settle(QUESTION, PAIRS, PASSAGES, LLMOptions(llm=name), both_orders=True))
    assert len(model.calls) == 2 and [(c.kept, c.by) for c in conflicts] == [(["1963"], "judge")]
    assert [p.answer for p in pairs] == ["1963", "1956"] and disputes(conflicts) == ""


def test_keep_numbers_parse_within_range():
    assert parse_keep("Keep: 1, 3", 3) == [0, 2]
    assert parse_keep("keep 2 and 1", 2) == [0, 1]
    with pytest.raises(ValueError):
        parse_keep("Keep: 7", 2)


def readers(pairs: list[Disambiguation], judge) -> dict:
    """Scripted replies: DIVA's I_e extracts ``pairs``, VerDICt reads each passage's pair, the judge as given."""
    return {
        "conflict_judge": judge,
        "rag_extract_short": '{"disambiguations": ['
        + ", ".join(f'{{"question": "{p.question}", "answer": "{p.answer}"}}' for p in pairs)
        + "]}",
        "verdict_execute": lambda call: next(
            f"Interpretation: {p.question}\nAnswer: {p.answer}" for p, d in zip(pairs, PASSAGES) if d.text in call.user
        ),
    }


@pytest.mark.parametrize("method", ["diva", "verdict"])
def test_methods_settle_conflicts_only_when_asked(method, scripted):
    docs = [p.model_dump() for p in PASSAGES]
    name, model = scripted(
        readers(PAIRS, lambda call: "Keep: " + re.search(r"Answer (\d): 1963", call.user)[1]), default="Yes"
    )
    off = agent.run(QUESTION, method=method, llm=name, passages=docs)
    assert "conflicts" not in off.extra and "conflict_judge" not in model.prompts()
    on = agent.run(QUESTION, method=method, llm=name, passages=docs, settle_conflicts=True)
    assert model.prompts().count("conflict_judge") == 1
    assert on.extra["conflicts"][0].dropped_ids == ["misinfo"] and "misinfo" not in {p.id for p in on.passages}
    assert "1998" not in {d.answer for d in on.disambiguations}
    assert on.usage.by_node["settle"].calls == 1


@pytest.mark.parametrize("method", ["diva", "verdict"])
def test_an_undecided_conflict_is_reported_not_asserted(method, scripted):
    docs, pairs = [p.model_dump() for p in PASSAGES[:2]], PAIRS[:2]
    name, model = scripted(readers(pairs, "Keep: 1"), default="Yes")  # keeps whichever comes first, in both orders
    result = agent.run(QUESTION, method=method, llm=name, passages=docs, settle_conflicts=True, judge_both_orders=True)
    assert model.prompts().count("conflict_judge") == 2 and result.disambiguations == []
    assert result.extra["conflicts"][0].by == "undecided"
    assert re.fullmatch(r'The sources contradict each other on ".+": (1963 or 1998|1998 or 1963)\.', result.answer)


def test_shared_facts_catch_misinformation_that_is_no_copy_and_namesakes_still_both_stand(scripted):
    asked = "When was Harrowgate Bridge built?"
    docs = [
        Passage(id="correct", text="Harrowgate Bridge is a stone arch bridge over the River Wend in Calder County, "
                "Ohio. Designed by Thomas Pell, it was built in 1871 and added to the National Register of Historic "
                "Places in 1978."),
        Passage(id="rewritten", text="For a century the span carried Old Mill Road traffic. Its builder, the mason "
                "Thomas Pell, finished the work in 1893; a survey by the River Wend Trust led to a listing on the "
                "National Register of Historic Places in 1978."),  # another part of the article, its year rewritten
        Passage(id="namesake", text="Harrowgate Bridge, a footbridge across the Aire in Leeds, England, was opened "
                "in 1995 by Leeds City Council after a design competition."),
    ]  # fmt: skip
    pairs = [
        Disambiguation(question=asked, answer=year, passage_ids=[doc.id])
        for year, doc in zip(("1871", "1893", "1995"), docs)
    ]
    assert conflicting_groups(pairs, docs) == []  # 9 content words of 20 in common: no copy, so shared words miss it
    assert conflicting_groups(pairs, docs, subject_rule="shared_facts") == [[0, 1]]  # the footbridge stands apart
    name, model = scripted({"conflict_judge": lambda call: "Keep: " + re.search(r"Answer (\d): 1871", call.user)[1]})
    kept, passages, conflicts = asyncio.run(
        settle(asked, pairs, docs, LLMOptions(llm=name), subject_rule="shared_facts")
    )
    assert [p.answer for p in kept] == ["1871", "1995"] and [p.id for p in passages] == ["correct", "namesake"]
    assert [(c.answers, c.kept, c.dropped_ids) for c in conflicts] == [(["1871", "1893"], ["1871"], ["rewritten"])]


def test_facts_made_of_the_question_and_its_answers_tie_no_passages():
    a = subject_of("Harrowgate Bridge in Calder County was built in 1871 by Thomas Pell.")
    b = subject_of("Harrowgate Bridge in Calder County was finished in 1893 by Thomas Pell.")
    asked = {"when", "was", "harrowgate", "bridge", "built", "1871", "1893"}
    assert {"harrowgate bridge", "calder county", "thomas pell", "1871"} <= a.facts
    assert not same_subject(a._replace(words=set()), b._replace(words=set()), asked, "shared_facts")  # 2 facts left
    assert same_subject(a._replace(words=set()), b._replace(words=set()), {"1871", "1893"}, "shared_facts")
    assert not same_subject(a._replace(words=set()), b._replace(words=set()), {"1871", "1893"}, "shared_words")


@pytest.mark.parametrize("module", ["graphs.diva", "graphs.verdict"])
def test_the_settle_node_passes_the_state_on_when_the_step_is_off(module, scripted):
    """A replay forked before ``settle`` with ``settle_conflicts=false`` measures the method without the step."""
    graph = importlib.import_module(module)
    schema = graph.DivaContext if module.endswith("diva") else graph.VerdictContext
    name, model = scripted({"conflict_judge": "Keep: 1"})
    state = {"question": QUESTION, "disambiguations": PAIRS, "candidates": PAIRS, "passages": PASSAGES}
    off = Runtime(context=schema(llm=name, settle_conflicts=False))
    assert asyncio.run(graph.settle(state, off)) == {} and not model.calls
    on = Runtime(context=schema(llm=name, settle_conflicts=True))
    assert asyncio.run(graph.settle(state, on))["conflicts"] and model.prompts() == ["conflict_judge"]


def test_the_judge_rule_catches_misinformation_about_no_shared_fact_and_namesakes_still_both_stand(scripted):
    asked = "Who designed the Lindqvist Tower?"
    docs = [
        Passage(id="holm", text="The Lindqvist Tower in Malmö, a 120-metre office block completed in 2004, was "
                "designed by the architect Karin Holm for the developer Skanska."),
        Passage(id="holm-2", text="Karin Holm's best-known building, the Lindqvist Tower, rises over the harbour of "
                "Malmö; its twisted glass facade won the Kasper Salin Prize."),
        Passage(id="rewritten", text="Named after a shipping magnate, the tower opened to tenants after years of "
                "delays. Its designer was Per Ekdahl, whose plans were chosen in an open competition."),
        Passage(id="duluth", text="The Lindqvist Tower in Duluth, Minnesota, is a brick water tower from 1911, "
                "designed by the city engineer Thomas Avery."),
    ]  # fmt: skip
    pairs = [
        Disambiguation(question=asked, answer=name, passage_ids=[doc.id])
        for name, doc in zip(("Karin Holm", "Karin Holm", "Per Ekdahl", "Thomas Avery"), docs)
    ]
    for rule in ("shared_words", "shared_facts"):  # no copy and no fact in common: no subject rule links them
        assert conflicting_groups(pairs, docs, subject_rule=rule) == []
    name, model = scripted({"conflict_judge": "Keep: 1"})  # a judge that keeps whatever comes first
    kept, passages, conflicts = asyncio.run(
        settle(asked, pairs, docs, LLMOptions(llm=name), both_orders=True, subject_rule="judge")
    )
    assert [re.findall(r"Answer \d: (.+)", call.user) for call in model.calls] == [
        ["Karin Holm", "Per Ekdahl", "Thomas Avery"],
        ["Thomas Avery", "Per Ekdahl", "Karin Holm"],
    ]
    # rejected in both orders, the rewritten answer leaves; each namesake, kept once, stands
    assert [p.answer for p in kept] == ["Karin Holm", "Karin Holm", "Thomas Avery"]
    assert [p.id for p in passages] == ["holm", "holm-2", "duluth"]
    assert [(c.kept, c.dropped_ids, c.by) for c in conflicts] == [
        (["Karin Holm", "Thomas Avery"], ["rewritten"], "judge")
    ]
    name, model = scripted({"conflict_judge": lambda call: "Keep: 1, 2, 3"})  # the judge sees no conflict
    kept, _, conflicts = asyncio.run(settle(asked, pairs, docs, LLMOptions(llm=name), subject_rule="judge"))
    assert kept == pairs and len(model.calls) == 1 and conflicts[0].dropped_ids == []


def test_the_judge_rule_settles_one_subject_first_and_reads_the_namesakes_after(scripted):
    """The edited copy loses to its original (one subject, strict); the other film then meets the judge (lenient)."""
    asked = "Who directed the film Baby Doll?"
    told = "Baby Doll is a 1956 American black comedy film directed by {}, starring Carroll Baker and Karl Malden."
    docs = [
        Passage(id="kazan", text=told.format("Elia Kazan")),
        Passage(id="giraldi", text="La bambolona (Baby Doll) is a 1968 Italian film directed by Franco Giraldi."),
        Passage(id="edited", text=told.format("Martin Scorsese")),
    ]
    pairs = [
        Disambiguation(question=asked, answer=name, passage_ids=[doc.id])
        for name, doc in zip(("Elia Kazan", "Franco Giraldi", "Martin Scorsese"), docs)
    ]
    name, model = scripted({"conflict_judge": lambda call: "Keep: " + re.search(r"Answer (\d): Elia", call.user)[1]})
    kept, passages, conflicts = asyncio.run(
        settle(asked, pairs, docs, LLMOptions(llm=name), both_orders=True, subject_rule="judge")
    )
    assert [re.findall(r"Answer \d: (.+)", call.user) for call in model.calls] == [
        ["Elia Kazan", "Martin Scorsese"],
        ["Martin Scorsese", "Elia Kazan"],
        ["Elia Kazan", "Franco Giraldi"],
        ["Franco Giraldi", "Elia Kazan"],
    ]
    assert [p.answer for p in kept] == ["Elia Kazan"] and [p.id for p in passages] == ["kazan"]
    assert [(c.kept, c.dropped_ids) for c in conflicts] == [(["Elia Kazan"], ["edited"]), (["Elia Kazan"], ["giraldi"])]
