"""closed_book and rag with a scripted LLM over real Chroma: routes, outputs, usage."""

import pytest

import agent
from agent.errors import CollectionError, ConfigError, InvalidQuestionError, UnknownMethodError

QUESTION = "When did the Harry Potter film come out?"
EXTRACT = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001"
GENERATE = "Answer: The film premiered in London on 4 November 2001 and reached US cinemas on 16 November 2001."


def test_rag_runs_retrieve_extract_generate_and_cites_passages(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE})
    nodes = []
    result = agent.run(QUESTION, method="rag", llm=name, collection=collection, on_node=lambda n, u, s: nodes.append(n))
    assert nodes == ["retrieve", "rag_extract", "rag_generate", "check_answer", "finish_answer"]
    assert model.prompts() == ["rag_extract", "rag_generate"]
    assert len(result.passages) == 5
    by_answer = {d.answer: d.passage_ids for d in result.disambiguations}
    assert by_answer == {"4 November 2001": ["hp-premiere"], "16 November 2001": ["hp-us"]}
    number = {p.id: n for n, p in enumerate(result.passages, 1)}  # the sentence cites both readings' passages
    marks = "".join(f"[{n}]" for n in sorted([number["hp-premiere"], number["hp-us"]]))
    assert result.answer == GENERATE.removeprefix("Answer: ").removesuffix(".") + f" {marks}."
    assert result.usage.total.calls == 2
    assert set(result.usage.by_node) == {"rag_extract", "rag_generate"}
    assert result.usage.total.input_tokens == sum(u.input_tokens for u in result.usage.by_node.values()) > 0


def test_rag_top_k_is_a_per_run_option(collection, scripted):
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE})
    assert len(agent.run(QUESTION, llm=name, collection=collection, top_k=2).passages) == 2


def test_rag_generation_sees_the_extracted_pairs(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE})
    agent.run(QUESTION, llm=name, collection=collection)
    generate_call = model.calls[1]
    assert "DA 2: 16 November 2001" in generate_call.user
    assert "[1]" in generate_call.system and QUESTION in generate_call.user  # passages shared, the question last


def test_unparseable_extraction_falls_back_to_no_pairs_and_still_answers(collection, scripted):
    name, model = scripted({"rag_extract": "I don't know.", "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection, retries=1)
    assert result.disambiguations == []
    assert result.answer
    assert model.prompts() == ["rag_extract", "rag_extract", "rag_generate"]
    assert result.usage.by_node["rag_extract"].calls == 2


def test_closed_book_is_one_call_without_passages(collection, scripted):
    name, model = scripted({"closed_book": "Final Answer: It came out in November 2001, first in London."})
    result = agent.run(QUESTION, method="closed_book", llm=name, collection=collection)
    assert result.answer == "It came out in November 2001, first in London."  # the echoed label goes, nothing else
    assert result.passages == [] and result.usage.total.calls == 1
    assert "Question: " + QUESTION in model.calls[0].user


def test_an_answer_cut_at_max_tokens_ends_with_its_last_whole_sentence(collection, scripted):
    from langchain_core.messages import AIMessage

    cut = AIMessage(content=GENERATE + " It was later shown in Lon", response_metadata={"finish_reason": "length"})
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": cut, "closed_book": cut})
    for method in ("rag", "closed_book"):
        options = {"citations": False} if method == "rag" else {}  # closed_book reads no passages and cites none
        result = agent.run(QUESTION, method=method, llm=name, collection=collection, **options)
        assert result.answer == GENERATE.removeprefix("Answer: ")  # not "... shown in Lon"
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE + " It was later shown in Lon"})
    assert agent.run(QUESTION, llm=name, collection=collection).answer.endswith("shown in Lon")  # finished: as is


@pytest.mark.parametrize("question", ["", "   \n\t", "x" * 2001])
def test_empty_or_oversized_questions_are_rejected(question):
    with pytest.raises(InvalidQuestionError):
        agent.run(question, llm="fake")


def test_unknown_method_lists_the_methods():
    with pytest.raises(UnknownMethodError, match="closed_book, rag"):
        agent.run(QUESTION, method="magic", llm="fake")


def test_missing_collection_is_a_typed_error(home, scripted):
    name, _ = scripted({})
    with pytest.raises(CollectionError, match="run `ambigqa ingest"):
        agent.run(QUESTION, llm=name, collection="absent")


def test_graphs_export_the_shared_contract():
    from graphs.closed_book import graph as closed_book
    from graphs.rag import graph as rag

    contract = {"answer", "disambiguations", "passages", "retrieved", "usage", "messages"}
    for graph, own in (
        (closed_book, set()),
        (rag, {"reasoning", "answer_review"}),
    ):  # rag: the short style's reasoning, the answer step's review
        assert set(graph.get_input_jsonschema()["properties"]) == {"question", "messages"}
        assert set(graph.get_output_jsonschema()["properties"]) == contract | own


def test_arun_answers_concurrent_questions_on_one_event_loop(collection, scripted):
    import asyncio

    # each call takes 1 s, longer than a busy machine takes to retrieve for the next question, so the calls overlap
    name, model = scripted({"rag_extract": "DQ 1: When?\nDA 1: 2001", "rag_generate": GENERATE}, latency=1.0)
    nodes = []

    async def main():
        ticks = 0

        async def ticker():  # the loop stays free while the questions run
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        clock = asyncio.create_task(ticker())
        runs = [
            agent.arun(QUESTION, llm=name, collection=collection, on_node=lambda n, u, s: nodes.append(n))
            for _ in range(3)
        ]
        results = await asyncio.gather(*runs)
        clock.cancel()
        return results, ticks

    results, ticks = asyncio.run(main())
    assert [r.answer for r in results] == [results[0].answer] * 3 and results[0].usage.total.calls == 2
    assert ticks >= 4 and nodes.count("rag_generate") == 3
    calls = sorted(model.calls, key=lambda c: c.started)
    assert any(b.started < a.ended for a, b in zip(calls, calls[1:]))  # the questions overlapped
    with pytest.raises(ConfigError, match="rag has no option bogus"):
        asyncio.run(agent.arun(QUESTION, llm=name, collection=collection, bogus=1))


def test_an_answer_that_carries_on_in_the_dq_da_format_ends_before_it(collection, scripted):
    carried_on = GENERATE + " DA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?"
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": carried_on})
    assert agent.run(QUESTION, llm=name, collection=collection, citations=False).answer == GENERATE.removeprefix(
        "Answer: "
    )


def test_rag_short_style_is_the_multi_hop_baseline_one_reasoned_call(collection, scripted):
    reply = "Reasoning: [1] dates the premiere.\nSo the answer is: 4 November 2001"
    name, model = scripted({"rag_short": reply})
    nodes = []
    result = agent.run(QUESTION, method="rag", llm=name, collection=collection, answer_style="short", top_k=3,
                       first_stage="bm25", on_node=lambda n, u, s: nodes.append(n))  # fmt: skip
    assert nodes == ["retrieve", "short_answer"] and model.prompts() == ["rag_short"]
    assert result.answer == "4 November 2001" and result.disambiguations == [] and len(result.passages) == 3
    assert result.extra == {"reasoning": "[1] dates the premiere."}  # the reasoning behind the short answer
    assert "[3] " in model.calls[0].user and result.usage.by_node["short_answer"].calls == 1


PASSAGE_AS_ANSWER = (
    "DQ 1: When was the world premiere of the film?\nDA 1: The film had its world premiere at the Odeon Leicester "
    "Square in London on 4 November 2001, and it was a great success with critics and audiences alike.\n"
    "DQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001"
)


def test_an_extracted_answer_that_is_a_whole_passage_is_asked_for_again_short(collection, scripted):
    shortened = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001"
    name, model = scripted({"rag_extract": PASSAGE_AS_ANSWER, "rag_shorten": shortened, "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_shorten", "rag_generate"]
    shorten = model.calls[1]
    assert shorten.messages[-2].content == PASSAGE_AS_ANSWER  # the same conversation: its prefix is cached
    assert "DQ 1: When was the world premiere of the film?" in shorten.user and "DQ 2" not in shorten.user
    by_answer = {d.answer: d.passage_ids for d in result.disambiguations}
    assert by_answer == {"4 November 2001": ["hp-premiere"], "16 November 2001": ["hp-us"]}
    assert result.usage.by_node["rag_extract"].calls == 2


def test_an_extracted_answer_that_stays_long_is_kept_after_the_retries(collection, scripted):
    name, model = scripted(
        {"rag_extract": PASSAGE_AS_ANSWER, "rag_shorten": PASSAGE_AS_ANSWER, "rag_generate": GENERATE}
    )
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", *["rag_shorten"] * 3, "rag_generate"]  # the run's 2 retries
    assert result.disambiguations[0].answer.startswith("The film had its world premiere")
    assert result.answer.startswith("The film premiered in London")


def test_a_pair_whose_answer_only_the_worked_examples_state_is_dropped_and_the_models_own_knowledge_stays(
    collection, scripted
):
    from graphs.rag import RagContext

    book = RagContext().casebook(QUESTION)
    assert "Rupert Grint" in book and "Chris Columbus" not in book  # no passage of the tiny collection holds either
    extract = f"{EXTRACT}\nDQ 3: Who played Ron in the film?\nDA 3: Rupert Grint\nDQ 4: Who directed it?\nDA 4: Chris Columbus"
    name, model = scripted({"rag_extract": extract, "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert [(p.answer, bool(p.passage_ids)) for p in result.disambiguations] == [
        ("4 November 2001", True), ("16 November 2001", True), ("Chris Columbus", False)
    ]  # fmt: skip
    assert "Rupert Grint" not in model.calls[1].user and "Chris Columbus" in model.calls[1].user


def test_a_pair_whose_answer_says_there_is_none_is_no_reading(collection, scripted):
    extract = f"{EXTRACT}\nDQ 3: When did it come out on DVD?\nDA 3: Not specified in the passage"
    name, model = scripted({"rag_extract": extract, "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert [p.answer for p in result.disambiguations] == ["4 November 2001", "16 November 2001"]
    assert "DVD" not in model.calls[1].user


def test_a_misnumbered_pair_is_a_reading_where_it_is_new_short_and_held_by_a_passage(collection, scripted):
    extract = (
        "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\n"
        "DQ 2: When was it released in US cinemas?\nDA 1: 16 November 2001\n"
        "DQ 3: When did it reach UK cinemas?\nDA 1: 16 November 2001\n"
        "DQ 4: Who published the novel?\nDA 1: Bloomsbury\n"
        "DQ 5: When did it come out on DVD?\nDA 1: 11 May 2002"
    )
    name, model = scripted({"rag_extract": extract, "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert [(p.answer, p.passage_ids) for p in result.disambiguations] == [
        ("4 November 2001", ["hp-premiere"]), ("16 November 2001", ["hp-us"])
    ]  # fmt: skip
    assert "Bloomsbury" not in model.calls[1].user and "DVD" not in model.calls[1].user


def test_a_pair_repeated_word_for_word_is_one_reading(collection, scripted):
    premiere = "When was the world premiere of the film?"
    extract = (
        f"DQ 1: {premiere}\nDA 1: 4 November 2001\n"
        "DQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001\n"
        f"DQ 3: {premiere}\nDA 3: 4 November 2001.\n"
        f"DQ 4: {premiere.upper()}\nDA 4: 4 NOVEMBER 2001"
    )
    name, model = scripted({"rag_extract": extract, "rag_generate": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert [(d.question, d.answer) for d in result.disambiguations] == [
        (premiere, "4 November 2001"), ("When was it released in US cinemas?", "16 November 2001")
    ]  # fmt: skip
    assert "DQ 3" not in model.calls[1].user  # the answer prompt lists each reading once


def test_pairs_that_differ_in_their_answer_all_stay():
    from agent.schemas import QAPair
    from agent.steps.rac import distinct_pairs

    last = "Who was the last person executed in Canada?"
    pairs = [
        QAPair(question=last, answer=a) for a in ("Arthur Lucas", "Ronald Turpin", "Arthur Lucas and Ronald Turpin")
    ]
    other = QAPair(question="Who was hanged with Ronald Turpin?", answer="Arthur Lucas")
    assert distinct_pairs([*pairs, other, pairs[1]]) == [*pairs, other]
