"""SUNAR: neighbourhood graph, NAR (Algorithm 1), ASU re-scoring, answer equivalence and the decomposition loop.

Real Chroma, real MiniLM embeddings, the real cross-encoder; the scripted model stands in for the LLM only.
"""

import json

import pytest

import agent
from agent.errors import ConfigError
from agent.llm.calls import LLMOptions
from agent.llm.parsing import ParseError, parse_final_answer, parse_self_ask, parse_short_answer
from agent.retrieval.collections import open_store
from agent.retrieval.nar import neighbourhood_rerank
from agent.retrieval.pipeline import first_stage
from agent.retrieval.rerank import rerank
from agent.retrieval.scorers import get_scorer
from agent.steps.equivalence import LLMEquivalence, TokenEquivalence, get_equivalence, normalize, semantic_sets

QUESTION = "Which river flows through the capital city of Zorbania?"
SUB_QUESTION = "What is the capital city of Zorbania?"
# The planted passage shares no word with the question (BM25 misses it) but is the dense neighbour of the capital's.
PLANTED = {
    "id": "velmora",
    "title": "Velmora",
    "text": "Velmora sits astride Ostra, a wide stream feeding its harbour, mills and old stone bridges.",
}
CORPUS = [
    {"id": "zorbania", "title": "Zorbania",
     "text": "Zorbania is a small country. Its capital city is Velmora, a harbour town known for mills and stone bridges."},
    PLANTED,
    {"id": "nile", "title": "Nile", "text": "The Nile is a major river that flows through eleven countries of Africa."},
    {"id": "danube", "title": "Danube", "text": "The Danube river flows through Vienna, the capital city of Austria."},
    {"id": "paris", "title": "Paris", "text": "Paris is the capital city of France; the Seine river flows through it."},
    {"id": "amazon", "title": "Amazon River", "text": "Which river carries the most water? The Amazon flows through Brazil."},
    {"id": "cake", "title": "Sponge cake", "text": "Sponge cake is made from flour, sugar and eggs, baked until light."},
    {"id": "chess", "title": "Chess", "text": "Chess is a board game for two players on a checkered board of 64 squares."},
]  # fmt: skip


@pytest.fixture(scope="module")
def planted(home, tmp_path_factory) -> str:
    from agent.retrieval.ingest import ingest

    path = tmp_path_factory.mktemp("planted") / "corpus.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in CORPUS))
    ingest(path, "planted", progress=False)
    return "planted"


# --- the neighbourhood graph ---


def test_neighbours_come_from_the_index_on_demand_and_link_passages_on_the_same_topic(collection):
    store = open_store(collection)
    passages = store.passages(["hp-premiere", "hp-us", "volcano"])
    near = store.neighbours(passages, 2)
    for p in passages:
        assert p.id not in [n.id for n, _ in near[p.id]] and len(near[p.id]) == 2
    assert {n.id for n, _ in near["hp-premiere"]} == {"hp-us", "hp-book"}


# --- NAR (Algorithm 1) ---


def _nar(collection: str, query: str, **kwargs):
    store = open_store(collection)
    r0 = store.sparse_many([query], 100)[0]
    k = kwargs.pop("k", 2)
    result = neighbourhood_rerank(query, r0, lambda batch: store.neighbours(batch, k), get_scorer(), **kwargs)
    return r0, result


def test_nar_alternates_first_stage_and_frontier_within_the_budget(planted):
    r0, result = _nar(planted, QUESTION, batch_size=2, budget=5)
    assert len(r0) > 2
    assert len(result.ranked) == 5
    assert [b.source for b in result.batches] == ["R0", "frontier", "R0"]
    assert [len(b.ids) for b in result.batches] == [2, 2, 1]  # the last batch only fills the budget
    ids = [pid for b in result.batches for pid in b.ids]
    assert len(ids) == len(set(ids))  # nothing is scored twice
    assert [p.score for p in result.ranked] == sorted((p.score for p in result.ranked), reverse=True)


def test_planted_neighbour_missed_by_bm25_is_found_through_the_frontier(planted):
    r0, result = _nar(planted, QUESTION, batch_size=2, budget=6)
    assert "velmora" not in {p.id for p in r0}
    frontier = {pid for b in result.batches if b.source == "frontier" for pid in b.ids}
    assert "velmora" in frontier
    assert "velmora" in [p.id for p in result.ranked]


def test_nar_without_frontier_candidates_keeps_scoring_the_first_stage(planted):
    r0, result = _nar(planted, QUESTION, batch_size=2, budget=100, k=1)
    ids = [p.id for p in result.ranked]
    assert {p.id for p in r0} <= set(ids)  # everything reachable is scored once, then NAR stops short of c
    assert len(ids) == len(set(ids)) < len(CORPUS)


def test_asu_divides_each_batch_by_its_semantic_sets(planted):
    _, plain = _nar(planted, QUESTION, batch_size=2, budget=6)
    _, rescored = _nar(planted, QUESTION, batch_size=2, budget=6, rescore=lambda batch: 4)
    by_id = {p.id: p.score for p in plain.ranked}
    assert [b.divisor for b in rescored.batches] == [4, 4, 4]
    for p in rescored.ranked:
        assert p.score == pytest.approx(by_id[p.id] / 4, abs=1e-5)


def test_cross_encoder_prefers_the_relevant_passage(planted):
    store = open_store(planted)
    top = rerank(SUB_QUESTION, store.passages([p["id"] for p in CORPUS]), 2, get_scorer())
    assert top[0].id == "zorbania" and 0 < top[1].score < top[0].score < 1


# --- answer equivalence (Eq. 3-4) ---


def test_the_same_date_written_two_ways_is_equivalent():
    same = TokenEquivalence()
    assert same.equivalent("When?", "16 November 2001", "November 16, 2001")
    assert same.equivalent("When?", "Nov. 16th, 2001", "2001-11-16")


def test_different_dates_are_not_equivalent():
    same = TokenEquivalence()
    assert not same.equivalent("When?", "16 November 2001", "November 17, 2001")
    assert not same.equivalent("When?", "16 November 2001", "16 November 2002")
    assert not same.equivalent("When?", "November 2001", "16 November 2001")


def test_normalisation_of_case_articles_punctuation_and_numbers():
    assert normalize("The Beatles!") == normalize("beatles")
    assert normalize("1,000 people") == normalize("1000 People")
    assert normalize("twelve") == normalize("12") == ["12"]


def test_entailment_is_directional_and_equivalence_needs_both_directions():
    same = TokenEquivalence()
    assert same.entails("Who?", "Peter Schmeichel", "Schmeichel")
    assert not same.entails("Who?", "Schmeichel", "Peter Schmeichel")
    assert not same.equivalent("Who?", "Peter Schmeichel", "Schmeichel")


def test_semantic_sets_group_equivalent_answers():
    answers = ["Velmora", "velmora.", "The Velmora", "Ostra", "16 November 2001", "November 16, 2001"]
    sets = semantic_sets("q", answers, TokenEquivalence())
    assert [len(s) for s in sets] == [3, 1, 2]


def test_llm_judge_asks_both_directions(scripted):
    name, model = scripted({"sunar_entails": ["Yes", "No"]})
    judge = get_equivalence("llm", LLMOptions(llm=name))
    assert isinstance(judge, LLMEquivalence)
    assert not judge.equivalent("Who?", "Peter Schmeichel", "Schmeichel")
    assert model.prompts() == ["sunar_entails", "sunar_entails"]
    assert "First answer: Schmeichel" in model.calls[1].user


def test_answers_with_different_numbers_differ_without_asking_the_judge(scripted):
    name, model = scripted({"sunar_entails": "Yes"})  # a judge that calls everything the same
    judge = get_equivalence("llm", LLMOptions(llm=name))
    assert not judge.equivalent("In which year?", "1996", "1997")
    assert not judge.equivalent("When?", "16 November 2001", "November 2001")
    assert judge.equivalent("When?", "16 November 2001", "November 16, 2001") and model.calls == []
    assert judge.equivalent("Who?", "Barack Obama", "Obama") and len(model.calls) == 2


def test_unknown_equivalence_and_missing_nli_model_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="token, llm or nli"):
        get_equivalence("cosine", LLMOptions())
    with pytest.raises(ConfigError, match="no Hugging Face model"):
        get_equivalence(f"nli:{tmp_path}", LLMOptions())


def _nli_model(path, label: int) -> str:
    """A tiny local NLI model directory whose classifier always predicts ``label`` (0 contradiction, 2 entailment)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "velmora", "ostra", "q"]))
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(path)
    labels = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    config = BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
                        num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})  # fmt: skip
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.nn.functional.one_hot(torch.tensor(label), 3).float())
    model.save_pretrained(path)
    return f"nli:{path}"


def test_nli_option_uses_the_entailment_label_of_a_local_model(tmp_path):
    (tmp_path / "yes").mkdir(), (tmp_path / "no").mkdir()
    assert get_equivalence(_nli_model(tmp_path / "yes", 2), LLMOptions()).equivalent("q", "velmora", "ostra")
    assert not get_equivalence(_nli_model(tmp_path / "no", 0), LLMOptions()).equivalent("q", "velmora", "ostra")


# --- parsers ---


def test_self_ask_follow_up_and_final_answer():
    assert parse_self_ask("Follow up: Who is the father of Kasper Schmeichel?") == (
        True,
        "Who is the father of Kasper Schmeichel?",
    )
    assert parse_self_ask("Are follow up questions needed here: No.\nSo the final answer is: Voices of Iraq") == (
        False,
        "Voices of Iraq",
    )
    with pytest.raises(ParseError):
        parse_self_ask("I think it is Velmora.")


def test_short_answer_drops_the_label_and_full_stop():
    assert (
        parse_short_answer("Answer: World's Best Goalkeeper.\nBecause the passage says so.")
        == "World's Best Goalkeeper"
    )
    with pytest.raises(ParseError):
        parse_short_answer("Answer:  ")


@pytest.mark.parametrize("reply", ["Answer: not a sentence", "<short answer>", "So the answer is: Short answer."])
def test_a_copied_format_placeholder_is_no_answer(reply):
    # seen on HotpotQA tuning rows: "So the answer is: not a sentence" stood as SUNAR's final answer
    with pytest.raises(ParseError):
        parse_final_answer(f"Reasoning: the passages say little.\n{reply}")
    assert parse_final_answer("Reasoning: [1] says so.\nSo the answer is: A Short Answer Band") == "A Short Answer Band"


# --- the graph ---


def _cycle(replies: list[str]):
    calls = iter(range(10_000))
    return lambda call: replies[next(calls) % len(replies)]


def test_sunar_decomposes_retrieves_answers_and_reasons_over_the_path(planted, scripted):
    name, model = scripted({
        "sunar_decompose": ["Follow up: What is the capital city of Zorbania?",
                            "Follow up: Which river flows through Velmora?",
                            "So the final answer is: Ostra"],
        "sunar_answer_sub": lambda call: (
            "Reasoning: [1] names the capital.\nSo the answer is: Velmora"
            if "Question: What is the capital" in call.user else "Reasoning: [1] names the river.\nSo the answer is: Ostra"),
        "sunar_answer_sub_short": "Answer: Velmora",
        "sunar_meta_reason": "Reasoning: the path and [2] agree.\nSo the answer is: Ostra",
    })  # fmt: skip
    nodes = []
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, batch_size=4, budget=8,
                       neighbours_k=2, temperature=0.0, asu=True, on_node=lambda n, u, s: nodes.append(n))  # fmt: skip
    assert nodes == ["decompose", "nar_retrieve", "answer_sub"] * 2 + ["decompose", "meta_reason"]
    assert result.answer == "Ostra"
    path = result.extra["hops"]
    assert [(h.sub_question, h.answer) for h in path] == [
        ("What is the capital city of Zorbania?", "Velmora"), ("Which river flows through Velmora?", "Ostra")]  # fmt: skip
    assert "zorbania" in path[0].evidence_ids and "velmora" in path[1].evidence_ids  # R0 is the question's: BM25
    assert path[1].frontier_passages >= 1  # missed the bridge passage, the neighbour frontier brought it
    assert set(path[0].semantic_sets) == {1}  # ten samples per batch with one answer: one semantic set, no judge
    assert [h.answer for h in path] == ["Velmora", "Ostra"] and result.disambiguations == []
    assert "velmora" in path[1].supporting_ids
    assert [h.reasoning for h in path] == ["[1] names the capital.", "[1] names the river."]
    assert result.extra["reasoning"] == "the path and [2] agree."  # MER's, without its label or answer line
    assert len(result.passages) <= 10 and {"zorbania", "velmora"} <= {p.id for p in result.passages}
    batches = len(path[0].semantic_sets) + len(path[1].semantic_sets)
    samples = [c for c in model.calls if c.prompt == "sunar_answer_sub" and c.kwargs["temperature"] == 0.3]
    assert len(samples) == 10 * batches  # m=10 reasoned samples per NAR batch (ASU), as the official code
    assert sorted(c.kwargs["seed"] for c in samples[:10]) == list(range(0, 1000, 100))  # m draws, not one draw m times
    assert model.prompts().count("sunar_answer_sub") == 2 + 10 * batches  # and one reasoned answer per hop
    assert "sunar_answer_sub_short" not in model.prompts() and "sunar_entails" not in model.prompts()
    mer = [c for c in model.calls if c.prompt == "sunar_meta_reason"][0]
    assert "Intermediate answer: Velmora" in mer.user and "Velmora | «Velmora sits astride Ostra" in mer.user
    assert set(result.usage.by_node) == {"decompose", "nar_retrieve", "answer_sub", "meta_reason"}


def test_more_semantic_sets_lower_the_retrieved_scores(planted, scripted):
    def run(samples: list[str]):
        name, _ = scripted({"sunar_decompose": ["Follow up: " + SUB_QUESTION, "So the final answer is: Velmora"],
                            "sunar_answer_sub_short": _cycle(samples), "sunar_answer_sub": "Answer: Velmora",
                            "sunar_meta_reason": "Answer: Velmora"})  # fmt: skip
        retrieved = []  # R+ as nar_retrieve's update carries it

        def seen(node, update, seconds):
            if node == "nar_retrieve":
                retrieved.extend(update["ranked"])

        result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, batch_size=3, budget=6, samples=4, asu=True,
                           asu_style="short", equivalence="token", on_node=seen)  # fmt: skip
        return result, retrieved

    consistent, consistent_retrieved = run(["Answer: Velmora"])
    uncertain, uncertain_retrieved = run(["Answer: Velmora", "Answer: Ostra", "Answer: the Paris.", "Answer: Vienna"])
    assert consistent.extra["hops"][0].semantic_sets == [1, 1]
    assert uncertain.extra["hops"][0].semantic_sets == [4, 4]  # 4 per batch
    scores = {p.id: p.score for p in consistent_retrieved}
    for p in uncertain_retrieved:
        assert p.score == pytest.approx(scores[p.id] / 4, abs=1e-5)


def test_the_llm_judge_groups_differing_samples_and_is_not_asked_about_equal_ones(planted, scripted):
    sample = _cycle(["So the answer is: Velmora", "So the answer is: the Velmora.", "So the answer is: Ostra"])
    name, model = scripted({"sunar_decompose": ["Follow up: " + SUB_QUESTION, "So the final answer is: Velmora"],
                            "sunar_answer_sub": lambda call: sample(call) if call.kwargs["temperature"] else
                            "So the answer is: Velmora",
                            "sunar_entails": lambda call: "Yes" if "Second answer: Velmora" in call.user else "No",
                            "sunar_meta_reason": "So the answer is: Velmora"})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, batch_size=3, budget=6, samples=3, asu=True,
                       equivalence="llm", max_concurrency=1, temperature=0.0)  # fmt: skip
    assert result.extra["hops"][0].semantic_sets == [2, 2]  # {Velmora, the Velmora.} and {Ostra} in each batch
    judged = [c.user for c in model.calls if c.prompt == "sunar_entails"]
    assert len(judged) == 2 and all("First answer: Velmora\nSecond answer: Ostra" in u for u in judged)
    # one call a batch: equal answers need no judge, and Ostra fails the first direction


def test_asu_is_off_by_default_and_without_it_nar_makes_no_llm_calls(planted, scripted):
    name, model = scripted({"sunar_decompose": ["Follow up: " + SUB_QUESTION, "So the final answer is: Velmora"],
                            "sunar_answer_sub": "Answer: Velmora", "sunar_meta_reason": "Answer: Velmora"})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, budget=4)
    assert model.prompts() == ["sunar_decompose", "sunar_answer_sub", "sunar_decompose", "sunar_meta_reason"]
    assert result.extra["hops"][0].semantic_sets == []


def test_decomposition_stops_at_max_hops_and_on_a_repeated_sub_question(planted, scripted):
    name, model = scripted({"sunar_decompose": "Follow up: " + SUB_QUESTION, "sunar_answer_sub": "Answer: Velmora",
                            "sunar_meta_reason": "Answer: Velmora"})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, max_hops=3)
    assert len(result.extra["hops"]) == 1  # the repeat ends the loop
    name, model = scripted({"sunar_decompose": _cycle([f"Follow up: {SUB_QUESTION} ({i})" for i in range(9)]),
                            "sunar_answer_sub": "Answer: Velmora", "sunar_meta_reason": "Answer: Velmora"})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, max_hops=2)
    assert len(result.extra["hops"]) == 2
    assert model.prompts().count("sunar_decompose") == 2  # the third decision is the hop limit, not a call


def test_a_direct_answer_without_evidence_still_retrieves_for_the_question(planted, scripted):
    name, model = scripted({"sunar_decompose": "So the final answer is: Ostra", "sunar_answer_sub": "Answer: Ostra",
                            "sunar_meta_reason": ""})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, retries=0)
    assert [h.sub_question for h in result.extra["hops"]] == [QUESTION]
    assert result.answer == "Ostra"  # MER's output was unusable: Self-Ask's own answer is the fallback


def test_sunar_runs_on_the_demo_script(planted):
    result = agent.run(QUESTION, method="sunar", llm="fake", collection=planted, budget=4, samples=2)
    assert result.answer and result.extra["hops"]


def test_unusable_decomposition_after_a_hop_ends_the_loop(planted, scripted):
    name, _ = scripted({"sunar_decompose": ["Follow up: " + SUB_QUESTION, "Hmm."], "sunar_answer_sub": "Answer: Velmora",
                        "sunar_meta_reason": ""})  # fmt: skip
    result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, retries=0)
    assert len(result.extra["hops"]) == 1
    assert result.answer == "Velmora"  # neither MER nor Self-Ask answered: the last intermediate answer stands


def test_bench_recall_compares_bm25_nar_and_nar_with_asu(planted, scripted):
    from agent.eval.bench import nar_recall
    from agent.eval.datasets import Example

    example = Example(id="z", question=QUESTION, supporting_ids=["zorbania", "velmora"])
    name, model = scripted({"sunar_answer_sub": "Reasoning: [1] says so.\nSo the answer is: Velmora"})
    report = nar_recall(planted, [example], llm=name, progress=False)
    assert report["bm25_recall@10"] == report["bm25_ce_recall@10"] == 0.5  # BM25 never sees the planted passage
    assert report["nar_recall@10"] == report["nar_asu_recall@10"] == 1.0  # the frontier brings it in
    assert report["nar_asu_llm_calls"] == len(model.calls) >= 10 and set(model.prompts()) == {"sunar_answer_sub"}
    assert report["pool_recall"] == 0.5 and report["pool_k"] == 100  # the control's whole pool lacks it too
    assert report["nar_minus_bm25_ce"]["diff"] == 0.5 and report["nar_asu_semantic_sets"] == {
        "1": len(model.calls) // 10
    }
    assert "nar_asu_recall@10" not in nar_recall(planted, [example], progress=False)


def test_bench_recall_records_each_question_and_resumes(planted, scripted, tmp_path):
    from agent.eval.bench import nar_recall
    from agent.eval.datasets import Example

    examples = [Example(id="z", question=QUESTION, supporting_ids=["zorbania", "velmora"]),
                Example(id="y", question="Which river flows through Ostra?", supporting_ids=["ostra"])]  # fmt: skip
    record = tmp_path / "bench.nar.jsonl"
    name, model = scripted({"sunar_answer_sub": "So the answer is: Velmora"})
    first = nar_recall(planted, examples[:1], llm=name, progress=False, record=record)
    calls = len(model.calls)
    both = nar_recall(planted, examples, llm=name, progress=False, record=record)
    assert len(model.calls) == 2 * calls  # only the new question ran
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert [row["id"] for row in rows] == ["z", "y"]
    assert all(len(row["nar_asu_semantic_sets"]) >= 1 and row["nar_asu_top_changed"] >= 0 for row in rows)
    assert set(rows[0]["nar_asu_semantic_sets"]) == {1}  # the script always answers "Velmora": one set per batch
    assert rows[0]["nar_asu_answers"][0] == ["Velmora"] * 10  # the samples, to regroup them another way later
    again = nar_recall(planted, examples, llm=name, progress=False, record=record)
    assert again == both and len(model.calls) == 2 * calls and first["questions"] == 1 and both["questions"] == 2
    nar_recall(planted, examples, progress=False, record=record)  # rows without ASU are a different measurement
    assert len(record.read_text().splitlines()) == 4


def test_bench_recall_takes_sunar_options_and_keeps_their_rows_apart(planted, scripted, tmp_path):
    from agent.errors import ConfigError
    from agent.eval.bench import nar_recall
    from agent.eval.datasets import Example
    from agent.surfaces.cli import _sunar_settings

    example = Example(id="z", question=QUESTION, supporting_ids=["zorbania", "velmora"])
    record = tmp_path / "bench.nar.jsonl"
    name, _ = scripted({"sunar_answer_sub": "Answer: Velmora", "sunar_answer_sub_short": "Answer: Velmora"})
    options = _sunar_settings(["sunar.samples=5", "sunar.asu_style=short"])
    nar_recall(planted, [example], llm=name, progress=False, record=record, options=options)
    row = json.loads(record.read_text())
    assert row["options"] == '{"asu_style": "short", "samples": 5}' and row["nar_asu_answers"][0] == ["Velmora"] * 5
    nar_recall(planted, [example], llm=name, progress=False, record=record)  # the default m=10 is another measurement
    assert [len(json.loads(line)["nar_asu_answers"][0]) for line in record.read_text().splitlines()] == [5, 10]
    with pytest.raises(ConfigError, match="samples"):
        nar_recall(planted, [example], llm=name, progress=False, options={"samples": 0})
    with pytest.raises(ConfigError, match="SUNAR's options"):
        _sunar_settings(["rag.top_k=3"])


def test_ablations_switch_off_nar_and_mer_and_r0_can_follow_each_sub_question(planted, scripted):
    def script():
        return scripted({
            "sunar_decompose": ["Follow up: What is the capital city of Zorbania?",
                                "Follow up: Which river flows through Velmora?", "So the final answer is: Ostra"],
            "sunar_answer_sub": "Answer: Velmora", "sunar_meta_reason": "Answer: Ostra",
        })  # fmt: skip

    common = {"collection": planted, "batch_size": 4, "budget": 8, "neighbours_k": 2, "asu": False}
    name, _ = script()
    no_nar = agent.run(QUESTION, method="sunar", llm=name, nar=False, **common)
    assert all(h.frontier_passages == 0 for h in no_nar.extra["hops"])
    assert "velmora" not in no_nar.extra["hops"][1].evidence_ids  # R0 and the re-ranker alone miss the bridge
    name, model = script()
    no_mer = agent.run(QUESTION, method="sunar", llm=name, mer=False, **common)
    assert "sunar_meta_reason" not in model.prompts() and no_mer.answer == "Ostra"  # Self-Ask's own final answer
    name, model = script()
    per_sub = agent.run(QUESTION, method="sunar", llm=name, r0_from="sub_question", mer_per_hop=1, **common)
    assert {p.id for p in per_sub.passages} == {
        per_sub.extra["hops"][0].evidence_ids[0],
        per_sub.extra["hops"][1].evidence_ids[0],
    }  # one passage a hop: MER's


def test_mer_can_add_the_questions_own_top_passages_to_a_one_sided_decomposition(planted, scripted):
    def run(**options):
        name, model = scripted({
            "sunar_decompose": ["Follow up: What is the capital city of Zorbania?", "So the final answer is: Ostra"],
            "sunar_answer_sub": "Answer: Velmora", "sunar_meta_reason": "Answer: Ostra",
        })  # fmt: skip
        common = {"collection": planted, "batch_size": 4, "budget": 8, "neighbours_k": 2, "asu": False}
        result = agent.run(QUESTION, method="sunar", llm=name, mer_per_hop=1, **common, **options)
        return result, [c for c in model.calls if c.prompt == "sunar_meta_reason"][0]

    official, _ = run()
    hop_top = official.extra["hops"][0].evidence_ids[0]
    assert [p.id for p in official.passages] == [hop_top]  # only the sub-question's passage reaches MER
    widened, mer = run(mer_question_k=2)
    r0 = first_stage(open_store(planted), [QUESTION], 100, "bm25")[0]
    own = [p.id for p in rerank(QUESTION, r0, 2, get_scorer("cross-encoder"))]
    assert {p.id for p in widened.passages} == {hop_top, *own} and len(own) == 2
    assert all(f"{p.title} | «" in mer.user for p in widened.passages)  # the final answer reads them all
    assert [p.score for p in widened.passages] == sorted((p.score for p in widened.passages), reverse=True)


def test_answers_reason_step_by_step_and_the_short_style_stays_an_option(planted, scripted):
    script = {
        "sunar_decompose": ["Follow up: " + SUB_QUESTION, "So the final answer is: Velmora"],
        "sunar_answer_sub": "Reasoning: [1] says the capital is Velmora.\nSo the answer is: Velmora",
        "sunar_meta_reason": "Reasoning: the first hop answered it.",  # no answer line: retried, then the fallback
        "sunar_answer_sub_short": "Answer: Vienna",
        "sunar_meta_reason_short": "Answer: Vienna",
    }
    name, model = scripted(script)
    reasoned = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, retries=1)
    assert reasoned.extra["hops"][0].answer == "Velmora" and reasoned.answer == "Velmora"
    assert model.prompts().count("sunar_meta_reason") == 2
    assert reasoned.extra["reasoning"] == ""  # the fallback answer has no reasoning of its own
    name, model = scripted(script)
    short = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4, answer_style="short")
    assert short.answer == "Vienna" and "sunar_answer_sub" not in model.prompts()
    assert short.extra["reasoning"] == "" and short.extra["hops"][0].reasoning == ""  # short answers: none


def test_mer_samples_vote_and_answers_that_state_nothing_do_not(planted, scripted):
    def run(draws: list[str], **options):
        drawn = _cycle([f"Reasoning: see [1].\nSo the answer is: {d}" for d in draws])
        name, model = scripted({
            "sunar_decompose": ["Follow up: " + SUB_QUESTION, "So the final answer is: Velmora"],
            "sunar_answer_sub": "Reasoning: [1] says so.\nSo the answer is: Velmora",
            "sunar_meta_reason": lambda call: drawn(call) if call.kwargs["temperature"] else
            "Reasoning: [1] names the capital.\nSo the answer is: Velmora",
        })  # fmt: skip
        result = agent.run(QUESTION, method="sunar", llm=name, collection=planted, asu=False, budget=4,
                           temperature=0.0, max_concurrency=1, **options)  # fmt: skip
        return result, [c for c in model.calls if c.prompt == "sunar_meta_reason"]

    result, calls = run(["Ostra", "the Ostra.", "Vienna", "Ostra"])
    assert len(calls) == 1 and result.answer == "Velmora"  # mer_samples=1 (the default): the one answer, no draws
    result, calls = run(["Ostra", "the Ostra.", "Vienna", "Ostra"], mer_samples=5)
    assert result.answer == "Ostra"  # three of five outvote the first answer
    assert result.extra["reasoning"] == "see [1]."  # the winning answer's reasoning, not the first answer's
    assert [c.kwargs["temperature"] for c in calls] == [0.0] + [0.3] * 4
    assert [c.kwargs["seed"] for c in calls] == [0, 100, 200, 300, 400]  # four draws, not one draw four times
    result, _ = run(["Ostra", "Vienna"], mer_samples=3)
    assert result.answer == "Velmora"  # a tie of sets: the first answer's stands
    assert result.extra["reasoning"] == "[1] names the capital."
    result, _ = run(["not specified", "unknown", "Not mentioned in the passages"], mer_samples=4)
    assert result.answer == "Velmora"  # answers that state nothing do not vote
