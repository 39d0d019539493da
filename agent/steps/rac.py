"""Retrieval-augmented clarification (RAC), shared by rag, DIVA and ToC: extract DQ/DA pairs, write the answer.

Prompts I_e (``rag_extract``), I_g (``rag_generate``) and I_l (``closed_book``) of the DIVA paper (App. D), each with
the k pool demonstrations nearest to the question (DIVA A.4; ToC A.3 found demonstrations with disambiguations
help): I_e shows a demo's evidence passages and its gold DQ/DA pairs, I_g its pairs and human long answer, I_l the
question and long answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.llm.calls import LLMOptions, Reply, ask
from agent.llm.parsing import parse_disambiguations, parse_long_answer
from agent.schemas import Disambiguation, ExtractedPairs, Passage, QAPair
from agent.steps.fewshot import PoolExample, Shots, examples_for, pool_demos
from agent.text import render_passages, supporting_ids


def render_pairs(pairs: Sequence[QAPair]) -> str:
    if not pairs:
        return "(none found)"
    return "\n".join(f"DQ {i}: {p.question}\nDA {i}: {p.answer}" for i, p in enumerate(pairs, 1))


def _extract_example(demo: PoolExample, words: int) -> str:
    context = render_passages(demo.passages, words)
    return f"Context:\n{context}\n\nQuestion: {demo.question}\nDisambiguations:\n{render_pairs(demo.pairs)}"


def _generate_example(demo: PoolExample, words: int) -> str:
    return f"Question: {demo.question}\nDisambiguations:\n{render_pairs(demo.pairs)}\nAnswer: {demo.long_answer}"


def _closed_book_example(demo: PoolExample, words: int) -> str:
    return f"Question: {demo.question}\nFinal Answer: {demo.long_answer}"


def extract(question: str, passages: list[Passage], options: LLMOptions, shots: Shots) -> Reply[list[Disambiguation]]:
    """I_e: disambiguated questions with answers found in ``passages``; none when the output stays unusable."""
    variables = {"passages": render_passages(passages), "question": question}
    examples = examples_for("rag_extract", pool_demos(question, shots), _extract_example, shots, **variables)
    reply = ask(
        "rag_extract",
        options,
        parse=parse_disambiguations,
        schema=ExtractedPairs,
        fallback=[],
        examples=examples,
        **variables,
    )
    pairs = [
        Disambiguation(question=p.question, answer=p.answer, passage_ids=supporting_ids(p.answer, passages))
        for p in reply.value
    ]
    return reply.with_value(pairs)


def generate(
    question: str, pairs: list[Disambiguation], passages: list[Passage], options: LLMOptions, shots: Shots
) -> Reply[str]:
    """I_g: the long-form answer. If the model's text stays unusable after the retries, the answer lists the pairs;
    without pairs that is an ``OutputError`` (an unusable reply is never the answer)."""
    fallback = {"fallback": " ".join(f"{p.question} {p.answer}." for p in pairs)} if pairs else {}
    variables = {"passages": render_passages(passages), "question": question, "disambiguations": render_pairs(pairs)}
    examples = examples_for("rag_generate", pool_demos(question, shots), _generate_example, shots, **variables)
    return ask("rag_generate", options, parse=parse_long_answer, examples=examples, **fallback, **variables)


def closed_book(question: str, options: LLMOptions, shots: Shots) -> Reply[str]:
    """I_l: answer from parametric knowledge alone; an unusable reply after the retries is an ``OutputError``."""
    examples = examples_for("closed_book", pool_demos(question, shots), _closed_book_example, shots, question=question)
    return ask("closed_book", options, parse=parse_long_answer, examples=examples, question=question)
