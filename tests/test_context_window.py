"""A prompt over the model's context window: the endpoint's refusal read for its excess, the node run again with fewer
worked examples (the run's later prompts sharing the smaller casebook), a clear error where nothing is left to cut.
Real embeddings and re-ranker over given passages; a scripted model at the LLM boundary refuses like llama.cpp's server."""

import pytest

import agent
from agent.errors import ContextOverflowError
from agent.llm.calls import overflow

QUESTION = "What was the population of Stanley in the 2011 census?"
EXTRACT = "DQ 1: What was the population of Stanley, County Durham, in 2011?\nDA 1: 32,219"
GENERATE = "Answer: Stanley, County Durham, had 32,219 people at the 2011 census."
CENSUS = [  # number-heavy given passages: a tokenizer counts each digit group and comma
    {"id": f"census-{i}", "title": "Stanley", "text": "Stanley census table: " + ", ".join(f"{n:,}" for n in range(i * 1000 + 31_000, i * 1000 + 31_090))}
    for i in range(4)
]  # fmt: skip


@pytest.mark.parametrize(
    ("message", "body", "excess"),
    [
        ("This model's maximum context length is 4096 tokens. However, you requested 5326 tokens (5026 in the "
         "messages, 300 in the completion). Please reduce the length of the messages or completion.", {}, 1230),
        ("Requested tokens (5026) exceed context window of 4096", {}, 1230),
        ("This model's maximum context length is 4096 tokens and your request has 3900 input tokens", {}, 104),
        ("the request exceeds the available context size, try increasing it", {"n_prompt_tokens": 4000, "n_ctx": 4096}, 204),
        ("This model's maximum context length is 4096 tokens.", {}, None),
        ("Invalid value for 'temperature'", {}, None),
    ],
)  # fmt: skip
def test_the_excess_is_read_from_each_endpoints_refusal(message, body, excess):
    assert overflow(message, body, reply_tokens=300) == excess


def _unconstrained(scripted) -> tuple[int, str]:
    """rag over CENSUS with room to spare: its extraction prompt's tokens and casebook."""
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE})
    agent.run(QUESTION, method="rag", llm=name, passages=CENSUS)
    extract = model.calls[0]
    return model.context_tokens(extract.messages), extract.system


def test_a_prompt_over_the_window_is_run_again_with_fewer_worked_examples(scripted):
    tokens, book = _unconstrained(scripted)
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE}, context_window=tokens + 300 - 400)
    result = agent.run(QUESTION, method="rag", llm=name, passages=CENSUS)
    assert result.answer.startswith("Stanley, County Durham, had 32,219")
    assert model.refused and set(model.refused) == {"rag_extract"}  # the cut holds for rag_generate: never refused
    assert len(model.refused) <= 2 and model.prompts() == ["rag_extract", "rag_generate"]
    extract, generate = model.calls
    assert 0 < extract.system.count("Example\n") < book.count("Example\n")  # fewer examples, not none
    assert generate.system == extract.system  # one casebook and the passages: a shared, cached prefix
    assert result.usage.total.calls == 2  # a refused request is no call


def test_passages_alone_over_the_window_are_a_clear_error_after_bounded_retries(scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE}, context_window=400)
    with pytest.raises(ContextOverflowError, match=r"prompt 'rag_extract'.*raise AMBIGQA_LOCAL_CTX") as caught:
        agent.run(QUESTION, method="rag", llm=name, passages=CENSUS)
    assert caught.value.excess and caught.value.excess > 0
    assert set(model.refused) == {"rag_extract"} and len(model.refused) in (2, 3) and not model.calls  # then no more


def test_a_node_without_worked_examples_is_not_run_again(scripted):
    name, model = scripted({"madam_agent": "Answer: 32,219. Explanation: the table."}, context_window=300)
    with pytest.raises(ContextOverflowError):
        agent.run(QUESTION, method="madam", llm=name, passages=CENSUS[:1])
    assert model.refused == ["madam_agent"]  # nothing a retry could cut


def test_every_diva_node_that_overflows_runs_again_and_the_run_makes_the_same_calls(scripted):
    from agent.llm.scripted import DEMO_SCRIPT

    unbounded, free = scripted(dict(DEMO_SCRIPT), default="Yes.")
    agent.run(QUESTION, method="diva", llm=unbounded, passages=CENSUS)
    widest = max(free.context_tokens(c.messages) + c.kwargs["max_tokens"] for c in free.calls)
    name, model = scripted(dict(DEMO_SCRIPT), default="Yes.", context_window=widest - 200)
    result = agent.run(QUESTION, method="diva", llm=name, passages=CENSUS)
    assert result.answer and model.refused
    assert all(model.refused.count(p) <= 2 for p in set(model.refused))  # WINDOW_RETRIES a node
    assert model.prompts() == free.prompts()  # the same calls, each within the window


def test_the_cut_belongs_to_the_run_not_to_its_options(scripted):
    """Two runs with one context object: the second starts from the whole casebook again, and the options are as given."""
    from agent.context import make_context
    from agent.sync import run_sync
    from graphs.rag import graph

    tokens, _ = _unconstrained(scripted)
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE}, context_window=tokens + 300 - 400)
    context = make_context(graph.context_schema, {"llm": name, "passages": CENSUS})
    given = context.model_dump()
    first = run_sync(graph.ainvoke({"question": QUESTION}, context=context))
    refused = len(model.refused)
    second = run_sync(graph.ainvoke({"question": QUESTION}, context=context))
    assert refused and len(model.refused) == 2 * refused and first["answer"] == second["answer"]
    assert context.model_dump() == given and "window_cut" not in first  # kept in the run's state, not its output
