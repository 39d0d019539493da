"""One output contract per method: the graph's output schema is what agent.run returns, nothing internal leaks."""

import pytest

import agent
from agent.registry import METHODS, load_graph

QUESTION = "When did the Harry Potter film come out?"
CONTRACT = {"answer", "disambiguations", "passages", "retrieved", "usage"}
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
def test_input_schema_asks_only_for_the_question(method):
    schema = load_graph(method).get_input_jsonschema()
    assert set(schema["properties"]) == {"question"} and schema["required"] == ["question"]


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
