"""Retrieval-augmented clarification (RAC), shared by rag, DIVA and ToC: extract DQ/DA pairs, write the answer.

Prompts I_e (``rag_extract``), I_g (``rag_generate``) and I_l (``closed_book``) of the DIVA paper (App. D).
"""

from __future__ import annotations

from agent.llm.calls import LLMOptions, Reply, ask
from agent.llm.parsing import parse_disambiguations, parse_long_answer
from agent.schemas import Disambiguation, ExtractedPairs, Passage
from agent.text import render_passages, supporting_ids


def extract(question: str, passages: list[Passage], options: LLMOptions) -> Reply[list[Disambiguation]]:
    """I_e: disambiguated questions with answers found in ``passages``; none when the output stays unusable."""
    reply = ask(
        "rag_extract",
        options,
        parse=parse_disambiguations,
        schema=ExtractedPairs,
        fallback=[],
        passages=render_passages(passages),
        question=question,
    )
    pairs = [
        Disambiguation(question=p.question, answer=p.answer, passage_ids=supporting_ids(p.answer, passages))
        for p in reply.value
    ]
    return reply.with_value(pairs)


def render_pairs(pairs: list[Disambiguation]) -> str:
    if not pairs:
        return "(none found)"
    return "\n".join(f"DQ {i}: {p.question}\nDA {i}: {p.answer}" for i, p in enumerate(pairs, 1))


def generate(question: str, pairs: list[Disambiguation], passages: list[Passage], options: LLMOptions) -> Reply[str]:
    """I_g: the long-form answer; falls back to listing the pairs if the model's text stays empty."""
    fallback = " ".join(f"{p.question} {p.answer}." for p in pairs) or "No answer could be generated."
    return ask(
        "rag_generate",
        options,
        parse=parse_long_answer,
        fallback=fallback,
        passages=render_passages(passages),
        question=question,
        disambiguations=render_pairs(pairs),
    )


def closed_book(question: str, options: LLMOptions) -> Reply[str]:
    """I_l: answer from parametric knowledge alone."""
    return ask(
        "closed_book", options, parse=parse_long_answer, fallback="No answer could be generated.", question=question
    )
