"""The casebook: one block of worked examples that every prompt of a question starts with, then that question's
passages, then the per-call instruction — so the local model prefills the examples and passages once per question.

llama.cpp reuses the KV cache of the longest prefix a prompt shares with the previous one. When each prompt carries
its own demonstrations first (the papers' layout), consecutive calls share nothing and every call prefills its
examples and passages again. Here a demonstration shows every field the method's prompts need — a pool question with
its evidence, gold disambiguations and human long answer, and for DIVA also the ambiguity reason, types and interpretations
— so that I_a, I_p, verification, I_e, I_g and I_l all read the same examples (the papers' k nearest, from the
few-shot pool only) and differ only in the instruction that follows (DIVA's I_e can have its own examples instead:
``agent.steps.rac``). A method whose only call is I_l (closed book) gets the short form, question and long answer,
since nothing after it would reuse the rest. DIVA's casebook opens with the definitions of the ambiguity types
(``prompts/ambiguity_types.txt``; the paper's I_a gives them before its demonstrations): text that is the same for every
question comes first, so the prefix cache serves it across questions and I_a's own instruction stays short.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Literal

from agent.llm.prompts import estimate_tokens, load_preface
from agent.schemas import Passage
from agent.steps.ambiguity import AmbiguityDemo, demos_for
from agent.steps.fewshot import PoolExample, Shots, fit_examples, load_demos, pool_demos
from agent.text import PASSAGES_HEADING, render_pairs, render_passages

Source = Literal["pool", "ambiguity", "answers"]
CALL_ROOM = 1300  # estimated tokens a call keeps free after the casebook: passages, instruction, per-call part

_HEADINGS: dict[Source, str] = {
    "pool": "Worked examples. Each shows an ambiguous question, evidence passages about it, its disambiguated "
    "questions (DQ) with short answers (DA), and a long answer that covers every reading.",
    "ambiguity": "Worked examples. Each shows an ambiguous question, the reason it is ambiguous (##Reason) and its "
    "ambiguity types (##Answer), its readings, evidence passages about it, its disambiguated questions (DQ) with short "
    "answers (DA), and a long answer that covers every reading.",
    "answers": "Worked examples. Each shows an ambiguous question and a long answer that covers every reading.",
}
# prompt files that open a source's casebook, before its examples
_PREFACES: dict[Source, str] = {"ambiguity": "ambiguity_types"}


@dataclass(frozen=True)
class Case:
    """One worked example: a pool row, with its ambiguity annotation where the source has one."""

    example: PoolExample
    typing: AmbiguityDemo | None = None
    answer_only: bool = False  # a lone closed-book call needs no evidence, pairs or typing

    def render(self, words: int) -> str:
        lines = [f"Question: {self.example.question}"]
        if self.answer_only:
            return "\n".join([*lines, f"Long answer: {self.example.long_answer}"])
        if self.typing:
            types = ", ".join(f"[{t}]" for t in self.typing.types)
            interpretations = "\n".join(f"{i}: {q}" for i, q in enumerate(self.typing.interpretations, 1))
            lines += [f"##Reason: {self.typing.reason}", f"##Answer: {types}", f"Readings:\n{interpretations}"]
        lines += [
            f"Evidence:\n{render_passages(self.example.passages, words, focus=self.example.answers)}",
            f"Disambiguations:\n{render_pairs(self.example.pairs)}",
            f"Long answer: {self.example.long_answer}",
        ]
        return "\n".join(lines)


@cache
def _pool_by_id() -> dict[str, PoolExample]:
    return {row.id: row for row in load_demos("asqa_pool", PoolExample)}


def cases(question: str, shots: Shots, source: Source) -> list[Case]:
    """The k demonstrations nearest to ``question`` (or the first k, ``fixed``), most similar last."""
    if source != "ambiguity":
        return [Case(row, answer_only=source == "answers") for row in pool_demos(question, shots)]
    pool = _pool_by_id()
    return [Case(pool[demo.pool_id], demo) for demo in demos_for(question, shots)]


@lru_cache(maxsize=256)  # every node of a question asks for it: select and fit the demonstrations once
def casebook(question: str, shots: Shots, source: Source = "pool") -> str:
    """The worked examples every prompt of ``question`` starts with, after the source's preface (if any): preface and
    examples within the prompt budget less ``CALL_ROOM`` (demo passages shortened first, then the least similar demos
    dropped); without demonstrations, the preface alone or empty."""
    parts = [load_preface(_PREFACES[source])] if source in _PREFACES else []
    room = shots.budget - CALL_ROOM - sum(map(estimate_tokens, parts))
    examples = fit_examples(cases(question, shots, source), Case.render, max(room, 0))
    if examples:
        parts.append(f"{_HEADINGS[source]}\n\n{examples}")
    return "\n\n".join(parts)


def shared_prefix(book: str, passages: list[Passage] | None = None) -> str:
    """The shared prefix of a call: the casebook, then (for calls that read them) the question's passages."""
    parts = [book] if book else []
    if passages is not None:
        parts.append(evidence(passages))
    return "\n\n".join(parts)


def evidence(passages: list[Passage]) -> str:
    """The question's passages under their heading: in the shared prefix, or opening a call's own turn (``$evidence``
    in a prompt), so that calls over the same passages share them whatever instruction follows."""
    return f"{PASSAGES_HEADING}\n{render_passages(passages) or '(none)'}"
