"""The router: typing sends N/A questions to rag and ambiguous ones to the configured method; clarify interrupts."""

import pytest
from langgraph.types import Command

import agent
from agent.savers import sqlite_saver
from agent.sync import run_sync
from agent.text import without_citations
from graphs.router import RouterContext, build

QUESTION = "When did the Harry Potter film come out?"
AMBIGUOUS = '##Reason: "come out" may mean the premiere or the release in a country. ##Answer: [AmbLoc]'
CLEAR = "##Reason: the question has one reading. ##Answer: [N/A]"
INTERPRETATIONS = "1: When was the world premiere of the film?\n2: When was the film released in US cinemas?"
SCRIPT = {
    "interpret": INTERPRETATIONS,
    "verify": "Yes",
    "rag_extract": "DQ 1: When was the world premiere?\nDA 1: 4 November 2001",
    "rag_extract_short": "DQ 1: When was the world premiere?\nDA 1: 4 November 2001",  # DIVA's I_e
    "rag_generate": "Answer: It premiered on 4 November 2001.",
    "closed_book": "Final Answer: In 2001.",
}


def test_unambiguous_questions_take_the_rag_route(collection, scripted):
    name, model = scripted({**SCRIPT, "type_ambiguity": CLEAR})
    result = agent.run(QUESTION, method="router", llm=name, collection=collection)
    assert result.extra["route"] == "rag"
    assert model.prompts() == ["type_ambiguity", "rag_extract", "rag_generate"]
    assert without_citations(result.answer) == "It premiered on 4 November 2001." and len(result.passages) == 5


def test_ambiguous_questions_go_to_the_configured_method(collection, scripted):
    name, model = scripted({**SCRIPT, "type_ambiguity": AMBIGUOUS})
    result = agent.run(QUESTION, method="router", llm=name, collection=collection)
    assert result.extra["route"] == "diva"
    assert model.prompts()[:2] == ["type_ambiguity", "interpret"]  # DIVA reuses the router's typing
    assert "verify" in model.prompts() and result.usage.by_node["verify"].calls == 2


def test_the_method_for_ambiguous_questions_is_a_per_run_option(collection, scripted):
    name, model = scripted({**SCRIPT, "type_ambiguity": AMBIGUOUS})
    result = agent.run(QUESTION, method="router", llm=name, collection=collection, ambiguous_method="closed_book")
    assert result.extra["route"] == "closed_book" and model.prompts() == ["type_ambiguity", "closed_book"]


def test_clarify_interrupts_with_the_interpretations_and_answers_the_chosen_one(collection, scripted, tmp_path):
    name, model = scripted({**SCRIPT, "type_ambiguity": AMBIGUOUS})
    db = tmp_path / "checkpoints.sqlite"
    thread = {"configurable": {"thread_id": "t1"}}
    context = RouterContext(llm=name, collection=collection, clarify=True)
    saver = sqlite_saver(str(db))
    first = run_sync(build(saver).ainvoke({"question": QUESTION}, thread, context=context))
    saver.conn.close()
    prompt = first["__interrupt__"][0].value
    assert prompt["interpretations"] == [
        "When was the world premiere of the film?",
        "When was the film released in US cinemas?",
    ]
    saver = sqlite_saver(str(db))  # reopened, as a new process would
    final = run_sync(build(saver).ainvoke(Command(resume=[2]), thread, context=context))
    saver.conn.close()
    assert final["chosen"] == ["When was the film released in US cinemas?"]
    assert without_citations(final["answer"]) == "It premiered on 4 November 2001."
    assert model.prompts() == ["type_ambiguity", "interpret", "rag_extract", "rag_generate"]


@pytest.mark.parametrize(("method", "node"), [("toc", "generate"), ("verdict", "execute"), ("sunar", "decompose")])
def test_the_router_delegates_to_any_method(collection, method, node):
    result = agent.run(QUESTION, method="router", llm="fake", collection=collection, ambiguous_method=method)
    assert result.extra["route"] == method and result.answer
    assert result.usage.by_node["type_ambiguity"].calls == 1 and node in result.usage.by_node


def test_studio_draws_every_delegated_method_as_a_subgraph():
    from graphs.router import graph

    nodes = set(graph.get_graph(xray=True).nodes)
    assert {"diva:verify", "toc:generate", "verdict:execute", "sunar:decompose", "rag:rag_extract"} <= nodes


def test_clarify_offers_at_most_max_interpretations(collection, scripted, tmp_path):
    name, _ = scripted({**SCRIPT, "type_ambiguity": AMBIGUOUS})
    context = RouterContext(llm=name, collection=collection, clarify=True, max_interpretations=1)
    saver = sqlite_saver(str(tmp_path / "checkpoints.sqlite"))
    first = run_sync(
        build(saver).ainvoke({"question": QUESTION}, {"configurable": {"thread_id": "t"}}, context=context)
    )
    saver.conn.close()
    assert first["__interrupt__"][0].value["interpretations"] == ["When was the world premiere of the film?"]


def test_clarify_answers_a_clear_question_through_its_method_under_the_threads_saver(collection, scripted, home):
    """A clear question in clarify mode goes straight to rag, whose async subgraph runs under the synchronous
    checkpointer of the clarify threads (SqliteSaver alone has no async methods)."""
    name, model = scripted({**SCRIPT, "type_ambiguity": CLEAR})
    result = agent.clarify(QUESTION, llm=name, collection=collection)
    assert result.status == "answered" and result.route == "rag" and result.interpretations == []
    assert without_citations(result.answer) == "It premiered on 4 November 2001."
    assert model.prompts() == ["type_ambiguity", "rag_extract", "rag_generate"]


@pytest.mark.parametrize(
    ("picked", "expected"),
    [([2], ["b"]), (["my own reading"], ["my own reading"]), ([0, 4, True], []), (None, []),
     ([{"type": "accept", "args": None}], []),  # accept: all (the node falls back to every option)
     ([{"type": "response", "args": "1, 3"}], ["a", "c"]), ({"type": "response", "args": "1 and 2"}, ["a", "b"]),
     ([{"type": "response", "args": "the 2001 film"}], ["the 2001 film"]),
     ([{"type": "edit", "args": {"action": "choose_interpretations", "args": {"interpretations": ["b", "z"]}}}], ["b", "z"])],
)  # fmt: skip
def test_a_resume_value_picks_by_number_text_or_a_chat_front_ends_human_response(picked, expected):
    from graphs.router import chosen

    assert chosen(picked, ["a", "b", "c"]) == expected
