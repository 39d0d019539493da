"""Answer normalisation (SQuAD/ALCE style) and answer-in-passage tests, shared by graphs and evaluation."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Sequence

from agent.schemas import Passage, QAPair
from agent.settings import get_settings

CITATION_MARK = re.compile(r"\[\d+(?:\s*[,;]\s*\d+)*\]")  # "[3]", "[1, 4]"
# the Snowball English stop words (PostgreSQL's english list): left out of BM25's query terms and answers' content words
STOP_WORDS = frozenset(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself "
    "it its itself they them their theirs themselves what which who whom this that these those am is are was were be "
    "been being have has had having do does did doing a an the and but if or because as until while of at by for with "
    "about against between into through during before after above below to from up down in out on off over under "
    "again further then once here there when where why how all any both each few more most other some such no nor "
    "not only own same so than too very s t can will just don should now".split()
)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
_SPELLINGS = [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
              ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
              ("november", "nov"), ("december", "dec")]  # fmt: skip
MONTHS = {name: i for i, names in enumerate(_SPELLINGS, start=1) for name in names}  # lower-case name → number
MONTH_NAMES = [names[0].capitalize() for names in _SPELLINGS]
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
    return _dates(text, lambda year, month, day: f"{f'{day} ' if day else ''}{MONTH_NAMES[month - 1]} {year}")


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


COPY_LIMIT = 15  # consecutive words shared with one source passage that count as quoting it (a metric, never a rule)

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


_CITATION = re.compile(rf"\s*{CITATION_MARK.pattern}")  # " [3]", " [1, 4]"


def without_citations(text: str) -> str:
    """``text`` less its citation marks ("premiered on 4 November 2001 [1]." → "... 2001."): once normalised, "[3]"
    would read as the number 3."""
    return _CITATION.sub("", text)


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
