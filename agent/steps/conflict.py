"""Settle answers that disagree within one interpretation (misinformation among the passages), for DIVA and VerDICt.

Disambiguations whose questions mean the same (cosine of their embeddings ≥ ``SAME_QUESTION``) and whose passages
tell of one subject (``same_subject``) form a group whose answers differ. Readers often repeat the ambiguous question
word for word, so the question alone cannot tell misinformation (one subject, two claims: an edited copy of a passage)
from ambiguity (two subjects, e.g. two films called "Baby Doll" and their two directors); the passages can. Two
passages tell of one subject when they share half their content words (an edited copy), or, with
``subject_rule="shared_facts"``, also when they state ``SHARED_FACTS`` of the subject's other facts in common (names,
years, figures beyond the question and its answers: another part of the same article, rewritten). With
``subject_rule="judge"``, answers to one interpretation that still differ once each subject is settled (their
passages share neither words nor facts: two namesakes, or a misinformation document about a near-namesake or
nothing in particular) go to the judge as well, which may keep several; there an answer leaves only when the judge
rejects it in every order, since nothing in the passages says the answers compete.

With ``rule="majority"`` (the default) the answer more passages of the group state than any other wins without a
call (independent sources outvote one, the premise of MADAM-RAG's aggregation); a tie, or every group with
``rule="judge"``, gets one judge call that reads each answer with the passages stating it and keeps the correct ones
(several may stand when they answer different things). The losing disambiguations are dropped, with the passages that
backed only them; each settled group is reported as a ``Conflict``. An unusable verdict keeps every answer.

Answers are compared by what they add to their question (``answer_key``): "Fort Buchanan is located in Arizona",
"Fort Buchanan, Arizona" and "Arizona" are one answer to "Where is Fort Buchanan located?", stated by all their passages;
so are an answer and a longer one that holds all its words and the same numbers (``answer_keys``: "Tropical", "Spanish
Tropical" and "AM radio station broadcasting a Spanish Tropical format"). A group whose answers are all one date
at coarser and finer precision ("1828", "October 1828", "22 October 1828") has no conflict: a year does not contradict
a day in it (``refines``).

With ``both_orders`` the judge reads a group twice, its answers in one order and then in reverse, and an answer stands
only if kept both times: a small judge tends to keep whichever answer sits in one position, and an answer it keeps in
one order only was not decided by the passages. A group where no answer is kept both times is left undecided: all its
answers are dropped, and ``disputes`` words the disagreement for the answer to report instead of asserting either.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from agent.llm.calls import LLMOptions, Reply, aask, gather_concurrently
from agent.llm.parsing import ParseError
from agent.retrieval.embeddings import embed
from agent.retrieval.terms import content_words
from agent.schemas import Disambiguation, Passage
from agent.text import MONTHS, normalize_answer, passage_text

SAME_QUESTION = 0.9  # all-MiniLM-L6-v2 cosine above which two disambiguated questions are one interpretation
# share of the shorter passage's distinct content words that two passages about one subject have in common; on RAMDocs
# dev (440 questions less rows 120–179), 53% of misinformation documents reach it with some correct document, 4% of
# correct documents with one that states another correct answer
SAME_SUBJECT = 0.5
# facts (``facts``) two passages share beyond the question and its answers when they tell of one subject; on RAMDocs
# sample T (dev rows 240–299, notes/2026-12-ramdocs-protocol.md), with ``SAME_SUBJECT``, this links 72% of
# misinformation documents to some correct document (shared words alone: 62%) and 2% of the pairs of correct documents
# that state different answers (1%)
SHARED_FACTS = 3
_NAME = re.compile(r"[A-Z](?:[\w'’-]+|\.)(?:\s+(?:(?:of|de|la|von|van|der|du)\s+)?[A-Z](?:[\w'’-]+|\.))+")
_FIGURE = re.compile(r"\b\d{3,4}\b")
_THOUSANDS = re.compile(r"(?<=\d) (?=\d{3}\b)")  # "9 523" as "9,523" normalises: "9523"
FILLER = frozenset("is are was were be been in on at of by to for from".split())  # what restating a question adds
_DAY = re.compile(r"(0?[1-9]|[12]\d|3[01])(st|nd|rd|th)?")
SettleRule = Literal["majority", "judge"]
SubjectRule = Literal["shared_words", "shared_facts", "judge"]
SettledBy = Literal["majority", "judge", "undecided"]


class SettleOptions(BaseModel):
    """The step's options in the run context of each method that runs it (DIVA, VerDICt)."""

    settle_conflicts: bool = Field(
        default=False, description="settle answers that disagree within one interpretation (agent.steps.conflict)"
    )
    settle_by: SettleRule = Field(
        default="majority",
        description="with settle_conflicts: the answer more passages state wins and ties go to the judge (majority), "
        "or the judge decides every conflict (judge)",
    )
    judge_both_orders: bool = Field(
        default=False,
        description="with settle_conflicts: the judge reads a conflict in both orders and an answer stands only if "
        "kept both times; with none kept both times the answer reports the disagreement instead of asserting either",
    )
    subject_rule: SubjectRule = Field(
        default="shared_words",
        description="with settle_conflicts: answers compete when their passages tell of one subject: they share half "
        "their content words (shared_words), or that or three facts beyond the question and its answers, such as "
        "names and years (shared_facts); judge: shared_facts, then the answers still differing within one "
        "interpretation go to the judge, which drops an answer only when it rejects it in every order",
    )


class Conflict(BaseModel):
    question: str = Field(description="the interpretation the answers disagree on")
    answers: list[str] = Field(description="the competing answers, in the order the judge saw them")
    kept: list[str] = Field(description="the answers kept, by the majority of passages or by the judge")
    dropped_ids: list[str] = Field(default_factory=list, description="passages that backed only dropped answers")
    by: SettledBy = Field(
        default="judge",
        description="majority: more passages stated the kept answer; judge: a call; undecided: the judge kept no "
        "answer in both orders, so none is kept",
    )


def answer_key(pair: Disambiguation) -> str:
    """The normalised words of ``pair``'s answer that its question and ``FILLER`` lack ("Fort Buchanan is located in
    Arizona" → "arizona"; "9 523" → "9523", as "9,523"); the whole normalised answer when nothing is left (an answer
    within its question)."""
    asked = set(normalize_answer(pair.question).split()) | FILLER
    answer = _THOUSANDS.sub("", normalize_answer(pair.answer))
    return " ".join(w for w in answer.split() if w not in asked) or answer


def answer_keys(pairs: list[Disambiguation]) -> list[str]:
    """Each pair's ``answer_key``, or that of the longest answer holding all its normalised words and the same numbers,
    so that a longer wording of one answer counts with it ("Tropical" with "Spanish Tropical"; "1750" stays apart
    from "12 December 1750", "Yellow lantern" from "Red lantern banksia")."""
    words = [set(normalize_answer(p.answer).split()) for p in pairs]
    numbers = [{w for w in ws if any(c.isdigit() for c in w)} for ws in words]

    def host(i: int) -> int:
        holders = [j for j in range(len(pairs)) if words[i] <= words[j] and numbers[i] == numbers[j]]
        return max(holders, key=lambda j: (len(words[j]), -j)) if words[i] else i

    keys = [answer_key(p) for p in pairs]
    return [keys[host(i)] for i in range(len(pairs))]


def conflicting_groups(
    pairs: list[Disambiguation],
    passages: list[Passage],
    keys: list[str] | None = None,
    threshold: float = SAME_QUESTION,
    subject_rule: SubjectRule = "shared_words",
) -> list[list[int]]:
    """Indexes of ``pairs`` grouped by interpretation (``question_groups``), keeping the groups whose answers differ
    (``keys``: the pairs' ``answer_keys``, computed when not given). Each group is split into the parts that
    ``same_subject`` links, so two answers drawn from passages about different subjects both stand, and a part whose
    answers are one date at several precisions (``one_date``) is no conflict."""
    groups = question_groups(pairs, threshold)
    subjects = {p.id: subject_of(p.full_text) for p in passages}
    keys = keys if keys is not None else answer_keys(pairs)
    parts = [part for group in groups for part in subject_parts(group, pairs, subjects, keys, subject_rule)]
    return [part for part in parts if len({keys[i] for i in part}) > 1 and not one_date({keys[i] for i in part})]


def question_groups(pairs: list[Disambiguation], threshold: float = SAME_QUESTION) -> list[list[int]]:
    """Indexes of ``pairs`` grouped by interpretation: a pair joins the first group whose first question is close
    enough and whose answers are of its kind, with or without a digit (a year and a place do not compete: "When was X
    born in Canada East?" and "Where did X grow up in Canada East?" embed alike but ask different things)."""
    if len(pairs) < 2:
        return [[i] for i in range(len(pairs))]
    vectors = embed([p.question for p in pairs])
    numeric = [any(c.isdigit() for c in p.answer) for p in pairs]
    groups: list[list[int]] = []
    for i, vector in enumerate(vectors):
        home = next(
            (g for g in groups if numeric[g[0]] == numeric[i] and float(vectors[g[0]] @ vector) >= threshold), None
        )
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return groups


def refines(coarse: str, fine: str) -> bool:
    """Whether answer key ``fine`` is ``coarse`` stated more precisely as a date: all of its words, and besides them
    only day numbers and month names ("1828" → "october 1828" → "22 october 1828"; not "2" → "2 million", nor
    "3 july 1750" → "12 december 1750")."""
    have, more = set(coarse.split()), set(fine.split())
    return have < more and all(w in MONTHS or _DAY.fullmatch(w) for w in more - have)


def one_date(keys: set[str]) -> bool:
    """Whether answer ``keys`` are one date at several precisions: one of them refines all the others."""
    return any(all(k == host or refines(k, host) for k in keys) for host in keys)


class Subject(NamedTuple):
    """What a passage says that can tie it to one subject."""

    words: set[str]  # its distinct content words
    facts: set[str]  # its names of two or more capitalised words (lower-cased) and its three- and four-digit figures


def subject_of(text: str) -> Subject:
    return Subject(set(content_words(text)), {m.lower() for m in _NAME.findall(text)} | set(_FIGURE.findall(text)))


def same_subject(a: Subject, b: Subject, asked: set[str], rule: SubjectRule = "shared_words") -> bool:
    """Whether two passages tell of one subject: their content words overlap enough (``SAME_SUBJECT`` of the
    shorter's), as a passage and an edited copy of it do and articles about two namesakes rarely do; with
    ``rule="shared_facts"``, also when they share ``SHARED_FACTS`` facts whose content words are not all in ``asked``
    (those of the question and its answers: two namesakes share their name, two parts of one article the subject's other facts)."""
    if a.words and b.words and len(a.words & b.words) >= SAME_SUBJECT * min(len(a.words), len(b.words)):
        return True
    if rule == "shared_words":
        return False
    return sum(not set(content_words(fact)) <= asked for fact in a.facts & b.facts) >= SHARED_FACTS


def subject_parts(
    group: list[int],
    pairs: list[Disambiguation],
    subjects: dict[str, Subject],
    keys: list[str],
    rule: SubjectRule = "shared_words",
) -> list[list[int]]:
    """``group`` split into the parts linked by an answer in common (``keys``) or by passages of one subject (a pair
    whose passages are unknown links by its answer only)."""
    asked = {w for i in group for w in content_words(f"{pairs[i].question} {pairs[i].answer}")}

    def linked(i: int, j: int) -> bool:
        if keys[i] == keys[j]:
            return True
        return any(
            same_subject(subjects[a], subjects[b], asked, rule)
            for a in pairs[i].passage_ids
            for b in pairs[j].passage_ids
            if a in subjects and b in subjects
        )

    parts: list[list[int]] = []
    for i in group:
        joined = [part for part in parts if any(linked(i, j) for j in part)]
        parts = [part for part in parts if part not in joined] + [sorted([i, *(j for part in joined for j in part)])]
    return sorted(parts)


def majority(group: list[int], pairs: list[Disambiguation], keys: list[str]) -> set[str] | None:
    """The answer key that more distinct passages of ``group`` state than any other; None on a tie."""
    support: dict[str, set[str]] = {}
    for i in group:
        support.setdefault(keys[i], set()).update(pairs[i].passage_ids or [f"pair {i}"])
    (best, most), *rest = sorted(support.items(), key=lambda item: -len(item[1]))
    return None if rest and len(rest[0][1]) == len(most) else {best}


def parse_keep(text: str, count: int) -> list[int]:
    """``Keep: 1, 3`` → [0, 2] (0-based, within ``count``)."""
    line = re.search(r"keep\s*:?\s*([\d,\sand]+)", text, re.IGNORECASE)
    numbers = sorted({int(n) - 1 for n in re.findall(r"\d+", line.group(1) if line else text) if 1 <= int(n) <= count})
    if not numbers:
        raise ParseError("no answer number to keep")
    return numbers


async def settle(
    question: str,
    pairs: list[Disambiguation],
    passages: list[Passage],
    options: LLMOptions,
    limit: int = 8,
    rule: SettleRule = "majority",
    both_orders: bool = False,
    subject_rule: SubjectRule = "shared_words",
) -> tuple[list[Disambiguation], list[Passage], list[Conflict]]:
    """``pairs`` and ``passages`` without the answers that lost (to a majority of passages or to the judge) or were
    left undecided, and the passages behind only those, and the conflicts settled. With ``subject_rule="judge"`` the
    answers still differing within one interpretation afterwards, their passages told of as different subjects, go
    to the judge too (``namesake_groups``), which drops only what it rejects in every order."""
    by_id = {p.id: p for p in passages}
    keys = answer_keys(pairs)
    linking: SubjectRule = "shared_facts" if subject_rule == "judge" else subject_rule
    groups = conflicting_groups(pairs, passages, keys, subject_rule=linking)
    orders = [False, True] if both_orders else [False]
    settled = await settle_groups(groups, pairs, keys, by_id, options, limit, rule, orders, keep="all")
    if subject_rule == "judge":
        losing = {i for group, conflict in zip(groups, settled) for i in group if keys[i] not in conflict.kept_keys}
        rest = [i for i in range(len(pairs)) if i not in losing]
        apart = namesake_groups([pairs[i] for i in rest], passages, [keys[i] for i in rest], linking)
        groups += [[rest[i] for i in group] for group in apart]
        settled += await settle_groups(groups[len(settled) :], pairs, keys, by_id, options, limit, "judge", orders,
                                       keep="any")  # fmt: skip
    losing = {i for group, conflict in zip(groups, settled) for i in group if keys[i] not in conflict.kept_keys}
    survivors = [p for i, p in enumerate(pairs) if i not in losing]
    backing = {pid for p in survivors for pid in p.passage_ids}
    dropped = {pid for i in losing for pid in pairs[i].passage_ids if pid not in backing}
    conflicts = []
    for group, conflict in zip(groups, settled):
        ids = sorted({pid for i in group if i in losing for pid in pairs[i].passage_ids} & dropped)
        conflicts.append(conflict.conflict.model_copy(update={"dropped_ids": ids}))
    return survivors, [p for p in passages if p.id not in dropped], conflicts


class Settled(NamedTuple):
    conflict: Conflict
    kept_keys: set[str]


async def settle_groups(
    groups: list[list[int]],
    pairs: list[Disambiguation],
    keys: list[str],
    by_id: dict[str, Passage],
    options: LLMOptions,
    limit: int,
    rule: SettleRule,
    orders: list[bool],
    keep: Literal["all", "any"],
) -> list[Settled]:
    """Each group settled by the majority of its passages (``rule="majority"``) or, on a tie or with ``rule="judge"``,
    by the judge in each of ``orders``: an answer stands if kept in all of them (``keep="all"``) or in any
    (``keep="any"``: dropped only when rejected every time)."""
    voted = [majority(group, pairs, keys) if rule == "majority" else None for group in groups]

    async def judge(task: tuple[list[int], bool]) -> Reply[list[int]]:
        group, reverse = task
        shown_keys = list(dict.fromkeys(keys[i] for i in group))
        order = shown_keys[::-1] if reverse else shown_keys
        shown = "\n\n".join(
            f"Answer {n}: {wording(group, pairs, keys, key)}\n"
            + "\n".join(
                passage_text(by_id[pid])
                for pid in dict.fromkeys(pid for i in group if keys[i] == key for pid in pairs[i].passage_ids)
                if pid in by_id
            )
            for n, key in enumerate(order, 1)
        )
        everything = list(range(len(shown_keys)))
        reply = await aask(
            "conflict_judge", options, parse=lambda text: parse_keep(text, len(shown_keys)), fallback=everything,
            question=pairs[group[0]].question, answers=shown,
        )  # fmt: skip
        return reply.with_value([shown_keys.index(order[k]) for k in reply.value])

    undecided = [g for g, v in zip(groups, voted) if v is None]
    judged = iter(await gather_concurrently(judge, [(g, r) for g in undecided for r in orders], limit))
    settled: list[Settled] = []
    for group, winner in zip(groups, voted):
        shown_keys = list(dict.fromkeys(keys[i] for i in group))
        if winner is None:
            verdicts = [set(next(judged).value) for _ in orders]
            held = all if keep == "all" else any
            kept = {key for k, key in enumerate(shown_keys) if held(k in v for v in verdicts)}
        else:
            kept = winner
        by: SettledBy = "majority" if winner is not None else "judge" if kept else "undecided"
        answers = [wording(group, pairs, keys, key) for key in shown_keys]
        kept_answers = [wording(group, pairs, keys, key) for key in shown_keys if key in kept]
        settled.append(Settled(Conflict(question=pairs[group[0]].question, answers=answers, kept=kept_answers, by=by),
                               kept))  # fmt: skip
    return settled


def namesake_groups(
    pairs: list[Disambiguation], passages: list[Passage], keys: list[str], rule: SubjectRule
) -> list[list[int]]:
    """Indexes of ``pairs`` grouped by interpretation whose answers differ across passages that ``rule`` does not
    tie to one subject (``subject_parts``): two namesakes, or a misinformation document about something else."""
    subjects = {p.id: subject_of(p.full_text) for p in passages}
    return [
        group
        for group in question_groups(pairs)
        if len({keys[i] for i in group}) > 1
        and not one_date({keys[i] for i in group})
        and len(subject_parts(group, pairs, subjects, keys, rule)) > 1
    ]


def wording(group: list[int], pairs: list[Disambiguation], keys: list[str], key: str) -> str:
    """The first answer in ``group`` with ``key`` (of ``keys``), as the reader worded it."""
    return next(pairs[i].answer for i in group if keys[i] == key)


def disputes(conflicts: list[Conflict]) -> str:
    """One sentence for each undecided conflict, reporting the disagreement without asserting any answer (answers
    that differ only in case or punctuation named once)."""
    return " ".join(
        f'The sources contradict each other on "{c.question}": {" or ".join(distinct(c.answers))}.'
        for c in conflicts
        if c.by == "undecided"
    )


def distinct(answers: list[str]) -> list[str]:
    """``answers`` without their closing full stops, each normalised answer once, in first-seen order."""
    first: dict[str, str] = {}
    for answer in answers:
        first.setdefault(normalize_answer(answer), answer.rstrip(". "))
    return list(first.values())
