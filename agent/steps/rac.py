"""Retrieval-augmented clarification (RAC), shared by rag, DIVA and ToC: extract DQ/DA pairs, draft the answer.

Prompts I_e (``rag_extract``), I_g (``rag_generate``) and I_l (``closed_book``) of the DIVA paper (App. D), with the
k pool demonstrations nearest to the question (DIVA A.4; ToC A.3 found demonstrations with disambiguations help).
The demonstrations are the question's casebook (``agent.steps.casebook``): every call of a question starts with the
same examples and passages, so the second call prefills only its instruction. DIVA's I_e has its own two layouts
(``extract_layout``), because after that shared prefix the small local model writes sentences as short answers
(docs/answers.md): ``extract(short=True)``, its default — the casebook, then the passages opening the user turn (as
DIVA's verify calls open theirs), the instruction and the question, with a schema asking for short answers, whose
conversation DIVA's I_g continues (``short_extract_transcript``) — and ``extract_with_examples``, the paper's own
prompt (its own examples: a demo's passages → its DQ/DA pairs). The draft then goes through the answer step's checks
(``agent.answer_step``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langchain_core.messages import BaseMessage

from agent.llm.calls import LLMOptions, Reply, aask, transcript
from agent.llm.parsing import (
    ParseError,
    misnumbered_disambiguations,
    parse_answer,
    parse_disambiguations,
    whole_sentences,
)
from agent.llm.prompts import estimate_tokens, load_prompt
from agent.schemas import Disambiguation, ExtractedPairs, Passage, QAPair, ShortExtractedPairs
from agent.steps.casebook import evidence, shared_prefix
from agent.steps.fewshot import PoolExample, Shots, fit_examples, pool_demos
from agent.text import contains_answer, normalize_answer, render_pairs, render_passages, states_nothing, supporting_ids


async def extract(
    question: str, passages: list[Passage], options: LLMOptions, book: str, short: bool = False
) -> Reply[list[Disambiguation]]:
    """I_e: disambiguated questions with answers found in ``passages``; none when the output stays unusable.
    ``short``: the passages open the call's own turn, before the instruction, and a schema asks for short answers."""
    call = _short_extract_call(question, passages, book) if short else _extract_call(question, passages, book)
    prompt, schema = ("rag_extract_short", ShortExtractedPairs) if short else ("rag_extract", ExtractedPairs)
    reply: Reply[list[QAPair]] = await aask(
        prompt, options, parse=parse_disambiguations, schema=schema, fallback=[], **call
    )
    reply = await _short_answers(reply, options, transcript(prompt, options, reply.text, schema=schema, **call))
    return reply.with_value(_readings(question, reply, passages, book))


def _extract_call(question: str, passages: list[Passage], book: str) -> dict[str, Any]:
    return {"prefix": shared_prefix(book, passages), "question": question}


def _short_extract_call(question: str, passages: list[Passage], book: str) -> dict[str, Any]:
    return {"prefix": shared_prefix(book), "question": question, "evidence": evidence(passages)}


async def extract_with_examples(
    question: str, passages: list[Passage], options: LLMOptions, shots: Shots
) -> Reply[list[Disambiguation]]:
    """I_e with its own ``shots.k`` nearest pool demonstrations, fitted to ``shots.budget``; nothing shared with the
    question's other calls, so the whole prompt is prefilled."""
    variables: dict[str, Any] = {"passages": render_passages(passages) or "(none)", "question": question}
    examples = await asyncio.to_thread(_extraction_examples, question, shots, variables)
    reply: Reply[list[QAPair]] = await aask(
        "rag_extract_examples",
        options,
        parse=parse_disambiguations,
        schema=ExtractedPairs,
        fallback=[],
        examples=examples,
        **variables,
    )
    history = transcript(
        "rag_extract_examples", options, reply.text, schema=ExtractedPairs, examples=examples, **variables
    )
    reply = await _short_answers(reply, options, history)
    return reply.with_value(_readings(question, reply, passages, examples))


SHORT_ANSWER_WORDS = 20
"""A DA of more words is a sentence or a whole passage, not the short answer I_e asks for (ASQA's short answers have
a few words); an answer written from it copies that passage (docs/answers.md)."""
SHORT_PAIR_WORDS = 8  # a misnumbered pair's answer of up to this many words is short enough to be a reading


def _short(answer: str) -> bool:
    """A short pair answer, not a sentence."""
    return 0 < len(normalize_answer(answer).split()) <= SHORT_PAIR_WORDS


async def _short_answers(
    reply: Reply[list[QAPair]], options: LLMOptions, history: list[BaseMessage]
) -> Reply[list[QAPair]]:
    """I_e's pairs whose answers run past ``SHORT_ANSWER_WORDS``, asked for again in the same conversation (its prefix
    is cached; ``rag_shorten``), once, with the run's retries. A pair takes its new answer where that is short enough;
    else it stays as it was (I_g then rephrases what it would copy). The reply's text stays the first one."""
    long = [i for i, p in enumerate(reply.value) if len(p.answer.split()) > SHORT_ANSWER_WORDS]
    if not long:
        return reply
    wanted = {normalize_answer(reply.value[i].question): i for i in long}
    others = {normalize_answer(p.question) for i, p in enumerate(reply.value) if i not in long}

    def shortened(text: str) -> dict[int, str]:  # pair index -> its short answer
        pairs = [p for p in parse_disambiguations(text) if normalize_answer(p.question) not in others]
        found = [(wanted.get(normalize_answer(p.question)), p.answer) for p in pairs]
        if all(i is None for i, _ in found) and len(pairs) == len(long):  # questions reworded: taken in order
            found = list(zip(long, (p.answer for p in pairs)))
        answers = {i: a for i, a in found if i is not None and len(a.split()) <= SHORT_ANSWER_WORDS}
        if not answers:
            raise ParseError(f"no answer of at most {SHORT_ANSWER_WORDS} words to the questions asked")
        return answers

    listing = "\n".join(f"DQ {i + 1}: {reply.value[i].question}" for i in long)
    again: Reply[dict[int, str]] = await aask(
        "rag_shorten", options, parse=shortened, schema=ExtractedPairs, fallback={}, history=history, questions=listing
    )
    pairs = [QAPair(question=p.question, answer=again.value.get(i, p.answer)) for i, p in enumerate(reply.value)]
    return Reply(
        pairs, reply.text, reply.usage + again.usage, reply.attempts + again.attempts, reply.parsed, reply.truncated
    )


def _extraction_examples(question: str, shots: Shots, variables: dict[str, str]) -> str:
    prompt = load_prompt("rag_extract_examples")
    room = shots.budget - estimate_tokens(
        prompt.instruction.substitute(examples="") + prompt.user.substitute(variables)
    )
    return fit_examples(pool_demos(question, shots), _extraction_example, room)


def _extraction_example(demo: PoolExample, words: int) -> str:
    passages = render_passages(demo.passages, words, focus=demo.answers)
    return f"Context:\n{passages}\n\nQuestion: {demo.question}\nDisambiguations:\n{render_pairs(demo.pairs)}"


def _readings(
    question: str, reply: Reply[list[QAPair]], passages: list[Passage], demonstration: str
) -> list[Disambiguation]:
    """I_e's pairs (with those of ``misnumbered`` DAs that pass its checks) as readings: those that answer
    (``answered``), with the ids of the passages that hold each answer, less those borrowed from the worked examples
    (``unborrowed_pairs``)."""
    pairs = distinct_pairs([*reply.value, *misnumbered(question, reply, passages)])
    supported = [
        Disambiguation(question=p.question, answer=p.answer, passage_ids=supporting_ids(p.answer, passages))
        for p in answered(pairs)
    ]
    return unborrowed_pairs(supported, demonstration)


def distinct_pairs(pairs: list[QAPair]) -> list[QAPair]:
    """``pairs`` with each (question, answer) once, normalised, in first-seen order: the small model repeats a pair
    word for word (the same passage sentence as the answer to one question three times). A longer answer that holds a
    shorter one stays: it may state a second reading ("Winston Churchill and Lord Wavell")."""
    first: dict[tuple[str, str], QAPair] = {}
    for pair in pairs:
        first.setdefault((normalize_answer(pair.question), normalize_answer(pair.answer)), pair)
    return list(first.values())


def misnumbered(question: str, reply: Reply[list[QAPair]], passages: list[Passage]) -> list[QAPair]:
    """The pairs of ``reply`` whose DA is numbered unlike its DQ ("DQ 3: …Annecy…? DA 1: June 14, 2017"), which the
    parser leaves out, kept only where they read as new readings. A misnumbered reply has mostly gone wrong: taken
    as they came, such pairs repeated one passage sentence for several DQs, answered other questions (a film's
    studio and year as where it was filmed) and made one answer copy a passage (docs/answers.md). So one is kept
    where its answer is short (up to ``SHORT_PAIR_WORDS`` words), a passage holds it, no other pair's answer holds
    it or is held by it, and its DQ asks what the question asks (``asks_same``); the last pair of a reply cut at its
    token cap is left out where it ends the reply (its answer may be cut)."""
    cut = normalize_answer(reply.text) if reply.truncated else None
    kept = list(reply.value)
    for pair in misnumbered_disambiguations(reply.text):
        if cut is not None and cut.endswith(normalize_answer(pair.answer)):
            continue
        new = not any(contains_answer(p.answer, pair.answer) or contains_answer(pair.answer, p.answer) for p in kept)
        grounded = any(contains_answer(p.full_text, pair.answer) for p in passages)
        if new and grounded and _short(pair.answer) and asks_same(question, pair.question):
            kept.append(pair)
    return kept[len(reply.value) :]


_ASKS = re.compile(r"\b(who|whom|whose|when|where|why|how|what|which)\b(?:\s+(\w+))?", re.IGNORECASE)
_TIME_WORDS = {"year", "years", "date", "day", "month", "decade", "century", "time", "season", "episode"}


def asks_same(question: str, disambiguated: str) -> bool:
    """Whether ``disambiguated`` asks for what ``question`` asks: the same question word, with "who/whom/whose" alike
    and "what/which year (date, day, …)" read as "when"; any other "what/which" ("Which actor …?") may ask what
    either asks, and so may a question without a question word."""
    wanted, asked = _asked(question), _asked(disambiguated)
    return wanted is None or asked is None or wanted == asked or "what" in (wanted, asked)


def _asked(text: str) -> str | None:
    match = _ASKS.search(text)
    if not match:
        return None
    word, following = match[1].lower(), (match[2] or "").lower()
    if word in ("whom", "whose"):
        return "who"
    if word in ("what", "which"):
        return "when" if following in _TIME_WORDS else "what"
    return word


def answered(pairs: list[QAPair]) -> list[QAPair]:
    """``pairs`` less those whose answer says there is none ("Not specified in the passage": I_e filling a reading
    it found no answer for); such a pair is no reading, and its words would talk about the sources."""
    return [p for p in pairs if not states_nothing(p.answer)]


def unborrowed_pairs(pairs: list[Disambiguation], demonstration: str) -> list[Disambiguation]:
    """``pairs`` less those whose answer no passage holds and the worked examples (``demonstration``) state: the small
    model copying an example's answer into its own reading ("Peter Anthony Allen", the last man hanged in England,
    as Canada's last execution; "Bangalore", from an example about its railway station, as the Manchester of India).
    An answer that neither holds stays: it is the model's own knowledge, as in a closed-book answer."""
    return [p for p in pairs if p.passage_ids or not contains_answer(demonstration, p.answer)]


def short_extract_transcript(
    question: str, passages: list[Passage], options: LLMOptions, book: str, reply: str
) -> list[BaseMessage]:
    """The conversation of ``extract(short=True)`` for these passages, ending with its ``reply``: calls that continue
    it (DIVA's I_g) find the casebook and the passages in it, and the prefix cache serves all of it."""
    call = _short_extract_call(question, passages, book)
    return transcript("rag_extract_short", options, reply, schema=ShortExtractedPairs, **call)


async def draft(
    question: str,
    pairs: list[Disambiguation],
    passages: list[Passage],
    options: LLMOptions,
    book: str,
    history: list[BaseMessage] | None = None,
) -> Reply[str]:
    """I_g: the long-form answer's first draft, after the shared casebook + passages, or continuing ``history`` (which
    holds them); '' when no usable reply comes back (the answer step's checks then ask again)."""
    call: dict[str, Any] = {"question": question, "disambiguations": render_pairs(pairs)}
    call |= {"history": history} if history else {"prefix": shared_prefix(book, passages)}
    return await aask("rag_generate", options, parse=parse_answer, fallback="", **call)


def grounds(question: str, pairs: list[Disambiguation], passages: list[Passage]) -> list[str]:
    """What an answer may take its facts from: the question, its pairs and its passages."""
    return [question, *(f"{p.question} {p.answer}" for p in pairs), *(p.full_text for p in passages)]


async def closed_book(question: str, options: LLMOptions, book: str) -> Reply[str]:
    """I_l: answer from parametric knowledge alone; an unusable reply after the retries is an ``OutputError``."""
    reply = await aask("closed_book", options, parse=parse_answer, prefix=shared_prefix(book), question=question)
    return reply.with_value(whole_sentences(reply.value)) if reply.truncated else reply
