"""The real embedded model (slow, minutes): selected by `make test`, skipped by `make test-fast`."""

import pytest

import agent

pytestmark = pytest.mark.slow


def test_local_model_answers_a_demo_question_through_rag(home):
    question = "Who plays lord beric in game of thrones?"
    result = agent.run(question, method="rag", llm="local", collection="demo", temperature=0.0)
    assert len(result.passages) == 5
    assert len(result.answer.split()) >= 10
    assert result.usage.total.calls >= 2
    assert result.usage.by_node["rag_extract"].input_tokens > 500  # instructions, few-shot and 5 passages
    assert result.usage.by_node["rag_generate"].output_tokens > 0
    generate = result.usage.by_node["rag_generate"]  # the server reports its prefix-cache hits: examples and passages
    assert generate.cached_tokens > 0.8 * generate.input_tokens, generate
    grounded = " ".join([result.answer] + [d.answer for d in result.disambiguations]).lower()
    assert "dormer" in grounded or "david scott" in grounded, result.answer
