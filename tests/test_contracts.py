"""One output contract per method: the graph's output schema is what agent.run returns, nothing internal leaks."""

import pytest

import agent
from agent.registry import METHODS, load_graph
from agent.sync import run_sync

QUESTION = "When did the Harry Potter film come out?"
CONTRACT = {"answer", "disambiguations", "passages", "retrieved", "usage", "messages"}  # messages: agent.chat
OWN_FIELDS = {
    "closed_book": set(),
    "rag": {"reasoning", "answer_review"},
    "diva": {
        "ambiguity_types",
        "ambiguity_reason",
        "interpretations",
        "kept",
        "verdicts",
        "grade",
        "route",
        "conflicts",
        "answer_review",
    },
    "toc": {"tree", "stop_reason", "expansions", "restored", "answer_review"},
    "verdict": {
        "relaxed_query",
        "candidates",
        "abstentions",
        "unparsed",
        "ungrounded",
        "cluster_labels",
        "conflicts",
        "answer_review",
    },
    "sunar": {"hops", "reasoning"},
    "madam": {"answers", "rejected_ids", "rounds", "stop_reason"},
    "router": {"ambiguity_types", "ambiguity_reason", "route", "interpretations", "chosen"},
}


OPTIONAL = {"conflicts"}  # present only when the run settles conflicts (settle_conflicts)
# rag's "reasoning": only with answer_style=short (rag is not held to every field below)


def test_every_method_has_a_declared_contract():
    assert set(OWN_FIELDS) == set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_input_schema_asks_for_the_question_or_chat_messages(method):
    schema = load_graph(method).get_input_jsonschema()
    assert set(schema["properties"]) == {"question", "messages"} and not schema.get("required")


@pytest.mark.parametrize("method", METHODS)
def test_output_schema_is_the_contract_plus_the_methods_own_fields(method):
    assert set(load_graph(method).get_output_jsonschema()["properties"]) == CONTRACT | OWN_FIELDS[method]


@pytest.mark.parametrize("method", METHODS)
def test_run_returns_exactly_the_output_schema(collection, method):
    result = agent.run(QUESTION, method=method, llm="fake", collection=collection)
    assert result.answer
    assert set(result.extra) <= OWN_FIELDS[method]
    if method in ("diva", "toc", "verdict", "sunar", "madam"):
        assert set(result.extra) == OWN_FIELDS[method] - OPTIONAL  # every field the docs promise is there


@pytest.mark.parametrize("method", METHODS)
def test_retrieved_is_what_the_method_retrieved_and_none_without_retrieval(collection, method):
    result = agent.run(QUESTION, method=method, llm="fake", collection=collection)
    if method == "closed_book":
        assert result.retrieved is None
    else:
        assert result.retrieved and len({p.id for p in result.retrieved}) == len(result.retrieved)


@pytest.mark.parametrize("method", METHODS)
def test_chat_messages_in_give_the_answer_as_an_ai_message(collection, method):
    """What a chat front end sends (a messages list) is answered: the last human message is the question, and the
    answer comes back as an AI message carrying its interpretations and the passages it read."""
    from langchain_core.messages import AIMessage, HumanMessage

    from agent.context import make_context

    graph = load_graph(method)
    context = make_context(graph.context_schema, {"llm": "fake", "collection": collection})
    earlier = [HumanMessage("Who wrote Hamlet?"), AIMessage("Shakespeare.")]
    out = run_sync(graph.ainvoke({"messages": [*earlier, HumanMessage(QUESTION)]}, context=context))
    assert [m.type for m in out["messages"]] == ["human", "ai", "human", "ai"]  # the new turn answered, once
    reply = out["messages"][-1]
    assert reply.content.startswith(out["answer"].strip()) and out["answer"]
    details = reply.additional_kwargs["ambigqa"]
    assert details["passage_ids"] == [p.id for p in out.get("passages", [])]
    for p in out.get("passages", []):
        assert f"[{p.id}]" in reply.content
    if len(out.get("disambiguations", [])) > 1:
        assert "Interpretations:" in reply.content
        assert [d["question"] for d in details["disambiguations"]] == [d.question for d in out["disambiguations"]]


def test_a_question_given_as_text_joins_the_messages_as_the_human_turn(collection):
    from agent.context import make_context

    graph = load_graph("rag")
    context = make_context(graph.context_schema, {"llm": "fake", "collection": collection})
    out = run_sync(graph.ainvoke({"question": QUESTION}, context=context))
    assert [(m.type, m.content) for m in out["messages"][:1]] == [("human", QUESTION)]
    assert out["messages"][-1].type == "ai"


@pytest.mark.parametrize("given", [{"question": "   "}, {"messages": [{"role": "assistant", "content": "hi"}]}, {}])
def test_a_graph_invoked_directly_refuses_a_bad_question_with_the_clis_error(collection, given):
    from agent.context import make_context
    from agent.errors import InvalidQuestionError

    graph = load_graph("rag")
    with pytest.raises(InvalidQuestionError, match="the question is empty"):
        run_sync(
            graph.ainvoke(given, context=make_context(graph.context_schema, {"llm": "fake", "collection": collection}))
        )
