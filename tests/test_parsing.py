import pytest

from agent.llm.parsing import (
    ParseError,
    extract_json,
    misnumbered_disambiguations,
    parse_ambiguity,
    parse_disambiguations,
    parse_long_answer,
    parse_numbered_list,
    parse_true_false,
    parse_yes_no,
    sentences,
    whole_sentences,
)


def test_dq_da_pairs_one_per_line():
    text = "DQ 1: When was the world premiere?\nDA 1: 4 November 2001\nDQ 2: When was the US release?\nDA 2: 16 November 2001"
    pairs = parse_disambiguations(text)
    assert [(p.question, p.answer) for p in pairs] == [
        ("When was the world premiere?", "4 November 2001"),
        ("When was the US release?", "16 November 2001"),
    ]


def test_dq_da_pairs_inline_as_in_the_paper_table():
    text = "Disambiguations: DQ 1: Who scored most in a career? DA 1: Josef Bican DQ 2: Who scored most in one game? DA 2: Archie Thompson"
    pairs = parse_disambiguations(text)
    assert [p.answer for p in pairs] == ["Josef Bican", "Archie Thompson"]


def test_dq_da_stops_before_a_trailing_answer_section():
    pairs = parse_disambiguations("DQ 1: Q one?\nDA 1: A one\n\nAnswer: a long answer that is not part of DA 1.")
    assert pairs[0].answer == "A one"


def test_a_da_ends_where_the_next_da_begins_even_without_its_dq():
    text = "DQ 1: Who does Hannah Montana pick?\nDA 1: Jake DA 2: Jesse"  # as I_e wrote it on ASQA dev
    assert [p.answer for p in parse_disambiguations(text)] == ["Jake"]  # not "Jake DA 2: Jesse"
    assert misnumbered_disambiguations("DQ 3: Who sang it? DA 1: Ethel Merman DA 2: Ray Middleton")[0].answer == (
        "Ethel Merman"
    )


def test_dq_da_from_constrained_json():
    pairs = parse_disambiguations(
        '{"disambiguations": [{"question": "Q?", "answer": "A"}, {"question": "", "answer": "x"}]}'
    )
    assert [(p.question, p.answer) for p in pairs] == [("Q?", "A")]


def test_a_da_numbered_unlike_its_dq_is_left_to_misnumbered_disambiguations():
    text = (
        "DQ 1: When did the first trailer come out?\nDA 1: December 14, 2016\n\n"
        "DQ 3: When did it premiere at Annecy?\nDA 1: June 14, 2017\n\n"
        "DQ 4: When was it released in the United States?\nDA 1: June 30, 2017"
    )
    assert [p.answer for p in parse_disambiguations(text)] == ["December 14, 2016"]
    assert [(p.question, p.answer) for p in misnumbered_disambiguations(text)] == [
        ("When did it premiere at Annecy?", "June 14, 2017"),
        ("When was it released in the United States?", "June 30, 2017"),
    ]
    assert misnumbered_disambiguations('{"disambiguations": []}') == []


def test_dq_da_without_pairs_raises():
    with pytest.raises(ParseError):
        parse_disambiguations("I am not sure what you mean.")


def test_yes_no_and_true_false_tolerate_chatter_and_json():
    assert parse_yes_no("Response: Yes.") is True
    assert parse_yes_no("no, the passages do not say") is False
    assert parse_yes_no('{"verdict": "No"}') is False
    assert parse_true_false("It is TRUE that ...") is True
    with pytest.raises(ParseError):
        parse_yes_no("maybe")
    with pytest.raises(ParseError):
        parse_true_false("perhaps")


def test_numbered_list_formats():
    assert parse_numbered_list("1: First?\n2. Second?\n- Third?") == ["First?", "Second?", "Third?"]
    assert parse_numbered_list('{"interpretations": ["A?", "B?"]}') == ["A?", "B?"]
    with pytest.raises(ParseError):
        parse_numbered_list("")


def test_ambiguity_types_and_reason():
    types, reason = parse_ambiguity('##Reason: "Who" may be men or women. ##Answer: [AmbSub], [AmbTime]')
    assert types == ["AmbSub", "AmbTime"]
    assert reason == '"Who" may be men or women.'
    assert parse_ambiguity("##Reason: clear. ##Answer: [N/A]")[0] == ["N/A"]
    assert parse_ambiguity('{"reason": "r", "types": ["AmbLoc"]}') == (["AmbLoc"], "r")
    with pytest.raises(ParseError):
        parse_ambiguity("no idea")


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        ("The Rams played there from 1995 to 2015. Founded in 1936 in Cleveland, the Rams won",
         "The Rams played there from 1995 to 2015."),
        ("It was published on June 20, 2011 [1]. The film came out on February 13, 2015 [4]. It was",
         "It was published on June 20, 2011 [1]. The film came out on February 13, 2015 [4]."),
        ("J. K. Rowling wrote it. The film premiered in the U.S. on", "J. K. Rowling wrote it."),
        ('He said "yes." Then he', 'He said "yes."'),
        ("Born in St. Louis, he", "Born in St. Louis, he"),  # no whole sentence: left as it is
        ('Both were drafted in 2017. So the answer to "Who was first? " is either Alex Smith or Mitchell Tr',
         "Both were drafted in 2017."),  # a quoted question is no end when the sentence goes on
    ],
)  # fmt: skip
def test_a_cut_answer_keeps_its_whole_sentences(cut, kept):
    assert whole_sentences(cut) == kept


def test_long_answer_strips_the_echoed_label():
    assert parse_long_answer("Final Answer: It premiered in 2001 in London.") == "It premiered in 2001 in London."
    with pytest.raises(ParseError):
        parse_long_answer("Answer:")


def test_extract_json_skips_prose_and_fences():
    assert extract_json('Sure! ```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}


def test_execution_pair_null_and_json():
    from agent.llm.parsing import parse_execution

    pair = parse_execution("Interpretation: When was the film released in the US?\nAnswer: 16 November 2001")
    assert (pair.question, pair.answer) == ("When was the film released in the US?", "16 November 2001")
    assert parse_execution("null") is None
    assert parse_execution("Null.\nThe passage is about a volcano.") is None
    assert parse_execution('{"interpretation": null, "answer": null}') is None
    assert parse_execution('{"interpretation": "Q?", "answer": "null"}') is None
    assert parse_execution('{"interpretation": "Q?", "answer": "A"}').answer == "A"
    assert parse_execution("**Interpretation:** Q?\n**Answer:** A").question == "Q?"
    with pytest.raises(ParseError):
        parse_execution("The passage mentions the film.")


def test_query_takes_the_first_line_without_its_label():
    from agent.llm.parsing import parse_query

    assert (
        parse_query('Relaxed query: "Despicable Me 3 release dates"\nExplanation: ...')
        == "Despicable Me 3 release dates"
    )
    with pytest.raises(ParseError):
        parse_query("  \n ")


def test_decisions_need_one_label_per_item():
    from agent.llm.parsing import parse_decisions

    assert parse_decisions("1: Yes\n2: No\n3. yes", 3) == [True, False, True]
    assert parse_decisions('{"decisions": ["No", "Yes"]}', 2) == [False, True]
    assert parse_decisions("Yes, No", 2) == [True, False]
    with pytest.raises(ParseError):
        parse_decisions("1: Yes", 2)


@pytest.mark.parametrize("reply", ["%%%@@@ garbage ~~~", "Answer: ...", "!!! ??? ###", "", "Answer: ok"])
def test_a_reply_without_usable_text_is_never_a_long_answer(reply):
    from agent.llm.parsing import ParseError, parse_long_answer

    with pytest.raises(ParseError):
        parse_long_answer(reply)


def test_real_answers_in_any_script_are_usable():
    from agent.llm.parsing import parse_long_answer, parse_short_answer

    assert parse_long_answer("Answer: It premiered on 4 November 2001.") == "It premiered on 4 November 2001."
    assert parse_long_answer("Le film est sorti en 2001 à Londres.")
    assert parse_long_answer("映画 は 2001年 公開")  # letters of any script count
    assert parse_short_answer("Answer: 1997") == "1997"


def test_garbage_from_the_llm_is_a_clear_error_not_an_answer(collection, scripted):
    import agent
    from agent.errors import LLMError

    name, model = scripted({"closed_book": "%%%@@@ garbage ~~~"})
    with pytest.raises(LLMError, match="no usable output after 2 attempts"):
        agent.run("When did the Harry Potter film come out?", method="closed_book", llm=name, collection=collection,
                  retries=1)  # fmt: skip
    assert len(model.calls) == 2


def test_madam_replies_parse_tolerantly_and_an_empty_answer_is_no_answer():
    from agent.llm.parsing import parse_agent_reply, parse_aggregation

    assert parse_agent_reply("Answer: 1963. Explanation: The document says 1963.") == ("1963", "The document says 1963")
    assert parse_agent_reply("Answer: {1963}. Explanation: {born 1963}.") == ("1963", "born 1963")
    assert parse_agent_reply("He was born in 1963. The document says so.")[0] == "He was born in 1963"
    with pytest.raises(ParseError):
        parse_agent_reply("Answer: . Explanation: nothing")
    assert parse_aggregation('All Correct Answers: ["1963", "1956"]. Explanation: two people.') == (
        ["1963", "1956"],
        "two people",
    )
    assert parse_aggregation("All Correct Answers: []. Explanation: none.")[0] == []
    assert parse_aggregation("unknown") == ([], "")
    assert parse_aggregation("All Correct Answers: ['1963', 'unknown']. Explanation: x")[0] == ["1963"]
    with pytest.raises(ParseError):
        parse_aggregation("I think 1963.")


def test_a_reasoned_answer_is_read_from_its_last_answer_line():
    from agent.llm.parsing import parse_final_answer

    assert parse_final_answer("Reasoning: [1] says 1946.\nSo the answer is: 1946.") == "1946"
    assert (
        parse_final_answer("Reasoning: x.\nAnswer: a\nSo the final answer is: Green Bay Packers") == "Green Bay Packers"
    )
    assert parse_final_answer("[Final Answer]: mid-September.") == "mid-September"
    assert parse_final_answer("Velmora") == "Velmora"
    with pytest.raises(ParseError):
        parse_final_answer("Reasoning: the passages name the capital")


def test_a_reasoned_replys_reasoning_is_what_comes_before_its_answer_line():
    from agent.llm.parsing import reasoning_of

    reply = "Reasoning: Passage [1] gives 1889 for Leonard.\nPassage [2] gives 1894 for Hill.\nSo the answer is: Hill"
    assert reasoning_of(reply) == "Passage [1] gives 1889 for Leonard. Passage [2] gives 1894 for Hill."
    assert reasoning_of("**Reasoning:** x.\nAnswer: a\nSo the final answer is: b") == "x. Answer: a"  # the last line
    assert reasoning_of("The passage names it.\n[Final Answer]: Velmora") == "The passage names it."
    assert reasoning_of("Answer: Velmora") == ""  # a short reply: no reasoning
    assert reasoning_of("Reasoning: the passages name the capital") == ""  # no answer line: not a reasoned reply


def test_sentences_split_at_list_items_and_not_before_a_lower_case_word():
    text = 'The question "Who won? " can be read two ways:\n1. The 2001 race.\n2) The 2002 race\n- Both in Paris.'
    assert sentences(text) == [
        'The question "Who won? " can be read two ways:',
        "The 2001 race.",
        "The 2002 race",
        "Both in Paris.",
    ]
    assert sentences("It had 3,559 people in 2010. No. 5 is its rank.") == [
        "It had 3,559 people in 2010.",
        "No. 5 is its rank.",
    ]
    assert sentences("Melady died on December 7, 1869 [2]. . It was the last. !") == [
        "Melady died on December 7, 1869 [2].",
        "It was the last.",
    ]  # stray stops are no sentences
    assert sentences("It was the last. [14]. It ended.") == ["It was the last. [14].", "It ended."]
    assert sentences("It won four [4].\n[13] states that it won 37. [2] It ended.") == [
        "It won four [4].",
        "[13] states that it won 37. [2]",
        "It ended.",
    ]  # a citation that says something opens a sentence; a bare one after a stop is the sentence's own
