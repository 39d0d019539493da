"""Answer normalisation (SQuAD/ALCE style) and answer-in-passage tests, shared by graphs and evaluation."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Sequence

from agent.llm.parsing import CITATION_MARK, SAYS, sentences
from agent.retrieval.terms import STOP_WORDS
from agent.schemas import Passage, QAPair
from agent.settings import get_settings

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
_SPELLINGS = [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
              ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
              ("november", "nov"), ("december", "dec")]  # fmt: skip
MONTHS = {name: i for i, names in enumerate(_SPELLINGS, start=1) for name in names}  # lower-case name → number
_MONTH_NAME = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_NUMBER = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR_NUMBER = r"(?P<year>\d{3,4})"
_SPELLED_DAYS = [
    rf"\b{_DAY_NUMBER}\s+(?:of\s+)?{_MONTH_NAME},?\s+{_YEAR_NUMBER}\b",  # 16 November 2001
    rf"\b{_MONTH_NAME}\s+{_DAY_NUMBER},?\s+{_YEAR_NUMBER}\b",  # November 16, 2001
]
_DATES = [
    *(re.compile(pattern, re.IGNORECASE) for pattern in _SPELLED_DAYS),
    re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\b"),  # 2001-11-16
    re.compile(rf"\b{_MONTH_NAME},?\s+{_YEAR_NUMBER}\b", re.IGNORECASE),  # November 2001
]


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, squeeze whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def iso_dates(text: str) -> str:
    """``text`` with every date written as ISO, however it was worded ("16th of Nov. 2001", "November 16, 2001" →
    "2001-11-16"; "November 2001" → "2001-11"), so that one date compares equal in any of its forms."""
    return _dates(text, lambda year, month, day: f"{year:04d}-{month:02d}" + (f"-{day:02d}" if day else ""))


def spelled_dates(text: str) -> str:
    """``text`` with every date written day first and its month named in full ("November 16, 2001", "2001-11-16" →
    "16 November 2001"; "Nov. 2001" → "November 2001"): one form for all, adding no number the text lacked."""
    month_name = [names[0].capitalize() for names in _SPELLINGS]
    return _dates(text, lambda year, month, day: f"{f'{day} ' if day else ''}{month_name[month - 1]} {year}")


def _dates(text: str, write: Callable[[int, int, int | None], str]) -> str:
    def rewrite(match: re.Match[str]) -> str:
        month, day = match["month"], match.groupdict().get("day")
        number = int(month) if month.isdigit() else MONTHS[month.lower().rstrip(".")]
        return write(int(match["year"]), number, int(day) if day else None) if 1 <= number <= 12 else match[0]

    for pattern in _DATES:
        text = pattern.sub(rewrite, text)
    return text


def contains_answer(text: str, answer: str) -> bool:
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


STATED_SHARE = 2 / 3  # of a sentence answer's content words that its passage must hold


def stated_in(text: str, answer: str) -> bool:
    """Whether ``text`` states ``answer``: it holds the answer (a date in any wording), or, for an answer written as a
    sentence ("The Cardinals moved to Arizona in 1988."), every number of it and ``STATED_SHARE`` of its other content
    words. An answer the model brought from elsewhere ("Eddard Stark" from a passage that never names him) is not."""
    if contains_answer(text, answer) or contains_answer(spelled_dates(text), spelled_dates(answer)):
        return True
    held = set(normalize_answer(f"{text} {spelled_dates(text)}").split())
    words = [w for w in normalize_answer(answer).split() if w not in STOP_WORDS]
    if not words or any(w not in held for w in words if any(ch.isdigit() for ch in w)):
        return False
    return sum(w in held for w in words) >= STATED_SHARE * len(words)


def supporting_ids(answer: str, passages: list[Passage]) -> list[str]:
    """Ids of the passages whose text contains ``answer``."""
    return [p.id for p in passages if contains_answer(p.full_text, answer)]


PASSAGES_HEADING = "Passages retrieved for the question:"  # where a call's own passages start in its shared prefix
QUOTES = ("«", "»")  # delimit a passage's text in a prompt; removed from the text itself


def _one_line(text: str) -> str:
    return " ".join(text.replace(QUOTES[0], '"').replace(QUOTES[1], '"').split())


def passage_text(passage: Passage, words: int | None = None, focus: Sequence[str] = ()) -> str:
    """``title | «text»`` for a prompt: one line whatever the passage holds (a passage cannot start a line that poses
    as prompt structure, e.g. ``DQ 1:``), its text quoted, cut to ``words`` (default: the ``max_passage_words``
    setting) so that one long article cannot overflow the model's context. A cut text keeps its start, or, when it
    holds one of the ``focus`` answers (a demonstration's gold answers), the stretch around the first one: an example
    then shows the sentence its answer comes from, not an opening that lacks it."""
    limit = words or get_settings().max_passage_words
    tokens = _one_line(passage.text).split(" ")
    if len(tokens) <= limit:
        text = " ".join(tokens)
    else:
        start = _focus_start(tokens, focus, limit)
        text = ("… " if start else "") + " ".join(tokens[start : start + limit])
        text += " …" if start + limit < len(tokens) else ""
    return f"{_one_line(passage.title)} | {QUOTES[0]}{text}{QUOTES[1]}"


def _focus_start(tokens: list[str], focus: Sequence[str], limit: int) -> int:
    """Where a ``limit``-word cut of ``tokens`` starts: a third of it before the first ``focus`` answer found."""
    normalised = [normalize_answer(token) for token in tokens]
    for answer in focus:
        needle = normalize_answer(answer).split()
        if not needle:
            continue
        for i in range(len(tokens) - len(needle) + 1):
            if normalised[i : i + len(needle)] == needle:
                return max(0, min(i - limit // 3, len(tokens) - limit))
    return 0


def render_passages(
    passages: list[Passage], words: int | None = None, numbers: list[int] | None = None, focus: Sequence[str] = ()
) -> str:
    """Numbered passages ``[n] title | text``; ``numbers`` defaults to 1, 2, ...; ``focus``: see ``passage_text``."""
    numbers = numbers or list(range(1, len(passages) + 1))
    return "\n".join(f"[{n}] {passage_text(p, words, focus)}" for n, p in zip(numbers, passages))


def render_pairs(pairs: Sequence[QAPair]) -> str:
    """``DQ n: question`` / ``DA n: answer`` lines (the papers' disambiguation format)."""
    if not pairs:
        return "(none found)"
    return "\n".join(f"DQ {i}: {p.question}\nDA {i}: {p.answer}" for i, p in enumerate(pairs, 1))


def printable(text: str) -> str:
    """``text`` without control and format characters (terminal escapes, NULs, bidi overrides); newlines and tabs
    stay."""
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))


# An answer states facts; it does not tell the reader where they came from ("the passage retrieved for the question
# states ...", "from the disambiguation question ..."), nor quote its sources at length.
_SOURCE_TALK = re.compile(
    r"\b(passages?|contexts?|disambiguat\w*|retrieved|(?:long|short|final)\s+answers?|D[QA]\s?\d+"
    r"|(?:does|do|did)\s+not\s+(?:provide|give|contain)\s+(?:any\s+)?information)\b",
    re.IGNORECASE,
)  # "the final answer to the question ..." talks about the answer, and "it does not provide any information" about
# its source, not the world
COPY_LIMIT = 15  # consecutive words shared with one source passage that count as quoting it


def mentions_sources(text: str) -> bool:
    """Whether ``text`` talks about its sources (passages, context, retrieval, disambiguation questions) or about
    the answer itself ("the long answer explains ...")."""
    return bool(_SOURCE_TALK.search(text))


_NON_ANSWER = re.compile(
    r"^(?:unknown|none|n/?a|no\s+(?:answer|information|data)\b.*|not\s+(?:specified|mentioned|provided|stated|given|"
    r"available|known|found|clear|applicable)\b.*|(?:not\s+enough|insufficient)\s+(?:information|data|evidence|context)\b.*|"
    r".*\b(?:in|from|by)\s+the\s+(?:passages?|contexts?|text)\b.*|"
    r"(?:the\s+)?(?:passages?|contexts?|text)\s+(?:does|do|did)(?:\s+not|n't)\b.*)$",
    re.IGNORECASE,
)


def states_nothing(answer: str) -> bool:
    """Whether a short answer says there is none ("Not specified in the passage", "unknown", "N/A") instead of
    answering; a title such as "The Passage" is an answer."""
    return bool(_NON_ANSWER.match(answer.strip().rstrip(".")))


_SOURCES = (
    r"(?:(?:the\s+|this\s+)?(?:(?:retrieved|given|provided|first|second|third)\s+)?(?:passages?|contexts?)(?:\s*\[\d+\])*"
    r"|D[QA]\s?\d+)"
)  # "DQ 1" / "DA 1": the prompt's disambiguation lines
_PAIR_REFERENCE = re.compile(r"\s*\((?:D[QA]\s?\d+[,;]?\s*)+\)")  # "football (DA 1)." → "football."
_QUOTED = r"[\"“][^\"”]*[\"”]"
_ANSWER_ITSELF = (  # "(Therefore,) the final answer to the question "Who ...?" is" / "The long answer explains that"
    rf"(?:(?:therefore|so|thus|hence|in\s+(?:summary|conclusion)),?\s+)?the\s+(?:long|short|final|correct)\s+"
    rf"answer(?:\s+to\s+(?:(?:the|this)\s+question(?:\s*{_QUOTED})?|{_QUOTED}))?"
    rf"\s+(?:is\s*:?\s*(?:that\s+)?|{SAYS}(?:\s+that\s+|\s*:\s*|\s+))"
)  # "Therefore, the correct answer to this question is that Paul Newman …" → "Paul Newman …"
_WE_SEE = (  # "Based on this information, we can see that X" → "X"
    r"(?:we\s+can\s+(?:see|say|conclude|infer)|it\s+(?:is|can\s+be)\s+(?:clear|seen|concluded|inferred))\s+that\s+"
)
_ATTRIBUTION = re.compile(  # "According to passage [2], X" / "The passage clearly states that X" → "X"
    rf"^(?P<heading>[^:.!?\"“\[\]]{{1,40}}:\s+)?"  # a list item's label stays: "As a specific date: The passage …"
    rf"(?:(?:according\s+to|as\s+(?:stated|mentioned|shown|noted)\s+in|based\s+on|from|in)\s+{_SOURCES}\s*,\s*"
    rf"(?:it\s+{SAYS}\s+(?:that\s+)?|{_WE_SEE})?|{_SOURCES}\s+{SAYS}(?:\s+that\s+|\s*:\s*|\s+)|{_ANSWER_ITSELF}"
    rf"|it\s+(?:also\s+)?(?:states|says|mentions|notes)(?:\s+that\s+|\s*:\s*)"  # "It states that X": the passage
    rf"|based\s+on\s+(?:this|that|these|the|all\s+(?:this|the))\s+(?:information|evidence|facts?|details?)\s*,\s*"
    rf"(?:{_WE_SEE})?"
    rf"|this\s+(?:\w+ly\s+)?(?:indicates|suggests|shows|means|implies|confirms)\s+that\s+"  # "This indicates that X"
    rf"|(?P<cites>{CITATION_MARK.pattern}(?:\s*{CITATION_MARK.pattern})*)\s+{SAYS}(?:\s+that\s+|\s*:\s*))",
    re.IGNORECASE,
)
CONCLUSION = re.compile(rf"(?:^|(?<=[\n.!?]))\s*(?={_ANSWER_ITSELF})", re.IGNORECASE)  # where a conclusion begins
_TRAILING_ATTRIBUTION = re.compile(  # "X, as evidenced by the passage [1]." / "X, which is supported by DA 4." → "X."
    rf",?\s+(?:which\s+(?:is|was|are|were)\s+(?:\w+ly\s+)?)?"
    rf"(?:(?:as\s+)?(?:evidenced|stated|mentioned|shown|noted|seen|supported|confirmed|provided|given)\s+(?:by|in|as)"
    rf"|according\s+to)"
    rf"\s+{_SOURCES}(?=\s*[.!?]?$)",
    re.IGNORECASE,
)


def unnarrated(sentence: str) -> str:
    """``sentence`` without a lead-in or a tail that attributes it to the sources ("According to passage [2], ...",
    "The passage clearly states that ...", "..., as evidenced by passage [1]." (its citation stays), "According to DQ
    1, ...", "(DA 1)"); '' when what is left still talks about them ("This is evident from the passage")."""
    stripped = _TRAILING_ATTRIBUTION.sub(_its_citations, _lead_in_dropped(_PAIR_REFERENCE.sub("", sentence)), count=1)
    return "" if mentions_sources(stripped) else stripped


def _its_citations(tail: re.Match[str]) -> str:
    """What stays of a trailing attribution: its citation marks (", as evidenced by the passage [1]" → " [1]")."""
    return "".join(f" {mark}" for mark in CITATION_MARK.findall(tail[0]))


_STOP = re.compile(r"(.*?)([.!?]?)$", re.DOTALL)  # a sentence's body and its stop


def _lead_in_dropped(sentence: str) -> str:
    """``sentence`` less its ``_ATTRIBUTION`` lead-in (a list item's label before it stays), the rest capitalised; a
    lead-in that is a bare citation keeps its marks before the stop ("[13] states that X." → "X [13].")."""
    if not (lead_in := _ATTRIBUTION.match(sentence)):
        return sentence
    rest = sentence[lead_in.end() :]
    if lead_in["cites"]:
        body, stop = _STOP.match(rest).groups()
        rest = f"{body} {lead_in['cites']}{stop}"
    return (lead_in["heading"] or "") + rest[:1].upper() + rest[1:]


_NAME_OR_NUMBER = re.compile(r"(?<![.!?]\s)(?<![\n\"“])(?<!^)\b[A-Z][\w'’-]*|\b\d[\d,]*")  # no sentence's first word
_CITATION = re.compile(rf"\s*{CITATION_MARK.pattern}")  # " [3]", " [1, 4]"


def without_citations(text: str) -> str:
    """``text`` less its citation marks ("premiered on 4 November 2001 [1]." → "... 2001."): once normalised, "[3]"
    would read as the number 3."""
    return _CITATION.sub("", text)


_NUMBER = re.compile(r"\b\d[\d,]*")


def unborrowed(text: str, demonstration: str, sources: Sequence[str], numbers_only: bool = False) -> str:
    """``text`` less the sentences that carry a name or number of ``demonstration`` (a prompt's worked example)
    that none of ``sources`` holds: a small model copying its example's facts into an answer ("E. L. James's novel
    was published on June 20, 2011" in an answer about "A Single Man"). '' when every sentence does. A full date
    whose borrowed number is only its day, while a source holds its year, is first cut to the year (``_years_only``).
    ``numbers_only`` looks at numbers alone: for a casebook of several examples, whose names ("North America",
    "June") an answer may state from its own passages' wording without having copied them."""
    held = set(_words(" ".join(sources)))
    named = (_NUMBER if numbers_only else _NAME_OR_NUMBER).findall(without_citations(demonstration))
    foreign = {w for w in _words(" ".join(named)) if w not in held}
    text = _years_only(text, foreign, held)
    return " ".join(s for s in sentences(text) if not foreign & set(_words(without_citations(s))))


_FULL_DATES = [re.compile(rf"(?P<on>\bon\s+(?:the\s+)?)?{pattern}", re.IGNORECASE) for pattern in _SPELLED_DAYS]


def _years_only(text: str, foreign: set[str], held: set[str]) -> str:
    """``text`` with each full date whose day is ``foreign`` (an example's, nothing read holds it) and whose year is
    ``held`` cut to its year: "released on June 19, 2003" → "released in 2003" where the pair says 2003 and the
    example has a June 19. The small model fills its example's date format with a day of its own; the year is what
    the grounds hold, and the sentence then states it instead of being dropped."""

    def cut(date: re.Match[str]) -> str:
        if date["day"] not in foreign or date["year"] not in held:
            return date[0]
        return f"{'In' if date['on'][:1] == 'O' else 'in'} {date['year']}" if date["on"] else date["year"]

    for pattern in _FULL_DATES:
        text = pattern.sub(cut, text)
    return text


def _words(text: str) -> list[str]:
    return normalize_answer(text).split()


def copied_runs(text: str, sources: Sequence[str], minimum: int = 1) -> list[str]:
    """The stretches of ``text`` (normalised words) that appear word for word in one of ``sources``, each at least
    ``minimum`` words long and as long as it goes, longest first."""
    words = _words(text)
    ends: dict[int, int] = {}  # end index in ``words`` → longest run ending there
    for source in sources:
        other = _words(source)
        previous = [0] * (len(other) + 1)
        for i, word in enumerate(words):
            current = [0] * (len(other) + 1)
            for j, candidate in enumerate(other, 1):
                if word == candidate:
                    current[j] = previous[j - 1] + 1
                    ends[i] = max(ends.get(i, 0), current[j])
            previous = current
    runs = [(i - n + 1, i + 1) for i, n in ends.items() if n >= minimum and ends.get(i + 1, 0) != n + 1]
    return [" ".join(words[a:b]) for a, b in sorted(runs, key=lambda run: run[0] - run[1])]


def longest_copied_run(text: str, sources: Sequence[str]) -> int:
    """The most consecutive words (normalised) that ``text`` shares with any one of ``sources``."""
    runs = copied_runs(text, sources)
    return len(runs[0].split()) if runs else 0


def uncopied(text: str, sources: Sequence[str], answers: Sequence[str] = ()) -> str:
    """``text`` kept below ``COPY_LIMIT`` consecutive words of any one of ``sources``: each sentence is kept, in order,
    while the text kept so far copies fewer; a sentence that would copy is cut back to its longest leading clause that
    does not (``leading_clauses``: "X was hanged on December 7, 1869, on the outside wall of ..." → "X was hanged on
    December 7, 1869."), else dropped. '' when nothing is left, or when what is left loses one of ``answers`` that
    ``text`` states (a reading outweighs a quote). The last resort of an answer whose rewrites still quote a passage."""
    kept: list[str] = []
    for sentence in sentences(text):
        for candidate in (sentence, *leading_clauses(sentence)):
            if longest_copied_run(" ".join([*kept, candidate]), sources) < COPY_LIMIT:
                kept.append(candidate)
                break
    left = " ".join(kept)
    return "" if any(contains_answer(text, a) and not contains_answer(left, a) for a in answers) else left


_CLAUSE_END = re.compile(r"[,;]\s+(?!\d{4}\b)")  # not the comma of "December 7, 1869"
_OPENER = re.compile(  # a sentence that opens with a phrase ("As agents of the bureau, the team ...")
    r"^(?:about|according|after|against|along|although|among|as|at|because|before|besides|by|despite|during|"
    r"following|for|from|if|in|like|on|once|since|though|through|throughout|under|unlike|until|upon|when|whereas|"
    r"while|with|within|without)\b",
    re.IGNORECASE,
)
MIN_CLAUSE_WORDS = 4  # a shorter head ("The film.", "In 2003, the film.") says nothing on its own
_FINITE = re.compile(  # a verb, roughly: enough to tell "The film was released in 2003" from "The film"
    r"\b(?:is|are|was|were|has|have|had|does|did|will|would|can|could|may|might|should|must|became|began|came|went|"
    r"won|made|took|gave|wrote|sang|held|led|ran|saw|told|found|left|built|sold|got|lost|beat|bought|brought|fought|"
    r"drew|flew|grew|knew|threw|spoke|chose|rose|stood|said|paid|\w{2,}ed)\b",
    re.IGNORECASE,
)
_NOUN_BEFORE = {"a", "an", "the", "its", "his", "her", "our", "their", "of", "all", "any", "few", "many", "some",
                "these", "those", "several", "two", "three", "four", "five"}  # fmt: skip
_DANGLING = re.compile(
    r"\b(?:a|an|the|of|to|in|on|at|by|for|from|with|about|as|than|and|or|but|nor|its|their|his|her|this|that)\W*$",
    re.IGNORECASE,
)
_RELATIVE = re.compile(r"[,;]\s+(?:who|whom|whose|which|where|when|that)\b", re.IGNORECASE)


def _has_verb(clause: str) -> bool:
    """Whether ``clause`` seems to hold a verb: a common one, a past form, or a lower-case word in -s after a word
    that does not start a plural ("It originates", "the team travels"; not "the rivers", "Beatles", "status")."""
    if _FINITE.search(clause):
        return True
    words = re.findall(r"[\w'’-]+", clause)
    return any(
        word.islower() and len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is"))
        and before.lower() not in _NOUN_BEFORE
        for before, word in zip(words, words[1:])
    )  # fmt: skip


LIST_ITEM_WORDS = 5  # "James Johnston", "Joseph McDowell and Isaac Shelby": an item of a list


def _in_list(sentence: str, end: int, ends: list[int]) -> bool:
    """Whether a cut at ``end`` would end a list early ("led by A, B, C, D and E" → "led by A, B."): the segment after
    it is an item (at most ``LIST_ITEM_WORDS`` words) that ends the list ("and E") or is followed by another item."""
    cuts = [end, *(e for e in ends if e > end), len(sentence)]
    segments = [sentence[a + 1 : b] for a, b in zip(cuts, cuts[1:])]  # the clauses after the cut, in order
    following = segments[0]
    if len(following.split()) > LIST_ITEM_WORDS:
        return False
    if re.search(r"\b(?:and|or)\b", following):
        return True
    return len(segments) > 1 and len(segments[1].split()) <= LIST_ITEM_WORDS


def leading_clauses(sentence: str) -> list[str]:
    """The heads of ``sentence`` that end where one of its clauses does (at a comma or semicolon; never inside a date,
    brackets, quotes or a list, nor after a word that wants another: "for about."), longest first, each closed with a
    full stop. The sentence's main clause is its first, or its second after an opening phrase ("As agents of the
    bureau,", "Meanwhile,": a preposition or a clause without a verb); only a main clause with a verb gives heads, and
    each holds at least ``MIN_CLAUSE_WORDS`` words past the opening phrase: "In 2003, the film, which came out, did
    well." has none."""
    ends = [m.start() for m in _CLAUSE_END.finditer(sentence)]
    subject = bool(ends) and bool(_RELATIVE.match(sentence, ends[0]))  # "The album, which came out in 1999, sold"
    opens = bool(ends) and (bool(_OPENER.match(sentence)) or not (subject or _has_verb(sentence[: ends[0]])))
    first = 1 if opens else 0
    start = ends[0] if opens else 0
    if first >= len(ends) or not _has_verb(sentence[start : ends[first]]):
        return []
    heads = []
    for end in reversed(ends[first:]):
        head = sentence[:end].rstrip()
        balanced = (
            head.count("(") == head.count(")") and head.count('"') % 2 == 0 and head.count("“") == head.count("”")
        )
        dangling = _DANGLING.search(head)  # "flows southeast for about" (a passage that lost its number)
        listing = _in_list(sentence, end, ends)
        if balanced and not dangling and not listing and len(_words(sentence[start:end])) >= MIN_CLAUSE_WORDS:
            heads.append(head if head.endswith(".") else f"{head}.")
    return heads


# A sentence about the question instead of the world: the small model echoing VerDICt's "explain how the question can
# be read" ("The question "…" can be read as asking about the founding date of the school."), or judging the readings.
_QUESTION_TALK = re.compile(
    r"^(?:the\s+question\b[^.]*?\b(?:can|could|may|might)\s+be\s+(?:read|interpreted|understood|answered)\b"
    r"|the\s+question\s+(?:asks|is\s+asking)\b"
    r"|there\s+are\s+(?:\w+\s+){0,2}(?:versions|readings|interpretations)\s+of\s+(?:this|the)\s+question\b"
    r"|the\s+(?:first|second|third|fourth|other)\s+(?:version|reading|interpretation)\s+(?:asks|is\s+asking)\b"
    r"|this\s+is\s+the\s+only\s+answer\s+that\s+(?:\w+\s+)?addresses\s+the\s+question\b"
    r"|this\s+(?:\w+ly\s+)?(?:answers|addresses)\s+the\s+question\b"
    r"|(?:the\s+|all\s+(?:the\s+)?)?(?:other|remaining)\s+(?:answers?|options?|choices?)\s+"  # grading the readings
    r"(?:are|is|were|was|do|does|may|might|could|seem|refer)\b)",
    re.IGNORECASE,
)


def without_question_talk(text: str, answers: Sequence[str]) -> str:
    """``text`` less the sentences that talk about the question ("The question … can be read as asking about …",
    "This is the only answer that directly addresses the question …") or grade the other readings ("The other answers
    are either incorrect or not relevant …") and state none of ``answers``; '' when every sentence does. Such a
    sentence that introduces a list ("… can be read in two ways: As a date: It was sold in 1976.", the list items
    joined to it) loses only its introduction."""
    kept = []
    for sentence in sentences(text):
        while (talk := _QUESTION_TALK.match(sentence)) and (introduced := _INTRODUCED.search(sentence, talk.end())):
            sentence = sentence[introduced.end() :]
        if not _QUESTION_TALK.match(sentence) or any(contains_answer(sentence, a) for a in answers):
            kept.append(sentence)
    return " ".join(kept)


_INTRODUCED = re.compile(r":\s+(?=[A-Z])")  # "… in two ways: As a specific date …": what the colon introduces


def narrates(text: str, sources: Sequence[str]) -> bool:
    """An answer that talks about its sources or copies ``COPY_LIMIT`` or more consecutive words of one of them."""
    return mentions_sources(text) or longest_copied_run(text, sources) >= COPY_LIMIT
