"""DIVA with a scripted LLM over real Chroma and real embeddings: grades, routes, pruning, degenerate outputs."""

import json
import re

import numpy as np
import pytest
from langchain_core.messages import AIMessage

import agent
from agent.context import RunContext
from agent.llm.prompts import estimate_tokens
from agent.retrieval.ingest import ingest
from agent.schemas import ShortExtractedPairs
from agent.steps.ambiguity import DEMO_FILE, AmbiguityDemo, demos_for
from agent.steps.fewshot import PoolExample, Shots, load_demos, pool_demos
from graphs.diva import DivaContext, Verification, adapt, grade_of

QUESTION = "When did the Harry Potter film come out?"
TYPING = "##Reason: The film had a premiere and a general release on different dates.\n##Answer: [AmbTime]"
PREMIERE = "When was the world premiere of the Harry Potter film?"
US_RELEASE = "When was the Harry Potter film released in US cinemas?"
BOOK = "When was the Harry Potter novel first published?"
INTERPRETATIONS = f"##Disambiguations:\n1: {PREMIERE}\n2: {US_RELEASE}\n3: {BOOK}"
EXTRACT = "DQ 1: When was the world premiere of the film?\nDA 1: 4 November 2001\nDQ 2: When was it released in US cinemas?\nDA 2: 16 November 2001"
GENERATE = "Answer: The film premiered in London on 4 November 2001 and reached US cinemas on 16 November 2001."
CLOSED_BOOK = "Final Answer: The first Harry Potter film came out in November 2001."
RAG_NODES = ["type_ambiguity", "interpret", "retrieve", "prune", "verify", "rag_extract", "rag_generate", "check_answer",
             "finish_answer"]  # fmt: skip


def asked(call) -> str:
    """The interpretation a verify call asks about: the last line of its prompt."""
    return call.user.splitlines()[-1].removeprefix("Question: ")


def script(verify) -> dict:
    return {
        "type_ambiguity": TYPING,
        "interpret": INTERPRETATIONS,
        "verify": verify,
        "rag_extract_short": EXTRACT,  # I_e's default layout; the others:
        "rag_extract_examples": EXTRACT,
        "rag_extract": EXTRACT,
        "rag_generate": GENERATE,
        "closed_book": CLOSED_BOOK,
    }


def run(name, collection, updates=None, **options):
    nodes = []

    def seen(node, update, seconds):
        nodes.append(node)
        if updates is not None:
            updates[node] = update

    result = agent.run(QUESTION, method="diva", llm=name, collection=collection, on_node=seen, **options)
    return result, nodes


def calls_by_node(result) -> dict[str, int]:
    return {node: usage.calls for node, usage in result.usage.by_node.items()}


def test_all_yes_verdicts_grade_useful_and_answer_from_the_kept_passages(collection, scripted):
    name, model = scripted(script("Yes"))
    result, nodes = run(name, collection)
    assert nodes == RAG_NODES
    assert model.prompts() == [
        "type_ambiguity",
        "interpret",
        "verify",
        "verify",
        "verify",
        "rag_extract_short",
        "rag_generate",
    ]
    assert calls_by_node(result) == {
        "type_ambiguity": 1,
        "interpret": 1,
        "verify": 3,
        "rag_extract": 1,
        "rag_generate": 1,
    }
    extra = result.extra
    assert extra["ambiguity_types"] == ["AmbTime"]
    assert extra["ambiguity_reason"] == "The film had a premiere and a general release on different dates."
    assert extra["interpretations"] == [PREMIERE, US_RELEASE, BOOK]
    assert [v.verdict for v in extra["verdicts"]] == ["Yes", "Yes", "Yes"]
    assert (extra["grade"], extra["route"]) == ("Useful", "rag")
    assert result.passages == extra["kept"] and len(result.passages) == 5
    assert result.answer.startswith("The film premiered in London")
    assert {d.answer: d.passage_ids for d in result.disambiguations} == {
        "4 November 2001": ["hp-premiere"],
        "16 November 2001": ["hp-us"],
    }


def test_mixed_verdicts_grade_partial_useful_and_still_use_the_passages(collection, scripted):
    name, model = scripted(script(lambda call: "Yes." if asked(call) == PREMIERE else "No."))
    result, nodes = run(name, collection)
    assert nodes == RAG_NODES
    assert [(v.interpretation, v.verdict) for v in result.extra["verdicts"]] == [
        (PREMIERE, "Yes"),
        (US_RELEASE, "No"),
        (BOOK, "No"),
    ]
    assert (result.extra["grade"], result.extra["route"]) == ("PartialUseful", "rag")
    assert result.passages == result.extra["kept"]


def test_all_no_verdicts_route_to_closed_book(collection, scripted):
    name, model = scripted(script("No"))
    result, nodes = run(name, collection)
    assert nodes == ["type_ambiguity", "interpret", "retrieve", "prune", "verify", "closed_book"]
    assert model.prompts() == ["type_ambiguity", "interpret", "verify", "verify", "verify", "closed_book"]
    assert calls_by_node(result) == {"type_ambiguity": 1, "interpret": 1, "verify": 3, "closed_book": 1}
    assert (result.extra["grade"], result.extra["route"]) == ("Useless", "closed_book")
    assert result.answer == "The first Harry Potter film came out in November 2001."
    assert result.passages == [] and result.disambiguations == []
    assert len(result.extra["kept"]) == 5  # what verification judged stays visible
    assert (
        result.retrieved == result.extra["kept"]
    )  # retrieval metrics score the diversified passages on this route too


def test_verify_calls_share_the_passages_prefix_ask_the_interpretation_last_and_overlap(collection, scripted):
    name, model = scripted(script("Yes"), latency=0.3)
    result, _ = run(name, collection)
    verify_calls = [c for c in model.calls if c.prompt == "verify"]
    assert sorted(asked(c) for c in verify_calls) == sorted([PREMIERE, US_RELEASE, BOOK])
    assert len({c.system for c in verify_calls}) == 1  # the casebook
    assert len({c.user.rsplit("\n", 1)[0] for c in verify_calls}) == 1  # passages, instruction: the reading last
    passages = verify_calls[0].user.split("Passages retrieved for the question:")[1]
    assert all(p.text in passages for p in result.extra["kept"])
    assert max(c.started for c in verify_calls) < min(c.ended for c in verify_calls)  # run concurrently
    assert all(c.kwargs["max_tokens"] == 24 and c.kwargs["temperature"] == 0.3 for c in verify_calls)


def test_no_interpretations_fall_back_to_the_question_itself(collection, scripted):
    name, model = scripted(script("Yes") | {"interpret": "I am not sure what you mean."})
    result, nodes = run(name, collection, retries=1)
    assert nodes == RAG_NODES
    assert result.extra["interpretations"] == [QUESTION]
    assert calls_by_node(result)["interpret"] == 2
    assert [asked(c) for c in model.calls if c.prompt == "verify"] == [QUESTION]
    assert result.extra["grade"] == "Useful"


def test_duplicate_interpretations_are_verified_once(collection, scripted):
    name, model = scripted(script("Yes") | {"interpret": f"1: {PREMIERE}\n2: {PREMIERE.lower()}\n3: {BOOK}"})
    result, _ = run(name, collection)
    assert result.extra["interpretations"] == [PREMIERE, BOOK]
    assert calls_by_node(result)["verify"] == 2


def test_fewer_candidates_than_k_are_all_kept(collection, scripted):
    name, model = scripted(script("Yes"))
    updates = {}
    result, nodes = run(name, collection, updates, pool_size=3)
    assert nodes == RAG_NODES
    assert len(updates["prune"]["scored"]) == 3 and all(s.kept for s in updates["prune"]["scored"])
    assert len(result.extra["kept"]) == 3
    assert all(p.text in model.calls[2].user for p in result.extra["kept"])


def test_unparseable_verdicts_count_as_no_after_retries(collection, scripted):
    name, model = scripted(script("Perhaps, it is hard to say."))
    result, nodes = run(name, collection, retries=1)
    assert nodes[-1] == "closed_book"
    assert calls_by_node(result)["verify"] == 6  # 3 interpretations x (1 + 1 retry)
    assert [(v.verdict, v.parsed) for v in result.extra["verdicts"]] == [("No", False)] * 3
    assert result.extra["grade"] == "Useless"


def test_one_unparseable_verdict_among_yes_grades_partial_useful(collection, scripted):
    name, _ = scripted(script(lambda call: "Perhaps." if asked(call) == BOOK else "Yes"))
    result, nodes = run(name, collection, retries=0)
    assert [(v.verdict, v.parsed) for v in result.extra["verdicts"]] == [("Yes", True), ("Yes", True), ("No", False)]
    assert (result.extra["grade"], nodes[-1]) == ("PartialUseful", "finish_answer")


def test_unambiguous_question_still_gets_its_answer(collection, scripted):
    question = "When was the novel Harry Potter and the Philosopher's Stone first published?"
    name, model = scripted(
        {
            "type_ambiguity": "##Reason: The question asks for one publication date of one novel.\n##Answer: [N/A]",
            "interpret": f"1: {question}",
            "verify": "Yes",
            "rag_extract_short": f"DQ 1: {question}\nDA 1: 26 June 1997",
            "rag_generate": "Answer: The novel was first published in the United Kingdom on 26 June 1997.",
        }
    )
    result = agent.run(question, method="diva", llm=name, collection=collection)
    assert result.extra["ambiguity_types"] == ["N/A"]
    assert "one publication date" in model.calls[1].user  # I_p still sees the reason (App. C.2 keeps RD)
    assert result.extra["interpretations"] == [question]
    assert result.extra["kept"][0].id == "hp-book"
    assert (result.extra["grade"], result.extra["route"]) == ("Useful", "rag")
    assert "26 June 1997" in result.answer
    assert [d.passage_ids for d in result.disambiguations] == [["hp-book"]]


PRUNE_CORPUS = [
    (  # names the film: without it this passage tied the box-office one (torch: 0.3792 each) for the fifth place
        "hp-premiere",
        "The first Harry Potter film had its world premiere at the Odeon Leicester Square in London on 4 November 2001.",
    ),
    ("hp-release", "The film was released to cinemas in the United Kingdom and the United States on 16 November 2001."),
    ("hp-japan", "The Harry Potter film opened in cinemas in Japan on 1 December 2001."),
    ("hp-dvd", "The first Harry Potter film was released on DVD and VHS in the United States on 28 May 2002."),
    (
        "hp-box",
        "The first Harry Potter film earned more than 974 million dollars at the box office after its release in 2001.",
    ),
    ("hp-director", "The first Harry Potter film was directed by Chris Columbus and released by Warner Bros. in 2001."),
    (
        "sourdough",
        "Sourdough bread is made by fermenting dough with wild yeast and lactic acid bacteria before baking.",
    ),
    ("etna", "Mount Etna is an active stratovolcano on the east coast of Sicily, Italy."),
    ("cricket", "The Cricket World Cup is the international championship of One Day International cricket."),
]


@pytest.fixture(scope="module")
def prune_collection(home, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("prune") / "corpus.jsonl"
    title = "Harry Potter and the Philosopher's Stone (film)"
    path.write_text(
        "".join(
            json.dumps({"id": i, "title": title if i.startswith("hp") else "", "text": t}) + "\n"
            for i, t in PRUNE_CORPUS
        )
    )
    ingest(path, "diva-prune", progress=False)
    return "diva-prune"


def test_pruning_drops_a_passage_relevant_to_one_noisy_interpretation_only(prune_collection, scripted):
    noisy = "How is sourdough bread made?"
    interpretations = f"1: When was the world premiere of the first Harry Potter film?\n2: When was the first Harry Potter film released in US cinemas?\n3: {noisy}"
    name, _ = scripted(script("Yes") | {"interpret": interpretations})
    updates = {}
    result, _ = run(name, prune_collection, updates, first_stage="dense", reranker="none", eq5_scale="raw")  # cosine
    candidates = {c.passage.id: c for c in updates["prune"]["scored"]}
    assert candidates["sourdough"].retrieved_for[:1] == [2]  # Eq. 4 brought it in through the noisy reading ...
    assert not candidates["sourdough"].kept  # ... and Eq. 5 pruned it
    kept = result.extra["kept"]
    assert {p.id for p in kept} <= {i for i, _ in PRUNE_CORPUS if i.startswith("hp")} and len(kept) == 5
    assert {"hp-premiere", "hp-release"} <= {p.id for p in kept}
    for c in candidates.values():
        assert c.score == pytest.approx(np.mean(c.relevance), abs=1e-5) and len(c.relevance) == 3
    assert [p.score for p in kept] == sorted((p.score for p in kept), reverse=True)
    assert min(p.score for p in kept) >= max(c.score for c in candidates.values() if not c.kept)


def test_by_default_eq5_averages_each_interpretations_min_max_scaled_relevance(prune_collection, scripted):
    interpretations = "1: When was the world premiere of the first Harry Potter film?\n2: Harry Potter DVD release?"
    name, _ = scripted(script("Yes") | {"interpret": interpretations})
    updates = {}
    run(name, prune_collection, updates, reranker="colbert")  # MaxSim: its scale grows with the reading's length
    scored = updates["prune"]["scored"]
    relevance = np.array([c.relevance for c in scored]).T
    assert relevance[0].max() > relevance[1].max()  # raw scores would let the longer reading decide
    scaled = (relevance - relevance.min(1, keepdims=True)) / np.ptp(relevance, axis=1, keepdims=True)
    for c, expected in zip(scored, scaled.mean(0)):
        assert c.score == pytest.approx(expected, abs=1e-5)
    assert {c.passage.id for c in scored if c.kept} == {
        c.passage.id for c in sorted(scored, key=lambda c: -c.score)[:5]
    }


def test_grade_follows_the_share_of_yes_verdicts_and_routes_useless_to_closed_book():
    def verdicts(*words):
        return [Verification(interpretation=f"q{i}", verdict=w, parsed=True) for i, w in enumerate(words)]

    assert grade_of(verdicts("Yes", "Yes")) == "Useful"
    assert grade_of(verdicts("Yes", "No")) == "PartialUseful"
    assert grade_of(verdicts("No", "No")) == "Useless"
    assert [adapt({"grade": g}) for g in ("Useful", "PartialUseful", "Useless")] == [
        "rag_extract",
        "rag_extract",
        "closed_book",
    ]


def test_paper_defaults_are_per_run_fields(collection, scripted):
    ctx = DivaContext()
    assert (ctx.top_k, ctx.pool_size, ctx.temperature, ctx.max_tokens, ctx.fewshot) == (5, 100, 0.3, 300, 5)
    name, model = scripted(script("Yes"))
    result, _ = run(name, collection, top_k=2, temperature=0.0)
    assert len(result.extra["kept"]) == 2
    assert {c.kwargs["temperature"] for c in model.calls} == {0.0}


def test_demonstrations_are_the_nearest_pool_examples_or_fixed(collection, scripted):
    question = "Who wrote the christmas song mary did you know?"
    nearest = demos_for(question, Shots(k=2))
    assert nearest[-1].question == "Who wrote the song mary did you know?"  # most similar, next to the question
    assert (
        demos_for(question, Shots(k=3, selection="fixed"))
        == demos_for("Where is the Danube?", Shots(k=3, selection="fixed"))
        == list(load_demos(DEMO_FILE, AmbiguityDemo)[:3])
    )
    name, model = scripted(script("Yes"))
    agent.run(question, method="diva", llm=name, collection=collection, fewshot=2)
    typing, interpreting = model.calls[0], model.calls[1]
    assert typing.system.count("Example\n") == interpreting.system.count("Example\n") == 2
    assert "Who wrote the lyrics for the song mary did you know?" in interpreting.system
    assert "##Reason: " in typing.system and "Long answer: " in typing.system  # one casebook for I_a ... I_g


def test_every_diva_call_starts_with_the_questions_casebook_and_prefills_it_once(collection, scripted):
    question = "Who wrote the christmas song mary did you know?"
    name, model = scripted(script("Yes"))
    result = agent.run(question, method="diva", llm=name, collection=collection)
    book = model.calls[0].system
    assert book.startswith("Types of ambiguity.") and len(model.calls) >= 5  # the same for every question: first
    assert book.index("[AmbLoc]") < book.index("Worked examples.") < book.index("Example\n")
    assert "[AmbLoc] The place" not in model.calls[0].user  # I_a's turn names the types; their definitions come first
    assert all(call.system.startswith(book) for call in model.calls)
    total = result.usage.total
    assert total.prefilled_tokens <= 0.5 * total.input_tokens, result.usage.by_node
    name, model = scripted(script("Yes"))
    agent.run(question, method="diva", llm=name, collection=collection, extract_layout="own_examples")
    assert [c.prompt for c in model.calls if not c.system.startswith(book)] == ["rag_extract_examples"]


def test_the_type_definitions_open_divas_casebook_even_without_demonstrations():
    from agent.steps.casebook import CALL_ROOM, casebook

    question = "Who wrote the christmas song mary did you know?"
    bare, full = casebook(question, Shots(k=0), "ambiguity"), casebook(question, Shots(k=2), "ambiguity")
    assert bare.startswith("Types of ambiguity.") and "[N/A]" in bare and "Worked examples." not in bare
    assert full.startswith(bare + "\n\nWorked examples.")  # one prefix for every question, examples after it
    assert casebook(question, Shots(k=0), "pool") == ""  # the other sources have no preface
    book = casebook(question, Shots(k=5, budget=2900), "ambiguity")  # DIVA's default: the definitions use the room
    examples = book.split("\n\nExample\n", 1)[1]
    assert estimate_tokens(bare) + estimate_tokens(examples) <= 2900 - CALL_ROOM  # each call stays as long as before


def test_the_next_question_finds_the_type_definitions_in_the_prefix_cache(collection, scripted):
    from agent.llm.prompts import load_preface

    name, model = scripted(script("Yes"))
    agent.run("Who wrote the christmas song mary did you know?", method="diva", llm=name, collection=collection)
    result = agent.run("Who played flash gordon in the tv series?", method="diva", llm=name, collection=collection)
    typing = result.usage.by_node["type_ambiguity"]  # its examples differ; the definitions before them do not
    assert typing.cached_tokens >= len(load_preface("ambiguity_types").split()) > 100


def test_verify_and_i_e_open_their_turn_with_the_same_passages_so_i_e_prefills_only_its_own_part(collection, scripted):
    """casebook_short: the casebook's worked examples (system), then the question's passages opening the user turn,
    then the call's instruction and question. Verify's calls and I_e share all but their instructions, so I_e prefills
    only its own; its JSON schema describes a DA as a few words, never a sentence."""
    name, model = scripted(script("Yes"))
    result, _ = run(name, collection)  # the default layout
    verify = [c for c in model.calls if c.prompt == "verify"]
    extract = next(c for c in model.calls if c.prompt == "rag_extract_short")
    heading = "Passages retrieved for the question:\n"
    assert all(heading not in c.system for c in [*verify, extract])
    evidence, own_part = extract.user.split("\n\nYou clarify an ambiguous question")
    assert evidence.startswith(heading) and all(p.title in evidence for p in result.extra["kept"])
    assert all(c.user.startswith(f"{evidence}\n\nYou check retrieved documents") for c in verify)
    assert extract.user.endswith(f"Question: {QUESTION}\nDisambiguations:")
    own = len(re.findall(r"\w+|[^\w\s]", f"clarify an ambiguous question{own_part}"))  # "You" opens both instructions
    assert result.usage.by_node["rag_extract"].prefilled_tokens == own
    answer = ShortExtractedPairs.model_json_schema()["$defs"]["ShortQAPair"]["properties"]["answer"]
    assert "never a sentence" in answer["description"]  # what a grammar-constraining endpoint gets with the prompt
    assert {d.answer for d in result.disambiguations} == {"4 November 2001", "16 November 2001"}


def test_i_g_continues_i_e_s_conversation_and_prefills_only_its_own_turn(collection, scripted):
    """casebook_short: I_g's prompt is I_e's (casebook, passages, instruction, question), I_e's reply, then I_g's turn,
    so the prefix cache serves all of I_e's prompt; own_examples, or an unusable I_e reply, read the shared casebook +
    passages instead."""
    name, model = scripted(script("Yes"))
    result, _ = run(name, collection)
    extract = next(c for c in model.calls if c.prompt == "rag_extract_short")
    generate = next(c for c in model.calls if c.prompt == "rag_generate")
    assert generate.messages[: len(extract.messages)] == extract.messages
    assert len(generate.messages) == len(extract.messages) + 2
    reply = generate.messages[len(extract.messages)]
    assert isinstance(reply, AIMessage) and reply.content == EXTRACT
    assert generate.user.startswith("You write the final answer") and "DA 2: 16 November 2001" in generate.user
    own_turn = len(re.findall(r"\w+|[^\w\s]", EXTRACT + " " + generate.user)) + 2  # + the two role markers
    assert result.usage.by_node["rag_generate"].prefilled_tokens == own_turn
    assert result.answer.startswith(GENERATE.removeprefix("Answer: ").rstrip("."))

    for layout, replies in (
        ("own_examples", script("Yes")),
        ("casebook_short", script("Yes") | {"rag_extract_short": "%%%@@@ ~~~"}),
    ):
        name, model = scripted(replies)
        run(name, collection, extract_layout=layout)
        generate = next(c for c in model.calls if c.prompt == "rag_generate")
        assert len(generate.messages) == 2 and "Passages retrieved for the question:" in generate.system


def test_i_e_reads_its_own_nearest_pool_examples_then_the_passages_and_the_question(collection, scripted):
    """The paper's I_e layout: instruction, k examples of a demo's evidence → its DQ/DA pairs (no typing, no long
    answer), then the question's passages and the question in the per-call part, within ``extract_prompt_tokens``."""
    name, model = scripted(script("Yes"))
    result, _ = run(name, collection, extract_layout="own_examples")
    extract = next(c for c in model.calls if c.prompt == "rag_extract_examples")
    nearest = pool_demos(QUESTION, Shots())
    assert extract.system.startswith("You clarify ambiguous questions") and extract.system.count("Example\n") >= 4
    assert (
        f"Question: {nearest[-1].question}\nDisambiguations:\nDQ 1: {nearest[-1].pairs[0].question}" in extract.system
    )
    assert (
        "Context:\n[1] " in extract.system and "Long answer" not in extract.system and "##Reason" not in extract.system
    )
    assert extract.user.startswith("Context:\n[1] ") and extract.user.endswith(
        f"Question: {QUESTION}\nDisambiguations:"
    )
    assert all(p.title in extract.user for p in result.extra["kept"])
    assert sum(estimate_tokens(str(m.content)) for m in extract.messages) <= DivaContext().extract_prompt_tokens
    name, model = scripted(script("Yes"))
    run(name, collection, extract_layout="own_examples", extract_prompt_tokens=1200)
    extract = next(c for c in model.calls if c.prompt == "rag_extract_examples")
    assert extract.system.count("Example\n") < 4  # a smaller budget drops the least similar examples
    assert sum(estimate_tokens(str(m.content)) for m in extract.messages) <= 1200


def test_diva_prompts_keep_its_tighter_budget_and_the_nearest_demos(collection, scripted):
    """DIVA's default budget (2,900) is below the other methods' (3,300): every call stays within it, and its shorter
    casebook keeps the nearest demos (the least similar are dropped first)."""
    question = "Who wrote the christmas song mary did you know?"
    diva, shared = DivaContext(), RunContext()
    assert diva.prompt_tokens < shared.prompt_tokens
    tight, roomy = diva.casebook(question, "ambiguity"), shared.casebook(question, "ambiguity")
    assert estimate_tokens(tight) < estimate_tokens(roomy)
    nearest = [demo.question for demo in demos_for(question, diva.shots())]  # most similar last
    shown = [q for q in nearest if f"Question: {q}\n" in tight]
    assert shown and shown == nearest[-len(shown) :]
    name, model = scripted(script("Yes"))
    agent.run(question, method="diva", llm=name, collection=collection)
    assert all(call.system.startswith(tight) for call in model.calls)
    for call in model.calls:
        assert sum(estimate_tokens(str(m.content)) for m in call.messages) <= diva.prompt_tokens


def test_ambiguity_demonstrations_cover_every_type_and_come_from_the_pool():
    demos = load_demos(DEMO_FILE, AmbiguityDemo)
    pool = {d.id: d for d in load_demos("asqa_pool", PoolExample)}
    assert {t for d in demos for t in d.types} == {"AmbSub", "AmbObj", "AmbPred", "AmbTime", "AmbLoc", "N/A"}
    for demo in demos:
        row = pool[demo.pool_id]
        if demo.types == ["N/A"]:  # a single gold reading of a pool question
            assert demo.interpretations == [demo.question] and demo.question in [p.question for p in row.qa_pairs]
        else:
            assert demo.question == row.question and demo.interpretations == [p.question for p in row.qa_pairs]


def test_demo_llm_runs_diva_end_to_end(collection):
    result = agent.run(QUESTION, method="diva", llm="fake", collection=collection)
    assert result.extra["route"] == "rag" and result.answer
    assert len(result.extra["interpretations"]) == 2


def test_diva_exports_the_shared_contract_and_why_it_routed():
    from graphs.diva import graph

    assert set(graph.get_input_jsonschema()["properties"]) == {"question", "messages"}  # agent.chat
    properties = set(graph.get_output_jsonschema()["properties"])
    assert {
        "answer",
        "disambiguations",
        "passages",
        "usage",
        "grade",
        "route",
        "verdicts",
        "interpretations",
    } <= properties


def test_with_the_cross_encoder_relevance_is_its_score_for_each_interpretation(collection, scripted):
    name, _ = scripted(script("Yes"))
    updates = {}
    result, _ = run(name, collection, updates, reranker="cross-encoder", rerank_depth=4)
    scored = updates["prune"]["scored"]
    assert scored and all(0.0 < r < 1.0 for s in scored for r in s.relevance)  # sigmoid scores, not cosines
    assert all(len(s.relevance) == len(result.extra["interpretations"]) for s in scored)
    assert [p.score for p in result.extra["kept"]] == sorted((s.score for s in scored), reverse=True)[:5]
