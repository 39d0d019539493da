"""Why a question is ambiguous (DIVA's I_a) and its pseudo-interpretations (I_p), Eq. 3.

Two separate calls: DIVA (App. B.1) found one combined call clearly worse. Shared by graphs that type ambiguity.
Their demonstrations are the question's casebook (``agent.steps.casebook``, source ``ambiguity``), the shared
prefix of both calls and of the method's later ones.
"""

from __future__ import annotations

from agent.llm.calls import LLMOptions, Reply, aask
from agent.llm.parsing import parse_ambiguity, parse_numbered_list
from agent.schemas import AmbiguityType, AmbiguityTyping
from agent.steps.fewshot import Demo, Shots, select_demos

DEMO_FILE = "ambiguity"


class AmbiguityDemo(Demo):
    """A pool question with its ambiguity types and reason (written for this repository) and its gold interpretations."""

    pool_id: str
    types: list[AmbiguityType]
    reason: str
    interpretations: list[str]


def demos_for(question: str, shots: Shots) -> list[AmbiguityDemo]:
    return select_demos(question, DEMO_FILE, AmbiguityDemo, shots.k, shots.selection)


def _typing(text: str) -> AmbiguityTyping:
    types, reason = parse_ambiguity(text)
    return AmbiguityTyping(reason=reason, types=types)


async def classify_ambiguity(question: str, options: LLMOptions, book: str) -> Reply[AmbiguityTyping]:
    """I_a: the ambiguity types with a reason; no types and no reason when the output stays unusable."""
    return await aask(
        "type_ambiguity",
        options,
        parse=_typing,
        schema=AmbiguityTyping,
        fallback=AmbiguityTyping(reason="", types=[]),
        prefix=book,
        question=question,
    )


def _unique(items: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(" ".join(item.lower().split()), item)
    return list(seen.values())


async def infer_interpretations(question: str, reason: str, options: LLMOptions, book: str) -> Reply[list[str]]:
    """I_p: pseudo-interpretations from the question and the reason; an empty list when none can be parsed.

    Plain numbered text, never a JSON grammar: constrained to JSON, the local 1.5B model wrote one interpretation for
    4 of 5 ASQA benchmark questions; as text it wrote two for all 5.
    """
    reply: Reply[list[str]] = await aask(
        "interpret",
        options,
        parse=parse_numbered_list,
        fallback=[],
        prefix=book,
        question=question,
        reason=reason or "(no reason was found)",
    )
    return reply.with_value(_unique(reply.value))
