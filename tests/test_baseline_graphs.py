"""closed_book and rag with a scripted LLM over real Chroma: routes, outputs, usage."""

import pytest

import agent
from agent.errors import CollectionError, ConfigError, InvalidQuestionError, UnknownMethodError
from agent.text import PASSAGES_HEADING

QUESTION = "When did the Harry Potter film come out?"
EXTRACT = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001"
GENERATE = "Answer: The film premiered in London on 4 November 2001 and reached US cinemas on 16 November 2001."


def test_rag_runs_retrieve_extract_generate_and_cites_passages(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": GENERATE})
    nodes = []
    result = agent.run(QUESTION, method="rag", llm=name, collection=collection, on_node=lambda n, u, s: nodes.append(n))
    assert nodes == ["retrieve", "rag_extract", "rag_generate"]
    assert model.prompts() == ["rag_extract", "rag_generate"]
    assert len(result.passages) == 5
    assert result.answer.startswith("The film premiered in London")
    by_answer = {d.answer: d.passage_ids for d in result.disambiguations}
    assert by_answer == {"4 November 2001": ["hp-premiere"], "16 November 2001": ["hp-us"]}
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
    assert result.answer == "It came out in November 2001, first in London."
    assert result.passages == [] and result.usage.total.calls == 1
    assert "Question: " + QUESTION in model.calls[0].user
    talk = " This reading is directly stated in the final answer provided. It depends on the context."
    name, _ = scripted({"closed_book": "Final Answer: It came out in November 2001, first in London." + talk})
    assert (
        agent.run(QUESTION, method="closed_book", llm=name).answer == "It came out in November 2001, first in London."
    )


def test_an_answer_cut_at_max_tokens_ends_with_its_last_whole_sentence(collection, scripted):
    from langchain_core.messages import AIMessage

    cut = AIMessage(content=GENERATE + " It was later shown in Lon", response_metadata={"finish_reason": "length"})
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": cut, "closed_book": cut})
    for method in ("rag", "closed_book"):
        result = agent.run(QUESTION, method=method, llm=name, collection=collection)
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

    contract = {"answer", "disambiguations", "passages", "retrieved", "usage"}
    for graph, own in ((closed_book, set()), (rag, {"reasoning"})):  # rag's: the short style's reasoning
        assert graph.get_input_jsonschema()["required"] == ["question"]
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


NARRATED = (
    "Answer: The film premiered in London on 4 November 2001. This is evident from the passage retrieved for the "
    "question, which states the date."
)
COPIED = "Answer: It was released in cinemas in the United States and the United Kingdom on 16 November 2001 too."


def test_sentences_that_narrate_the_sources_are_dropped_from_the_answer(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": NARRATED})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate"]
    assert result.answer == "The film premiered in London on 4 November 2001."


def test_an_answer_that_only_narrates_its_sources_is_asked_for_again(collection, scripted):
    only_talk = "Answer: This can be determined from the disambiguation question and the passages."
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": [only_talk, GENERATE]})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate"]
    assert result.answer.startswith("The film premiered in London")


def test_an_answer_that_copies_a_passage_at_length_is_rephrased_in_the_same_conversation(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": COPIED, "rag_rephrase": GENERATE})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_rephrase"]
    assert result.answer.startswith("The film premiered in London")
    rephrase = model.calls[2]
    assert rephrase.messages[-2].content == COPIED  # it continues the answer's conversation: a cached prefix
    assert "released in cinemas in united states and united kingdom on 16 november 2001»" in rephrase.user
    assert result.usage.by_node["rag_generate"].calls == 2


def test_when_every_rephrasing_still_copies_the_answer_is_written_from_the_pairs_alone(collection, scripted):
    from_pairs = (
        "Answer: The film had its premiere on 4 November 2001; American cinemas showed it from 16 November 2001."
    )
    script = {"rag_extract": EXTRACT, "rag_generate": COPIED, "rag_rephrase": COPIED + " Indeed.",
              "rag_generate_pairs": from_pairs}  # fmt: skip
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", *["rag_rephrase"] * 3, "rag_generate_pairs"]
    assert result.answer == from_pairs.removeprefix("Answer: ")
    pairs_call = model.calls[-1]
    assert "DA 2: 16 November 2001" in pairs_call.user
    assert PASSAGES_HEADING in model.calls[1].system and PASSAGES_HEADING not in pairs_call.system  # nothing to copy
    assert pairs_call.system == model.calls[1].system.split(f"\n\n{PASSAGES_HEADING}")[0]  # the casebook, cached
    assert result.usage.by_node["rag_generate"].calls == 5


def test_an_answer_from_the_pairs_must_state_every_short_answer_else_the_pairs_are_listed(collection, scripted):
    vague = "Answer: The question is ambiguous because it does not say which release is meant."
    script = {"rag_extract": EXTRACT, "rag_generate": COPIED, "rag_rephrase": COPIED, "rag_generate_pairs": vague}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts().count("rag_generate_pairs") == 3  # asked again while a short answer is missing
    assert result.answer == (
        "When was the world premiere of the film? 4 November 2001. When was it released in US cinemas? 16 November 2001."
    )


def test_the_listed_pairs_leave_out_an_answer_that_is_itself_a_quote(collection, scripted):
    quoting_da = EXTRACT.replace("DA 2: 16 November 2001", "DA 2: " + COPIED.removeprefix("Answer: "))
    vague = "Answer: The question is ambiguous because it does not say which release is meant."
    script = {"rag_extract": quoting_da, "rag_generate": COPIED, "rag_rephrase": COPIED, "rag_generate_pairs": vague}
    name, _ = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert result.answer == "When was the world premiere of the film? 4 November 2001."  # the DA that quotes is gone


def test_an_answer_from_the_pairs_that_states_none_of_them_is_refused(collection, scripted):
    long_answer = "DQ 1: When is the cake eaten?\nDA 1: on the sixth of January during the feast of the Three Kings"
    echo = "Answer: The film premiered in London on 4 November 2001."  # a reply that ignores the pairs
    script = {"rag_extract": long_answer, "rag_generate": COPIED, "rag_rephrase": COPIED, "rag_generate_pairs": echo}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts().count("rag_generate_pairs") == 3
    assert result.answer == "When is the cake eaten? on the sixth of January during the feast of the Three Kings."


def test_an_answer_from_the_pairs_that_copies_as_much_keeps_the_first_answer(collection, scripted):
    as_much = COPIED + " It premiered on 4 November 2001."
    script = {"rag_extract": EXTRACT, "rag_generate": COPIED, "rag_rephrase": COPIED, "rag_generate_pairs": as_much}
    name, _ = scripted(script)
    assert agent.run(QUESTION, llm=name, collection=collection).answer == COPIED.removeprefix("Answer: ")


NOVEL = "The novel by J. K. Rowling was first published in the United Kingdom by Bloomsbury on 26 June 1997."


def test_sentences_that_still_copy_after_every_rewrite_go_unless_they_hold_a_pair_answer(collection, scripted):
    both = "The film premiered in London on 4 November 2001 and reached US cinemas on 16 November 2001."
    first = f"Answer: {both} {NOVEL}"  # the second sentence quotes a passage and states no pair
    vague = "Answer: The question is ambiguous because it does not say which release is meant."
    script = {"rag_extract": EXTRACT, "rag_generate": first, "rag_rephrase": first, "rag_generate_pairs": vague}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", *["rag_rephrase"] * 3, *["rag_generate_pairs"] * 3]
    assert result.answer == both  # before the pairs would be listed
    quoting_a_pair = "Answer: The film premiered in London on 4 November 2001. " + COPIED.removeprefix("Answer: ")
    script |= {"rag_generate": quoting_a_pair, "rag_rephrase": quoting_a_pair, "rag_generate_pairs": quoting_a_pair}
    # written from the pairs, it copies as much: the first answer stays, whole, as its quote holds a pair's answer
    name, _ = scripted(script)
    assert agent.run(QUESTION, llm=name, collection=collection).answer == quoting_a_pair.removeprefix("Answer: ")


def test_an_answer_without_pairs_that_still_copies_is_cut_back_to_its_leading_clause(collection, scripted):
    copying = (
        "Answer: The first film came out in 2001, when it was released in cinemas in the United States and the United "
        "Kingdom on 16 November 2001 too."
    )  # no pairs to write it from, and every rephrasing still copies
    script = {"rag_extract": "I don't know.", "rag_generate": copying, "rag_rephrase": copying}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection, retries=1)
    assert model.prompts() == [*["rag_extract"] * 2, "rag_generate", *["rag_rephrase"] * 2]
    assert result.answer == "The first film came out in 2001."  # before: the whole quote stood


def test_an_answer_that_carries_on_in_the_dq_da_format_ends_before_it(collection, scripted):
    carried_on = GENERATE + " DA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?"
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": carried_on})
    assert agent.run(QUESTION, llm=name, collection=collection).answer == GENERATE.removeprefix("Answer: ")


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


def test_an_answer_written_as_a_list_reads_as_sentences_without_its_source_talk(collection, scripted):
    listed_reply = (
        'Answer: The question "When did it come out?" can be read in two ways, each with its own passage:\n'
        "1. The world premiere was on 4 November 2001\n2. US cinemas showed it from 16 November 2001"
    )
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": listed_reply})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert result.answer == "The world premiere was on 4 November 2001. US cinemas showed it from 16 November 2001"


LOST = (
    "Answer: The film came out more than once. This passage clearly shows it premiered on 4 November 2001, "
    "a date the passages confirm. It reached US cinemas on 16 November 2001."
)


def test_an_answer_whose_dropped_source_talk_carried_an_answer_is_restated(collection, scripted):
    restated = "Answer: It premiered on 4 November 2001 and reached US cinemas on 16 November 2001."
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": LOST, "rag_restate": restated})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_restate"]
    restate = model.calls[2]
    assert restate.messages[-2].content == LOST and "- 4 November 2001" in restate.user
    assert "16 November 2001" not in restate.user  # still stated: not asked for
    assert result.answer == restated.removeprefix("Answer: ")


def test_a_restated_answer_must_state_what_was_lost_and_what_was_kept_else_the_first_stays(collection, scripted):
    only_lost = "Answer: It premiered on 4 November 2001."  # the lost answer, but not the one the first answer kept
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": LOST, "rag_restate": only_lost})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts().count("rag_restate") == 3  # the run's 2 retries
    assert result.answer == "The film came out more than once. It reached US cinemas on 16 November 2001."


def test_a_rephrasing_that_drops_an_answer_the_first_stated_is_refused(collection, scripted):
    from_pairs = "Answer: The film had its premiere on 4 November 2001; US cinemas showed it from 16 November 2001."
    script = {"rag_extract": EXTRACT, "rag_generate": COPIED, "rag_rephrase": "Answer: US cinemas showed it later.",
              "rag_generate_pairs": from_pairs}  # fmt: skip
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", *["rag_rephrase"] * 3, "rag_generate_pairs"]
    assert result.answer == from_pairs.removeprefix("Answer: ")


ONE_READING = "Answer: The film premiered in London on 4 November 2001."


def test_an_answer_that_leaves_out_a_reading_gets_a_sentence_for_it(collection, scripted):
    sentence = "Answer: US cinemas showed it from 16 November 2001."
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": ONE_READING, "rag_generate_pairs": sentence})
    result = agent.run(QUESTION, llm=name, collection=collection, complete_readings=True)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate_pairs"]
    written = model.calls[2]
    assert "When was it released in US cinemas?" in written.user and "16 November 2001" in written.user
    assert "world premiere" not in written.user and PASSAGES_HEADING not in written.system  # no passages to copy
    assert (
        result.answer == "The film premiered in London on 4 November 2001. US cinemas showed it from 16 November 2001."
    )


NOVEL_PAIRS = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\nDQ 2: When was the novel first published?\nDA 2: 1997"


@pytest.mark.parametrize(
    ("extract", "bare", "added"),
    [(EXTRACT, "16 November 2001", "When was it released in US cinemas? 16 November 2001."),
     (NOVEL_PAIRS, "1997", "When was the novel first published? 1997.")],  # one word: no long answer, still the reading
)  # fmt: skip
def test_a_reading_written_as_its_bare_answer_is_added_with_its_question(collection, scripted, extract, bare, added):
    name, model = scripted({"rag_extract": extract, "rag_generate": ONE_READING, "rag_generate_pairs": bare})
    result = agent.run(QUESTION, llm=name, collection=collection, complete_readings=True)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate_pairs"]  # no retry: the answer is there
    assert result.answer == f"The film premiered in London on 4 November 2001. {added}"
    # not a dangling "16 November 2001" that says nothing of what it answers


def test_sentences_that_state_none_of_the_left_out_readings_are_not_added(collection, scripted):
    script = {"rag_extract": EXTRACT, "rag_generate": ONE_READING, "rag_generate_pairs": "Answer: It came out in 2001."}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection, complete_readings=True)
    assert result.answer == ONE_READING.removeprefix("Answer: ")
    assert model.prompts().count("rag_generate_pairs") == 3  # the run's 2 retries


def test_rag_leaves_an_answer_that_skips_a_reading_as_it_is_by_default(collection, scripted):
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": ONE_READING})
    assert agent.run(QUESTION, llm=name, collection=collection).answer == ONE_READING.removeprefix("Answer: ")
    assert model.prompts() == ["rag_extract", "rag_generate"]


def _borrowed_year() -> str:
    """A year the question's worked examples state and no passage of the tiny collection holds."""
    from graphs.rag import RagContext

    assert "2014" in RagContext().casebook(QUESTION)
    return "2014"


def test_a_sentence_that_borrows_a_number_from_the_worked_examples_is_dropped_and_its_reading_written_again(
    collection, scripted
):
    borrowed = f"Answer: The film premiered in London on 4 November 2001. It reached US cinemas in {_borrowed_year()}."
    sentence = "Answer: US cinemas showed it from 16 November 2001."
    name, model = scripted({"rag_extract": EXTRACT, "rag_generate": borrowed, "rag_generate_pairs": sentence})
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate_pairs"]
    assert "16 November 2001" in model.calls[2].user and "world premiere" not in model.calls[2].user
    assert (
        result.answer == "The film premiered in London on 4 November 2001. US cinemas showed it from 16 November 2001."
    )


def test_an_answer_left_with_nothing_after_the_borrowed_numbers_lists_the_pairs_when_they_cannot_be_written(
    collection, scripted
):
    borrowed = f"Answer: The film came out on 23 May {_borrowed_year()} in North America."
    script = {"rag_extract": EXTRACT, "rag_generate": borrowed, "rag_generate_pairs": "Answer: It came out."}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts().count("rag_generate_pairs") == 3  # the run's 2 retries
    assert result.answer == (
        "When was the world premiere of the film? 4 November 2001. When was it released in US cinemas? 16 November 2001."
    )


def test_a_date_written_with_a_day_of_the_worked_examples_is_cut_to_the_year_its_pair_gives(collection, scripted):
    from graphs.rag import RagContext

    assert "July 31" in RagContext().casebook(QUESTION)  # no passage of the tiny collection holds a 31
    extract = "DQ 1: When was the film released?\nDA 1: 2001"
    borrowed = f"Answer: The film was released on 23 May {_borrowed_year()}."
    script = {
        "rag_extract": extract,
        "rag_generate": borrowed,
        "rag_generate_pairs": "Answer: It came out on July 31, 2001.",
    }
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate_pairs"]
    assert result.answer == "It came out in 2001."  # not the listing "When was the film released? 2001."


def test_a_sentence_written_for_a_left_out_reading_must_not_borrow_a_number_either(collection, scripted):
    borrowed_too = f"Answer: US cinemas showed it from 16 November 2001, and again in {_borrowed_year()}."
    sentence = "Answer: US cinemas showed it from 16 November 2001."
    script = {"rag_extract": EXTRACT, "rag_generate": ONE_READING, "rag_generate_pairs": [borrowed_too, sentence]}
    name, model = scripted(script)
    result = agent.run(QUESTION, llm=name, collection=collection, complete_readings=True)
    assert model.prompts() == ["rag_extract", "rag_generate", "rag_generate_pairs", "rag_generate_pairs"]
    assert result.answer.endswith(" US cinemas showed it from 16 November 2001.")


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
