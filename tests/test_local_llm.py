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


def test_a_prompt_family_keeps_its_instructions_prefilled_across_another_family(home):
    """The embedded server keeps the context of a prompt family it leaves (llama_server.PrefixStates): after an
    unrelated prompt, the next prompt of the first family prefills only what follows their shared instructions."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from agent.llm.factory import get_chat_model
    from agent.llm.usage import call_usage

    model = get_chat_model("local").bind(max_tokens=4, temperature=0.0)
    rules = " ".join(f"Rule {n}: answer with one word, the name of the capital city asked for." for n in range(1, 25))

    def ask(system: str, question: str):
        return call_usage(model.invoke([SystemMessage(system), HumanMessage(question)]), 0.0)

    first = ask(rules, "What is the capital of France?")
    other = ask("You translate English words into German, one word only.", "house")
    again = ask(rules, "What is the capital of Italy?")
    assert first.input_tokens > 300 and other.cached_tokens < 10
    assert again.cached_tokens >= first.input_tokens - 20, (first, again)  # all but the question and turn markers
