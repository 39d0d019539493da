"""VerDICt with a scripted LLM over real Chroma and real embeddings: Algorithm 1, consolidation, citations, cost."""

import re

import numpy as np

import agent
from agent.retrieval.embeddings import embed
from agent.steps.consolidation import OUTLIER, hdbscan_labels, medoid, representatives
from tests.conftest import PASSAGES

QUESTION = "When did the Harry Potter film come out?"
RELAXED = "Harry Potter Philosopher's Stone release"
ANSWER = "Answer: It premiered in London on 4 November 2001 [1] and reached US cinemas on 16 November 2001 [2]."
PREMIERE = "Interpretation: When did the Harry Potter film have its world premiere in London?\nAnswer: 4 November 2001"
US = (
    "Interpretation: When was the Harry Potter film released in cinemas in the United States?\nAnswer: 16 November 2001"
)
BOOK = "Interpretation: When was the first Harry Potter novel published in the United Kingdom?\nAnswer: 26 June 1997"


def executes(by_passage: dict[str, str]):
    """An I_E script: the reply for the passage in the call (by corpus id), 'null' for the rest."""
    text_to_id = {p["text"]: p["id"] for p in PASSAGES}

    def reply(call) -> str:
        passage = re.search(r"^Passage: .+? \| «(.+)»$", call.user, re.MULTILINE).group(1)
        return by_passage.get(text_to_id[passage], "null")

    return reply


def run_verdict(collection, scripted, by_passage, **options):
    checks = options.pop("answer_checks", ["narrates", "states_nothing", "borrows"])  # incomplete: tested on its own
    if checks is not None:  # None: VerDICt's default
        options["answer_checks"] = checks
    options.setdefault("grounded_answers", False)  # scripts put answers on any passage; the check is tested below
    script = {"verdict_relax": RELAXED, "verdict_execute": executes(by_passage), "verdict_answer": ANSWER}
    name, model = scripted(script, **options.pop("model", {}))
    return agent.run(QUESTION, method="verdict", llm=name, collection=collection, top_k=6, **options), model


def test_nodes_run_in_algorithm_order_and_calls_per_question_are_k_plus_2(collection, scripted):
    nodes = []
    result, model = run_verdict(
        collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US}, on_node=lambda n, u, s: nodes.append(n)
    )
    assert nodes == ["relax", "retrieve", "execute", "consolidate", "answer", "check_answer", "finish_answer"]
    k = 6
    assert len(model.calls) == result.usage.total.calls == k + 2  # relax, execute × k, answer
    assert {n: u.calls for n, u in result.usage.by_node.items()} == {"relax": 1, "execute": k, "answer": 1}
    assert model.prompts()[0] == "verdict_relax" and model.prompts()[-1] == "verdict_answer"


def test_retrieval_uses_the_relaxed_query_once(collection, scripted):
    result, _ = run_verdict(collection, scripted, {})
    assert result.extra["relaxed_query"] == RELAXED
    assert len(result.passages) == 6  # the universe U: one top-k retrieval


def test_abstaining_passages_produce_no_interpretation_and_are_counted(collection, scripted):
    result, _ = run_verdict(collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK})
    candidates = result.extra["candidates"]
    assert sorted(c.passage_ids[0] for c in candidates) == ["hp-book", "hp-premiere", "hp-us"]
    assert result.extra["abstentions"] == 3 and result.extra["unparsed"] == 0
    cited = {pid for d in result.disambiguations for pid in d.passage_ids}
    assert cited <= {"hp-book", "hp-premiere", "hp-us"}


def test_an_answer_saying_the_passage_has_none_is_an_abstention(collection, scripted):
    """ramdocs-208: "The passage does not provide information about the population of Orrock." stood as a reading."""
    none = "Interpretation: What is the Harry Potter film's box office?\nAnswer: The passage does not provide it."
    result, _ = run_verdict(collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": none})
    assert sorted(c.passage_ids[0] for c in result.extra["candidates"]) == ["hp-premiere", "hp-us"]
    assert result.extra["abstentions"] == 4 and result.extra["unparsed"] == 0


def test_an_answer_its_passage_does_not_state_is_dropped_and_counted(collection, scripted):
    """ASQA: "Eddard Stark" as the actor of Lord Beric, from a Game of Thrones passage that never names him."""
    foreign = "Interpretation: Who starred in the Harry Potter film released in the US?\nAnswer: Daniel Radcliffe"
    reworded = "Interpretation: When was the Harry Potter novel first published?\nAnswer: June 26, 1997"
    replies = {"hp-premiere": PREMIERE, "hp-us": foreign, "hp-book": reworded}
    result, _ = run_verdict(collection, scripted, replies, grounded_answers=True)
    assert sorted(c.answer for c in result.extra["candidates"]) == ["4 November 2001", "June 26, 1997"]
    assert result.extra["ungrounded"] == 1 and result.extra["abstentions"] == 3
    unchecked, _ = run_verdict(collection, scripted, replies, grounded_answers=False)
    assert len(unchecked.extra["candidates"]) == 3 and unchecked.extra["ungrounded"] == 0


def test_every_interpretation_keeps_the_passage_that_grounds_it(collection, scripted):
    result, _ = run_verdict(collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK})
    by_answer = {d.answer: d.passage_ids for d in result.disambiguations}
    assert by_answer == {"4 November 2001": ["hp-premiere"], "16 November 2001": ["hp-us"], "26 June 1997": ["hp-book"]}


def test_duplicates_across_passages_collapse_to_one_medoid_per_cluster(collection, scripted):
    film = "Interpretation: When was the Harry Potter film released?\nAnswer: November 2001"
    novel = "Interpretation: When was the Harry Potter novel published?\nAnswer: 26 June 1997"
    odd = "Interpretation: What is the Cricket World Cup?\nAnswer: the ODI championship"
    result, _ = run_verdict(
        collection,
        scripted,
        {"hp-premiere": film, "hp-us": film, "hp-book": novel, "volcano": novel, "cricket": odd},
    )
    labels = result.extra["cluster_labels"]
    assert sorted(labels) == [OUTLIER, 0, 0, 1, 1]
    assert sorted(d.answer for d in result.disambiguations) == ["26 June 1997", "November 2001"]  # outlier dropped
    film_ids = {d.passage_ids[0] for d in result.disambiguations if d.answer == "November 2001"}
    assert film_ids <= {"hp-premiere", "hp-us"}


def test_all_outliers_keep_every_interpretation(collection, scripted):
    result, _ = run_verdict(collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK})
    assert result.extra["cluster_labels"] == [OUTLIER] * 3
    assert len(result.disambiguations) == 3


def test_answer_cites_the_grounding_passage_of_every_interpretation(collection, scripted):
    result, model = run_verdict(collection, scripted, {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK})
    numbers = {p.id: n for n, p in enumerate(result.passages, 1)}
    answer_call = model.calls[-1]
    for d in result.disambiguations:
        n = numbers[d.passage_ids[0]]
        assert f"[{n}] " in answer_call.user  # the passage is shown under its citation number
        assert f"{d.answer} [{n}]" in answer_call.user
    assert result.answer.startswith("It premiered in London")


def test_disambiguations_asking_the_same_question_are_shown_once_with_every_cited_answer(collection, scripted):
    same = "Interpretation: When did the Harry Potter film come out?\nAnswer: {}"
    by_passage = {
        "hp-premiere": same.format("4 November 2001"),
        "hp-us": same.format("16 November 2001"),
        "hp-book": BOOK,
    }
    result, model = run_verdict(collection, scripted, by_passage)
    assert len(result.disambiguations) == 3  # all kept; only the prompt shows them merged
    numbers = {p.id: n for n, p in enumerate(result.passages, 1)}
    film = [
        f"{d.answer} [{numbers[d.passage_ids[0]]}]" for d in result.disambiguations if d.passage_ids[0] != "hp-book"
    ]
    prompt = model.calls[-1].user.split("Disambiguations:")[1]
    assert prompt.count("When did the Harry Potter film come out?") == 1 and "; ".join(film) in prompt
    assert re.findall(r"^DQ \d", prompt, re.MULTILINE) == ["DQ 1", "DQ 2"]


def test_a_reading_the_answer_leaves_out_is_asked_for_by_default_then_listed_with_its_citation(collection, scripted):
    by_passage = {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK}
    plain, _ = run_verdict(collection, scripted, by_passage)
    assert plain.extra["answer_review"].unstated == 1  # the novel, with incomplete unchecked
    appended, model = run_verdict(collection, scripted, by_passage, answer_checks=None, model={"default": ANSWER})
    assert "It leaves out these readings: When was the first Harry Potter novel published" in model.calls[-1].user
    numbers = {p.id: n for n, p in enumerate(appended.passages, 1)}
    assert appended.answer.endswith(f"United Kingdom? 26 June 1997 [{numbers['hp-book']}].")
    assert appended.extra["answer_review"].fallback == ["appended_readings"]


def test_an_answer_cut_at_max_tokens_keeps_its_whole_sentences_and_counts_what_it_lost(collection, scripted):
    from langchain_core.messages import AIMessage

    def cut_answer(call) -> AIMessage:  # cites the premiere, then is cut before the US release's citation
        premiere = re.search(r"4 November 2001 \[\d+\]", call.user).group(0)
        text = f"Answer: It premiered in London on {premiere}. It reached US cinemas on 16 Nov"
        return AIMessage(content=text, response_metadata={"finish_reason": "length"})

    by_passage = {"hp-premiere": PREMIERE, "hp-us": US}
    script = {"verdict_relax": RELAXED, "verdict_execute": executes(by_passage), "verdict_answer": cut_answer}
    name, _ = scripted(script)
    result = agent.run(QUESTION, method="verdict", llm=name, collection=collection, top_k=6, answer_checks=[])
    assert re.fullmatch(r"It premiered in London on 4 November 2001 \[\d+\]\.", result.answer)
    assert len(result.disambiguations) == 2 and result.extra["answer_review"].unstated == 1  # the US reading was cut


def test_execution_calls_share_instructions_and_question_and_end_with_their_passage(collection, scripted):
    _, model = run_verdict(collection, scripted, {"hp-premiere": PREMIERE})
    calls = [c for c in model.calls if c.prompt == "verdict_execute"]
    assert len({c.system for c in calls}) == 1  # identical instructions: llama.cpp reuses their KV cache
    passages = set()
    for call in calls:  # the question is part of the shared prefix, prefilled once; only the passage differs
        head, passage = call.user.rstrip().split("\n", 1)
        assert head == f"Question: {QUESTION}" and passage.startswith("Passage: ") and "\n" not in passage
        passages.add(passage)
    assert len(passages) == len(calls)


def test_execution_fans_out_concurrently(collection, scripted):
    _, model = run_verdict(collection, scripted, {}, model={"latency": 0.05})
    calls = sorted((c for c in model.calls if c.prompt == "verdict_execute"), key=lambda c: c.started)
    assert calls[1].started < calls[0].ended  # the second call started before the first returned


def test_unusable_execution_is_dropped_and_counted_separately(collection, scripted):
    result, model = run_verdict(collection, scripted, {"hp-premiere": "I cannot tell.", "hp-us": US}, retries=1)
    assert [c.passage_ids for c in result.extra["candidates"]] == [["hp-us"]]
    assert result.extra["unparsed"] == 1 and result.extra["abstentions"] == 4
    assert model.prompts().count("verdict_execute") == 7  # one retry for the unusable reply


def test_the_answer_can_read_the_disambiguations_alone_and_still_cites_their_passages(collection, scripted):
    name, model = scripted(
        {
            "verdict_relax": RELAXED,
            "verdict_execute": executes({"hp-premiere": PREMIERE, "hp-us": US}),
            "verdict_answer_disambiguations": ANSWER,
        }
    )
    result = agent.run(
        QUESTION, method="verdict", llm=name, collection=collection, top_k=6, answer_from="disambiguations"
    )
    answer_call = model.calls[-1]
    assert model.prompts()[-1] == "verdict_answer_disambiguations"
    assert "Passages:" not in answer_call.user and " | «" not in answer_call.user  # no passage text is read again
    numbers = re.findall(r"DA \d+: .+ \[(\d)\]", answer_call.user)  # each disambiguation names its passage's number
    assert sorted(result.passages[int(n) - 1].id for n in numbers) == ["hp-premiere", "hp-us"]
    assert result.answer.startswith("It premiered")
    _, fallback = run_verdict(collection, scripted, {}, answer_from="disambiguations")  # nothing read: the top passages
    assert fallback.prompts()[-1] == "verdict_answer" and "[1] " in fallback.calls[-1].user


def test_all_abstain_still_answers_from_the_top_passages(collection, scripted):
    result, model = run_verdict(collection, scripted, {}, answer_passages=2)
    assert result.disambiguations == [] and result.extra["abstentions"] == 6
    assert (
        "(none found)" in model.calls[-1].user and "[2] " in model.calls[-1].user and "[3] " not in model.calls[-1].user
    )
    assert result.answer


def test_question_only_embedding_clusters_candidates_whatever_their_answers(collection, scripted):
    film, novel = "When was the film released?", "When was the novel published?"
    replies = {
        "hp-premiere": f"Interpretation: {film}\nAnswer: 4 November 2001",
        "hp-us": f"Interpretation: {film}\nAnswer: 16 November 2001",
        "hp-book": f"Interpretation: {novel}\nAnswer: 26 June 1997",
        "volcano": f"Interpretation: {novel}\nAnswer: 1997",
    }
    result, _ = run_verdict(collection, scripted, replies, cluster_on="question")
    assert sorted(result.extra["cluster_labels"]) == [0, 0, 1, 1]
    assert sorted(d.question for d in result.disambiguations) == [film, novel]


def test_conservative_setting_returns_fewer_interpretations(collection, scripted):
    replies = {"hp-premiere": PREMIERE, "hp-us": US, "hp-book": BOOK}
    default, _ = run_verdict(collection, scripted, replies)
    conservative, _ = run_verdict(collection, scripted, replies, consolidation="conservative")
    assert len(default.disambiguations) == 3  # all outliers: every candidate kept
    assert sorted(conservative.extra["cluster_labels"]) == [OUTLIER, 0, 0]
    assert [d.passage_ids for d in conservative.disambiguations] in ([["hp-premiere"]], [["hp-us"]])


def test_hdbscan_needs_two_items_and_medoid_maximises_summed_similarity():
    assert hdbscan_labels(embed(["only one"])) == [OUTLIER]
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]])
    assert medoid(vectors, [0, 1, 2, 3]) in (1, 2)
    assert representatives(vectors, [OUTLIER] * 4) == [0, 1, 2, 3]
    assert representatives(vectors, [0, 0, OUTLIER, 1]) == [0, 3]


def test_verdict_exports_the_shared_contract_and_its_candidates():
    from graphs.verdict import graph

    assert set(graph.get_input_jsonschema()["properties"]) == {"question", "messages"}  # agent.chat
    assert set(graph.get_output_jsonschema()["properties"]) == {
        "answer", "disambiguations", "passages", "usage",
        "relaxed_query", "candidates", "abstentions", "unparsed", "ungrounded", "cluster_labels", "retrieved",
        "conflicts", "answer_review", "messages",
    }  # fmt: skip


def test_demo_model_runs_verdict_offline(collection):
    result = agent.run(QUESTION, method="verdict", llm="fake", collection=collection, top_k=6)
    assert result.answer and result.usage.total.calls == 6 + 2
    assert result.disambiguations and all(len(d.passage_ids) == 1 for d in result.disambiguations)


def test_the_citations_are_the_grounding_passages_whatever_marks_the_model_wrote(collection, scripted):
    miscited = "Answer: It premiered in London on 4 November 2001 [5]. It reached US cinemas on 16 November 2001."
    script = {"verdict_relax": RELAXED, "verdict_execute": executes({"hp-premiere": PREMIERE, "hp-us": US}),
              "verdict_answer": miscited}  # fmt: skip
    name, _ = scripted(script)
    result = agent.run(QUESTION, method="verdict", llm=name, collection=collection, top_k=6)
    numbers = {p.id: n for n, p in enumerate(result.passages, 1)}
    assert result.answer == (
        f"It premiered in London on 4 November 2001 [{numbers['hp-premiere']}]. "
        f"It reached US cinemas on 16 November 2001 [{numbers['hp-us']}]."
    )


def test_a_date_of_the_prompts_example_goes_back_to_the_model_and_is_left_out_if_it_stays(collection, scripted):
    borrowed = ANSWER + " E. L. James's novel was published on June 20, 2011 [1]."  # verdict_answer's example
    script = {"verdict_relax": RELAXED, "verdict_execute": executes({"hp-premiere": PREMIERE, "hp-us": US}),
              "verdict_answer": borrowed, "answer_revise": borrowed}  # fmt: skip
    name, model = scripted(script)
    result = agent.run(QUESTION, method="verdict", llm=name, collection=collection, top_k=6)
    revise = model.calls[-1]
    assert revise.prompt == "answer_revise" and "It states 2011, June 20, which only the worked examples" in revise.user
    assert "2011" not in result.answer and "16 November 2001" in result.answer
    assert result.extra["answer_review"].fallback == ["dropped_sentences"]
