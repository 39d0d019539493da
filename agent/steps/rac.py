"""Retrieval-augmented clarification (RAC), shared by rag, DIVA and ToC: extract DQ/DA pairs, write the answer.

Prompts I_e (``rag_extract``), I_g (``rag_generate``) and I_l (``closed_book``) of the DIVA paper (App. D), with the
k pool demonstrations nearest to the question (DIVA A.4; ToC A.3 found demonstrations with disambiguations help).
The demonstrations are the question's casebook (``agent.steps.casebook``): every call of a question starts with the
same examples and passages, so the second call prefills only its instruction. DIVA's I_e has its own two layouts
(``extract_layout``), because after that shared prefix the small local model writes sentences as short answers
(docs/answers.md): ``extract(short=True)``, its default — the casebook, then the passages opening the user turn (as
DIVA's verify calls open theirs), the instruction and the question, with a schema asking for short answers, whose
conversation DIVA's I_g continues (``short_extract_transcript``) — and ``extract_with_examples``, the paper's own
prompt (its own examples: a demo's passages → its DQ/DA pairs).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from agent.llm.calls import LLMOptions, OutputError, Reply, aask, transcript
from agent.llm.parsing import (
    ParseError,
    misnumbered_disambiguations,
    parse_disambiguations,
    parse_long_answer,
    sentences,
    strip_label,
    whole_sentences,
    worded,
)
from agent.llm.prompts import estimate_tokens, load_prompt, render
from agent.retrieval.terms import content_words
from agent.schemas import Disambiguation, ExtractedPairs, Passage, QAPair, ShortExtractedPairs
from agent.steps.casebook import evidence, shared_prefix
from agent.steps.fewshot import PoolExample, Shots, fit_examples, pool_demos
from agent.text import (
    CONCLUSION,
    COPY_LIMIT,
    contains_answer,
    copied_runs,
    longest_copied_run,
    normalize_answer,
    render_pairs,
    render_passages,
    states_nothing,
    supporting_ids,
    unborrowed,
    uncopied,
    unnarrated,
)


async def extract(
    question: str, passages: list[Passage], options: LLMOptions, book: str, short: bool = False
) -> Reply[list[Disambiguation]]:
    """I_e: disambiguated questions with answers found in ``passages``; none when the output stays unusable.
    ``short``: the passages open the call's own turn, before the instruction, and a schema asks for short answers."""
    call = _short_extract_call(question, passages, book) if short else _extract_call(question, passages, book)
    prompt, schema = ("rag_extract_short", ShortExtractedPairs) if short else ("rag_extract", ExtractedPairs)
    reply = await aask(prompt, options, parse=parse_disambiguations, schema=schema, fallback=[], **call)
    reply = await _short_answers(reply, options, transcript(prompt, options, reply.text, schema=schema, **call))
    return reply.with_value(_readings(question, reply, passages, book))


def _extract_call(question: str, passages: list[Passage], book: str) -> dict[str, str]:
    return {"prefix": shared_prefix(book, passages), "question": question}


def _short_extract_call(question: str, passages: list[Passage], book: str) -> dict[str, str]:
    return {"prefix": shared_prefix(book), "question": question, "evidence": evidence(passages)}


async def extract_with_examples(
    question: str, passages: list[Passage], options: LLMOptions, shots: Shots
) -> Reply[list[Disambiguation]]:
    """I_e with its own ``shots.k`` nearest pool demonstrations, fitted to ``shots.budget``; nothing shared with the
    question's other calls, so the whole prompt is prefilled."""
    variables = {"passages": render_passages(passages) or "(none)", "question": question}
    examples = await asyncio.to_thread(_extraction_examples, question, shots, variables)
    reply = await aask(
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
SHORT_PAIR_WORDS = 8  # a pair answer of up to this many words must appear in the long answer word for word


def _short(answer: str) -> bool:
    """A pair answer the long answer must state word for word (a sentence-long one may be put shorter)."""
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
    again = await aask(
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


async def generate(
    question: str,
    pairs: list[Disambiguation],
    passages: list[Passage],
    options: LLMOptions,
    book: str,
    history: list[BaseMessage] | None = None,
    complete: bool = False,
) -> Reply[str]:
    """I_g: the long-form answer, after the shared casebook + passages, or continuing ``history`` (which holds
    them). The answer states facts: sentences that talk about the sources ("the passage retrieved for the question
    states ...") are dropped and a reply with nothing else is asked for again; sentences that state a number of the
    casebook's examples that nothing read holds are dropped too (``unborrowed_answer``); with ``complete`` the
    readings an answer leaves out are added as sentences (``completed``); and an answer that copies
    ``COPY_LIMIT`` or more consecutive words of a passage is rewritten (``unquoted``). If no usable text comes back,
    the answer lists the pairs; without pairs that is an ``OutputError`` (an unusable reply is never the answer)."""
    call: dict[str, Any] = {"question": question, "disambiguations": render_pairs(pairs)}
    call |= {"history": history} if history else {"prefix": shared_prefix(book, passages)}
    reply = await aask("rag_generate", options, parse=statements, fallback="", **call)
    if not reply.value:
        if not pairs:
            raise OutputError(f"prompt 'rag_generate': no usable answer; last: {reply.text[:200]!r}")
        return reply.with_value(listed(pairs))
    reply = await restated(whole_answer(reply), [p.answer for p in pairs], "rag_generate", call, options)
    held = grounds(question, pairs, passages)
    reply = await unborrowed_answer(reply, question, pairs, passages, book, options, held)
    if complete:
        reply = await completed(reply, pairs, book, question, options, held)
    sources = [p.full_text for p in passages]
    copied = copied_runs(reply.value, sources, COPY_LIMIT)
    return await unquoted(reply, copied, sources, call, pairs, options, book) if copied else reply


async def restated(
    reply: Reply[str], answers: list[str], prompt: str, call: dict[str, Any], options: LLMOptions
) -> Reply[str]:
    """``reply`` (to ``prompt`` with ``call``, parsed by ``statements``) if it still states every one of ``answers``
    it gave. Else the sentences dropped for talking about the sources carried those answers ("This passage clearly
    indicates that Conry practiced law in Boston" once the lead-in is not one ``unnarrated`` knows): the answer is
    asked for again in the same conversation (``rag_restate``; its prefix is cached), with the run's retries, and
    kept only if it states every answer the first reply gave, lost or kept; else ``reply`` stays."""
    stated = [a for a in dict.fromkeys(answers) if contains_answer(reply.text, a)]  # the lost ones and the kept ones
    lost = [a for a in stated if not contains_answer(reply.value, a)]
    if not lost:
        return reply

    def stating(text: str) -> str:
        answer = statements(text)
        if missing := [a for a in stated if not contains_answer(answer, a)]:
            raise ParseError(f"the answer leaves out {missing[0]!r}")
        return answer

    conversation = [*render(prompt, **call), AIMessage(content=reply.text)]
    listing = "\n".join(f"- {a}" for a in lost)
    again = await aask("rag_restate", options, parse=stating, fallback="", history=conversation, answers=listing)
    chosen = whole_answer(again) if again.value else reply
    usage, attempts = reply.usage + again.usage, reply.attempts + again.attempts
    return Reply(chosen.value, chosen.text, usage, attempts, chosen.parsed, chosen.truncated)


def grounds(question: str, pairs: list[Disambiguation], passages: list[Passage]) -> list[str]:
    """What an answer may take its facts from: the question, its pairs and its passages."""
    return [question, *(f"{p.question} {p.answer}" for p in pairs), *(p.full_text for p in passages)]


async def unborrowed_answer(
    reply: Reply[str],
    question: str,
    pairs: list[Disambiguation],
    passages: list[Passage],
    book: str,
    options: LLMOptions,
    held: list[str],
) -> Reply[str]:
    """``reply`` less the sentences that state a number of the casebook's worked examples (``book``) that neither the
    passages, the question nor the pairs hold: the small model copying an example's date into its own answer
    ("released on June 22, 2001", a Fast and Furious example's date, about Pirates of the Caribbean, whose pair says
    2003; ``held``: the ``grounds``). Where one is dropped, the readings the rest leaves out are written from their
    pairs and appended (``completed``, whose sentences must not borrow either); where nothing is left and that fails,
    the pairs are listed. Without pairs the rest is the answer, or ``reply`` where nothing is left."""
    kept = unborrowed(reply.value, book, held, numbers_only=True)
    if kept == " ".join(sentences(reply.value)):
        return reply
    if not pairs:
        return reply.with_value(kept or reply.value)
    reply = await completed(reply.with_value(kept), pairs, book, question, options, held)
    return reply if reply.value else reply.with_value(listed(pairs, [p.full_text for p in passages]))


async def completed(
    reply: Reply[str], pairs: list[Disambiguation], book: str, question: str, options: LLMOptions, held: list[str]
) -> Reply[str]:
    """``reply`` if it states the short answer (up to ``SHORT_PAIR_WORDS`` words) of every pair. Else the small model
    kept one reading of several (ToC's tree hands it up to ten); asked to write its answer again with the others, it
    repeats it. So the readings left out are written as sentences (``rag_generate_pairs`` over those pairs alone: the
    casebook, cached, and no passages to copy), with the run's retries, and appended if they state at least one of
    their answers once the sentences that borrow a number of the casebook's examples that ``held`` lacks are dropped
    (``unborrowed``: "released on June 19, 2003" for a pair that says 2003); else ``reply`` stays. A reply that is
    only the answers ("Video games", "1861": nothing saying what they answer) is appended as those pairs ``listed``."""
    short = {normalize_answer(p.answer): p for p in pairs if _short(p.answer)}
    missing = [p for p in short.values() if not contains_answer(reply.value, p.answer)]
    if not missing:
        return reply

    def stating_one(text: str) -> str:
        try:
            addition = unborrowed(statements(text), book, held, numbers_only=True)
        except ParseError:
            addition = strip_label(text)  # one word ("1861") is no long answer, but may be a bare one
            if not _bare(addition, missing):
                raise
        stated = [p for p in missing if contains_answer(addition, p.answer)]
        if not stated:
            raise ParseError("the sentences state none of the readings left out (or borrow the examples' numbers)")
        return listed(stated) if _bare(addition, stated) else addition

    more = await aask(
        "rag_generate_pairs", options, parse=stating_one, fallback="", prefix=shared_prefix(book),
        question=question, disambiguations=render_pairs(missing),
    )  # fmt: skip
    more = whole_answer(more) if more.value else more
    value = " ".join(filter(None, [reply.value and _ended(reply.value), more.value])) if more.value else reply.value
    return Reply(
        value, reply.text, reply.usage + more.usage, reply.attempts + more.attempts, reply.parsed, reply.truncated
    )


def _bare(addition: str, pairs: list[Disambiguation]) -> bool:
    """Whether ``addition`` is only the answers of ``pairs``: no word of it says what they answer."""
    answered = {w for p in pairs for w in content_words(p.answer)}
    return set(content_words(addition)) <= answered


async def unquoted(
    reply: Reply[str],
    copied: list[str],
    sources: list[str],
    call: dict[str, Any],
    pairs: list[Disambiguation],
    options: LLMOptions,
    book: str,
) -> Reply[str]:
    """An answer that quotes a passage (``copied``: its stretches of ``COPY_LIMIT`` or more words), rewritten: first
    ``rephrased``; failing that, the pairs are written out as sentences (``written_from_pairs``), kept if it copies
    less than the first answer, which otherwise stays. What is kept then has the sentences that still copy cut back to
    a clause or dropped (``uncopied``) unless nothing is left or a pair's short answer would go with them; only where
    that leaves nothing and the pairs could not be written out are they listed (those whose answer is not itself a
    quote), if the list copies less."""
    again = await rephrased(reply, copied, sources, [p.answer for p in pairs], "rag_generate", call, options)
    usage, attempts = reply.usage + again.usage, reply.attempts + again.attempts
    if again.value or not pairs:
        chosen = whole_answer(again) if again.value else reply.with_value(uncopied(reply.value, sources) or reply.value)
        return Reply(chosen.value, chosen.text, usage, attempts, chosen.parsed, chosen.truncated)
    shorts = [p.answer for p in pairs if _short(p.answer)]
    fresh = await written_from_pairs(call["question"], call["disambiguations"], pairs, options, book)
    usage, attempts = usage + fresh.usage, attempts + fresh.attempts
    most = len(copied[0].split())
    chosen = whole_answer(fresh) if fresh.value and longest_copied_run(fresh.value, sources) < most else reply
    value = uncopied(chosen.value, sources, shorts)
    if not value and not fresh.value and longest_copied_run(listed(pairs, sources), sources) < most:
        value = listed(pairs, sources)
    return Reply(value or chosen.value, chosen.text, usage, attempts, chosen.parsed, chosen.truncated)


async def written_from_pairs(
    question: str, disambiguations: str, pairs: list[Disambiguation], options: LLMOptions, book: str
) -> Reply[str]:
    """The answer written from the pairs alone (``rag_generate_pairs`` over ``disambiguations``, their rendering:
    the casebook ``book``, cached, and no passages to copy), with the run's retries: every short answer of up to
    ``SHORT_PAIR_WORDS`` words must appear word for word (a sentence-long one may be put shorter) and at least one
    pair must be stated; its value is '' when no reply does."""
    shorts = [p.answer for p in pairs if _short(p.answer)]

    def stated(text: str) -> str:
        answer = statements(text)
        missing = [a for a in shorts if not contains_answer(answer, a)]
        if missing:
            raise ParseError(f"the answer leaves out {missing[0]!r}")
        words = set(content_words(answer))
        if not any(len(words & set(content_words(p.answer))) * 2 >= len(set(content_words(p.answer))) for p in pairs):
            raise ParseError("the answer states none of the pairs")  # e.g. an echo of the instruction
        return answer

    return await aask(
        "rag_generate_pairs", options, parse=stated, fallback="", prefix=shared_prefix(book),
        question=question, disambiguations=disambiguations,
    )  # fmt: skip


async def rephrased(
    reply: Reply[str],
    copied: list[str],
    sources: list[str],
    answers: list[str],
    prompt: str,
    call: dict[str, Any],
    options: LLMOptions,
) -> Reply[str]:
    """The rephrasing of ``reply`` (to ``prompt`` with ``call``), which copies the ``copied`` stretches of
    ``sources``: asked in the same conversation (``rag_rephrase``; its prefix is cached), told which stretches it
    copied, with the run's retries; its value is '' unless a rephrasing copies fewer than ``COPY_LIMIT`` words and
    still states each of ``answers`` (the pairs' short answers) that ``reply`` stated."""
    kept = [a for a in dict.fromkeys(answers) if contains_answer(reply.value, a)]

    def unquoted_statements(text: str) -> str:
        answer = statements(text)
        if longest_copied_run(answer, sources) >= COPY_LIMIT:
            raise ParseError("the rephrased answer still copies a passage")
        if missing := [a for a in kept if not contains_answer(answer, a)]:
            raise ParseError(f"the rephrased answer leaves out {missing[0]!r}")
        return answer

    conversation = [*render(prompt, **call), AIMessage(content=reply.text)]
    stretches = "\n".join(f"- «{run}»" for run in copied[:3])
    return await aask(
        "rag_rephrase", options, parse=unquoted_statements, fallback="", history=conversation, copied=stretches
    )


def listed(pairs: list[Disambiguation], sources: Sequence[str] = ()) -> str:
    """The pairs as the answer when no usable text comes back: each question followed by its answer, less the pairs
    whose answer is itself a quote (``COPY_LIMIT`` or more consecutive words of one of ``sources``: a RAC reply that
    copied a sentence as its DA)."""
    kept = [p for p in pairs if longest_copied_run(p.answer, sources) < COPY_LIMIT]
    return " ".join(f"{p.question} {p.answer.rstrip('.')}." for p in kept)


_PAIR_LINE = re.compile(r"(?:^|\s)D[QA] ?\d+:")  # the model carrying on in the DQ/DA format after its answer


def statements(text: str) -> str:
    """A long answer up to any DQ/DA lines (or, where echoed pairs are followed by a conclusion, "Therefore, the final
    answer is: …", that conclusion), its sentences freed of lead-ins that attribute them to the sources and of the dash
    of a list item after a citation and of an item's "Answer:" label, their citations before their stop, and without
    those that still talk about sources or hold no word (a citation is none); a ``ParseError`` when nothing else is
    left."""
    answer, *echoed = _PAIR_LINE.split(parse_long_answer(text))
    if echoed and (conclusion := CONCLUSION.search(echoed[-1])):
        answer = echoed[-1][conclusion.end() :]
    kept = [
        _CITED_AFTER_STOP.sub(r"\2\1", _CITED_DASH.sub(r"\1 ", s))
        for s in map(paired_quotes, map(unnarrated, map(strip_label, sentences(answer))))
        if worded(s)
    ]
    answer = " ".join([*map(_ended, kept[:-1]), *kept[-1:]])
    if not answer:
        raise ParseError("the answer only talks about its sources")
    return answer


_CITED_DASH = re.compile(r"(\[\d+\])\s+[-–—]\s+(?=[a-z])")  # "Richard Dormer [2] - played …" → "… [2] played …"
_CITED_AFTER_STOP = re.compile(r"([.!?])((?:\s*\[\d+\])+)[.!?]?$")  # "… deposit sperm. [8]." → "… sperm [8]."
_SPACED_CLOSE = re.compile(r"""([.!?])\s+(["”])$""")  # 'It includes songs. "': a closing quote set apart


def paired_quotes(sentence: str) -> str:
    """``sentence`` with a closing quote set apart by a space closed up to its stop, and a double quote at its start
    or end dropped where it has no partner in the sentence: the small model quotes runs of sentences ('"X is Y.
    It has Z. " "W was covered. "'), which split and joined again read '". "' between sentences."""
    sentence = _SPACED_CLOSE.sub(r"\1\2", sentence)
    if sentence.count('"') % 2:
        sentence = _unpaired_dropped(sentence, '"', '"')
    opened, closed = sentence.count("“"), sentence.count("”")
    if opened != closed:
        sentence = _unpaired_dropped(sentence, "“" if opened > closed else "", "”" if closed > opened else "")
    return sentence


def _unpaired_dropped(sentence: str, opening: str, closing: str) -> str:
    """``sentence`` less a ``closing`` quote at its end (before or after its stop) or else an ``opening`` one at
    its start; read left to right, the last of an odd number of quotes is the unpaired one."""
    if closing and (end := re.search(rf"""{closing}(?=[.!?]?$)""", sentence)):
        return (sentence[: end.start()] + sentence[end.end() :]).rstrip()
    return sentence[1:].lstrip() if opening and sentence.startswith(opening) else sentence


def _ended(sentence: str) -> str:
    """A list item without a final stop gets one, so the items read as sentences once joined (the last part is left
    as it is: a reply cut at its token cap ends there, and ``whole_answer`` drops it)."""
    return sentence if re.search(r"""[.!?:;]["'”’)\]]*$""", sentence) else f"{sentence}."


async def closed_book(question: str, options: LLMOptions, book: str) -> Reply[str]:
    """I_l: answer from parametric knowledge alone, parsed as ``statements`` (sentences about a context or about the
    answer itself are dropped); an unusable reply after the retries is an ``OutputError``."""
    reply = await aask("closed_book", options, parse=statements, prefix=shared_prefix(book), question=question)
    return whole_answer(reply)


def whole_answer(reply: Reply[str]) -> Reply[str]:
    """A long answer cut at its prompt's ``max_tokens`` ends with its last whole sentence, not mid-word."""
    return reply.with_value(whole_sentences(reply.value)) if reply.truncated else reply
