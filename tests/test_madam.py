"""MADAM-RAG as the official code runs it, with its two defects fixed: agents per document, debate rounds that read
the last round's replies from a shared prefix, an aggregator over replies only, an early stop when no answer changes.
Real embeddings and re-ranker over given passages; a scripted model at the LLM boundary."""

import re

import agent
from graphs.madam import AgentTurn, unchanged

QUESTION = "In which year was Michael Jordan born?"
DOCS = [
    {"id": "player", "text": "Michael Jeffrey Jordan, the basketball player, was born on February 17, 1963."},
    {"id": "scientist", "text": "Michael Irwin Jordan, the American scientist, was born in 1956."},
    {"id": "misinfo", "text": "Michael Jeffrey Jordan, the basketball player, was born in 1998."},
    {"id": "noise", "text": "Jordan won his first college championship with North Carolina in 1982."},
]
FIRST = {"player": "1963", "scientist": "1956", "misinfo": "1998", "noise": "unknown"}


def _document(call) -> str:
    return next(d["id"] for d in DOCS if d["text"] in call.user)


def agent_replies(second: dict[str, str] | None = None):
    """Round 1 answers FIRST; later rounds answer ``second`` (default: the same)."""

    def reply(call) -> str:
        answers = FIRST if call.prompt == "madam_agent" else {**FIRST, **(second or {})}
        answer = answers[_document(call)]
        return f"Answer: {answer}. Explanation: my document says {answer}."

    return reply


def aggregate(call) -> str:
    round_answers = re.findall(r"^Agent \d+: Answer: (.+?)\.", call.user, re.MULTILINE)
    kept = [a for a in ("1963", "1956") if a in round_answers]
    return f"All Correct Answers: {kept!r}. Explanation: agents 1 and 2 read about two people.".replace("'", '"')


def run(scripted, second=None, **options):
    name, model = scripted(
        {"madam_agent": agent_replies(), "madam_debate": agent_replies(second), "madam_aggregate": aggregate},
        latency=0.05,
    )
    return agent.run(QUESTION, method="madam", llm=name, passages=DOCS, **options), model


def test_agents_debate_until_no_answer_changes_and_the_aggregation_keeps_both_people(scripted):
    result, model = run(scripted)
    assert model.prompts().count("madam_agent") == 4 and model.prompts().count("madam_debate") == 4
    assert model.prompts().count("madam_aggregate") == 1  # round 2 changed nothing: round 1's aggregation stands
    assert result.extra["stop_reason"] == "converged" and len(result.extra["rounds"]) == 2
    answers = {a.answer: a.passage_ids for a in result.extra["answers"]}
    assert answers == {"1963": ["player"], "1956": ["scientist"]}
    assert sorted(result.extra["rejected_ids"]) == ["misinfo", "noise"]
    assert result.answer.startswith("1963; 1956.") and "two people" in result.answer
    assert result.disambiguations == [] and {p.id for p in result.passages} == {d["id"] for d in DOCS}


def test_a_later_round_reads_every_reply_of_the_last_round_in_one_shared_prefix(scripted):
    result, model = run(scripted, second={"misinfo": "1963"})  # the misinformed agent gives way: round 3 follows
    debate = [c for c in model.calls if c.prompt == "madam_debate"]
    first_round = debate[:4]
    assert len({c.system for c in first_round}) == 1  # the agents of a round share their prefix
    assert all(f"Agent {i}: Answer: {a}." in first_round[0].system for i, a in enumerate(FIRST.values(), 1))
    assert {d["text"] in c.user for c in first_round for d in DOCS} == {True, False}  # the document comes last
    assert sorted(re.search(r"You are Agent (\d)", c.user).group(1) for c in first_round) == ["1", "2", "3", "4"]
    agents_round = [c for c in model.calls if c.prompt == "madam_agent"]
    assert max(c.started for c in agents_round) < min(c.ended for c in agents_round)  # one agent per document, at once
    assert len(result.extra["rounds"]) == 3 and result.extra["stop_reason"] == "converged"
    assert model.prompts().count("madam_aggregate") == 2
    answers = {a.answer: a.passage_ids for a in result.extra["answers"]}
    assert answers["1963"] == ["player", "misinfo"] and result.extra["rejected_ids"] == ["noise"]


def test_a_single_round_returns_its_own_aggregation(scripted):
    result, model = run(scripted, rounds=1)
    assert model.prompts().count("madam_aggregate") == 1 and result.extra["stop_reason"] == "rounds"
    assert [a.answer for a in result.extra["answers"]] == ["1963", "1956"]


def test_every_round_runs_when_answers_keep_changing(scripted):
    flip = iter(["1963", "1998", "1963", "1998"] * 3)

    def changing(call) -> str:
        answer = next(flip) if _document(call) == "misinfo" else FIRST[_document(call)]
        return f"Answer: {answer}. Explanation: x."

    name, model = scripted({"madam_agent": changing, "madam_debate": changing, "madam_aggregate": aggregate})
    result = agent.run(QUESTION, method="madam", llm=name, passages=DOCS)
    assert len(result.extra["rounds"]) == 3 and result.extra["stop_reason"] == "rounds"
    assert model.prompts().count("madam_aggregate") == 3


def test_an_empty_answer_never_counts_as_unchanged():
    def turns(*answers):
        return [AgentTurn(document_id=str(i), reply="", answer=a) for i, a in enumerate(answers)]

    assert unchanged(turns("1963", "unknown"), turns("1963.", "Unknown"))
    assert unchanged(turns("February 1963"), turns("1963"))  # the official containment test
    assert not unchanged(turns("1963", ""), turns("1963", "1956"))
    assert not unchanged(turns(""), turns(""))  # the official code calls this unchanged
    assert not unchanged(turns("1963"), turns("1998"))


def test_unusable_aggregations_fall_back_to_every_answer_an_agent_gave(scripted):
    name, _ = scripted({"madam_agent": agent_replies(), "madam_debate": agent_replies(), "madam_aggregate": "%%%"})
    result = agent.run(QUESTION, method="madam", llm=name, passages=DOCS)
    assert sorted(a.answer for a in result.extra["answers"]) == ["1956", "1963", "1998"]  # "unknown" is no answer


def test_madam_retrieves_from_the_collection_when_no_passages_are_given(collection):
    result = agent.run("When did the Harry Potter film come out?", method="madam", llm="fake", collection=collection)
    assert len(result.passages) == 5 and result.extra["rounds"] and result.answer


def test_the_official_wording_shows_a_debating_agent_the_other_replies_only(scripted):
    name, model = scripted(
        {
            "madam_agent_official": agent_replies(),
            "madam_debate_official": agent_replies({"misinfo": "1963"}),
            "madam_aggregate_official": aggregate,
        }
    )
    result = agent.run(QUESTION, method="madam", llm=name, passages=DOCS, wording="official")
    assert set(model.prompts()) == {"madam_agent_official", "madam_debate_official", "madam_aggregate_official"}
    debate = [c for c in model.calls if c.prompt == "madam_debate_official"][:4]
    for call in debate:
        own = [d["id"] for d in DOCS].index(_document(call)) + 1
        shown = re.findall(r"^Agent (\d+): ", call.user, re.MULTILINE)
        assert shown == [str(i) for i in range(1, 5) if i != own]  # the others, in their own numbers
        assert "You are Agent" not in call.user and "Keep an answer" not in call.system
    aggregations = [c for c in model.calls if c.prompt == "madam_aggregate_official"]
    assert "Leave out" not in aggregations[0].system and "Jordan Hale" in aggregations[0].system
    answers = {a.answer: a.passage_ids for a in result.extra["answers"]}
    assert answers["1963"] == ["player", "misinfo"] and result.extra["rejected_ids"] == ["noise"]


def test_both_wordings_share_the_aggregators_worked_example():
    from agent.llm.prompts import load_preface, load_prompt

    example = load_preface("madam_example")
    assert example.startswith("Example") and "All Correct Answers:" in example
    for name in ("madam_aggregate", "madam_aggregate_official"):
        assert load_prompt(name).instruction.template.rstrip().endswith("$example")
