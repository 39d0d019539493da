"""Retrieval-augmented clarification (RAC), shared by rag, DIVA and ToC: extract DQ/DA pairs, write the answer.

Prompts I_e (``rag_extract``), I_g (``rag_generate``) and I_l (``closed_book``) of the DIVA paper (App. D), with the
k pool demonstrations nearest to the question (DIVA A.4; ToC A.3 found demonstrations with disambiguations help).
The demonstrations are the question's casebook (``agent.steps.casebook``): every call of a question starts with the
same examples and passages, so the second call prefills only its instruction.
"""

from __future__ import annotations

from agent.llm.calls import LLMOptions, Reply, aask
from agent.llm.parsing import parse_disambiguations, parse_long_answer
from agent.schemas import Disambiguation, ExtractedPairs, Passage
from agent.steps.casebook import shared_context
from agent.text import render_pairs, supporting_ids


async def extract(
    question: str, passages: list[Passage], options: LLMOptions, book: str
) -> Reply[list[Disambiguation]]:
    """I_e: disambiguated questions with answers found in ``passages``; none when the output stays unusable."""
    reply = await aask(
        "rag_extract",
        options,
        parse=parse_disambiguations,
        schema=ExtractedPairs,
        fallback=[],
        context=shared_context(book, passages),
        question=question,
    )
    pairs = [
        Disambiguation(question=p.question, answer=p.answer, passage_ids=supporting_ids(p.answer, passages))
        for p in reply.value
    ]
    return reply.with_value(pairs)


async def generate(
    question: str, pairs: list[Disambiguation], passages: list[Passage], options: LLMOptions, book: str
) -> Reply[str]:
    """I_g: the long-form answer. If the model's text stays unusable after the retries, the answer lists the pairs;
    without pairs that is an ``OutputError`` (an unusable reply is never the answer)."""
    fallback = {"fallback": " ".join(f"{p.question} {p.answer}." for p in pairs)} if pairs else {}
    return await aask(
        "rag_generate",
        options,
        parse=parse_long_answer,
        context=shared_context(book, passages),
        question=question,
        disambiguations=render_pairs(pairs),
        **fallback,
    )


async def closed_book(question: str, options: LLMOptions, book: str) -> Reply[str]:
    """I_l: answer from parametric knowledge alone; an unusable reply after the retries is an ``OutputError``."""
    return await aask("closed_book", options, parse=parse_long_answer, context=shared_context(book), question=question)
