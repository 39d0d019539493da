"""Settle answers that disagree within one interpretation (misinformation among the passages), for DIVA and VerDICt.

Disambiguations whose questions mean the same (cosine of their embeddings ≥ ``SAME_QUESTION``) form a group; a group
whose answers differ gets one judge call that reads each answer with the passages stating it and keeps the correct
ones (several may stand when they answer different things). The losing disambiguations are dropped, with the passages
that backed only them; each settled group is reported as a ``Conflict``. An unusable verdict keeps every answer.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from agent.llm.calls import LLMOptions, Reply, aask, gather_concurrently
from agent.llm.parsing import ParseError
from agent.retrieval.embeddings import embed
from agent.schemas import Disambiguation, Passage
from agent.text import normalize_answer, passage_text

SAME_QUESTION = 0.9  # all-MiniLM-L6-v2 cosine above which two disambiguated questions are one interpretation


class Conflict(BaseModel):
    question: str = Field(description="the interpretation the answers disagree on")
    answers: list[str] = Field(description="the competing answers, in the order the judge saw them")
    kept: list[str] = Field(description="the answers the judge found correct")
    dropped_ids: list[str] = Field(default_factory=list, description="passages that backed only dropped answers")


def conflicting_groups(pairs: list[Disambiguation], threshold: float = SAME_QUESTION) -> list[list[int]]:
    """Indexes of ``pairs`` grouped by interpretation (each joins the first group whose first question is close
    enough), keeping the groups whose answers differ once normalised."""
    if len(pairs) < 2:
        return []
    vectors = embed([p.question for p in pairs])
    groups: list[list[int]] = []
    for i, vector in enumerate(vectors):
        home = next((g for g in groups if float(vectors[g[0]] @ vector) >= threshold), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return [g for g in groups if len({normalize_answer(pairs[i].answer) for i in g}) > 1]


def parse_keep(text: str, count: int) -> list[int]:
    """``Keep: 1, 3`` → [0, 2] (0-based, within ``count``)."""
    line = re.search(r"keep\s*:?\s*([\d,\sand]+)", text, re.IGNORECASE)
    numbers = sorted({int(n) - 1 for n in re.findall(r"\d+", line.group(1) if line else text) if 1 <= int(n) <= count})
    if not numbers:
        raise ParseError("no answer number to keep")
    return numbers


async def settle(
    question: str, pairs: list[Disambiguation], passages: list[Passage], options: LLMOptions, limit: int = 8
) -> tuple[list[Disambiguation], list[Passage], list[Conflict]]:
    """``pairs`` and ``passages`` without the answers the judge rejected and the passages behind only those, and the
    conflicts it settled."""
    by_id = {p.id: p for p in passages}
    groups = conflicting_groups(pairs)

    async def judge(group: list[int]) -> Reply[list[int]]:
        answers = list(dict.fromkeys(pairs[i].answer for i in group))
        shown = "\n\n".join(
            f"Answer {n}: {answer}\n"
            + "\n".join(
                passage_text(by_id[pid])
                for pid in dict.fromkeys(
                    pid for i in group if pairs[i].answer == answer for pid in pairs[i].passage_ids
                )
                if pid in by_id
            )
            for n, answer in enumerate(answers, 1)
        )
        everything = list(range(len(answers)))
        return await aask(
            "conflict_judge", options, parse=lambda text: parse_keep(text, len(answers)), fallback=everything,
            question=pairs[group[0]].question, answers=shown,
        )  # fmt: skip

    verdicts = await gather_concurrently(judge, groups, limit)
    losing: set[int] = set()
    conflicts: list[Conflict] = []
    for group, verdict in zip(groups, verdicts):
        answers = list(dict.fromkeys(pairs[i].answer for i in group))
        kept = [answers[k] for k in verdict.value]
        losing |= {i for i in group if pairs[i].answer not in kept}
        conflicts.append(Conflict(question=pairs[group[0]].question, answers=answers, kept=kept))
    survivors = [p for i, p in enumerate(pairs) if i not in losing]
    backing = {pid for p in survivors for pid in p.passage_ids}
    dropped = {pid for i in losing for pid in pairs[i].passage_ids if pid not in backing}
    for conflict, group in zip(conflicts, groups):
        conflict.dropped_ids = sorted({pid for i in group if i in losing for pid in pairs[i].passage_ids} & dropped)
    return survivors, [p for p in passages if p.id not in dropped], conflicts
