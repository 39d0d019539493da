"""Tolerant parsers for small-model output: one module, used by every graph.

Each parser accepts the paper's text formats (``DQ 1:``/``DA 1:``, Yes/No, True/False, numbered lists,
``##Reason: … ##Answer: […]``) and the JSON a grammar-constrained call returns. On failure it raises
``ParseError`` so the caller can retry and then fall back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.schemas import QAPair
from agent.text import CITATION_MARK


class ParseError(ValueError):
    pass


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (code fences and chatter around it are ignored)."""
    text = text.strip()
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
            return value
        except json.JSONDecodeError:
            continue
    raise ParseError("no JSON value found")


# A DA pairs only with the DQ of its number. A DA numbered unlike the DQ before it ("DQ 3: ... DA 1: ...") goes to
# ``misnumbered_disambiguations`` instead: taken like any other pair, such DAs were mostly one passage sentence repeated
# for several DQs or answers to other questions (6 of 30 ASQA dev questions, docs/answers.md), so I_e keeps one only
# where it passes stricter checks (``agent.steps.rac.misnumbered``).
_ANSWER_END = r"(?=\s*(?:\n\s*\n|D[QA]\s*\d+\s*[:.)-]|Answer\s*:|$))"  # a DA ends where the next DQ or DA begins
_DQ_DA = re.compile(
    rf"DQ\s*(\d+)\s*[:.)-]\s*(?P<q>.+?)\s*(?:\n|\s)\s*DA\s*\1\s*[:.)-]\s*(?P<a>.+?){_ANSWER_END}",
    re.IGNORECASE | re.DOTALL,
)
_DQ_ANY_DA = re.compile(
    r"DQ\s*(?P<n>\d+)\s*[:.)-]\s*(?P<q>(?:(?!DQ\s*\d+\s*[:.)-]).)+?)\s*(?:\n|\s)\s*DA\s*(?P<m>\d+)\s*[:.)-]\s*"
    rf"(?P<a>.+?){_ANSWER_END}",
    re.IGNORECASE | re.DOTALL,
)


def _clean(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip().strip('"').strip()


def parse_disambiguations(text: str) -> list[QAPair]:
    """``DQ i: … DA i: …`` pairs (one per line or all inline), or JSON ``{"disambiguations": [...]}``."""
    stripped = text.strip()
    if stripped.startswith(("{", "[", "```")):
        try:
            return _pairs_from_json(extract_json(stripped))
        except ParseError:
            pass
    pairs = [QAPair(question=_clean(m["q"]), answer=_clean(m["a"])) for m in _DQ_DA.finditer(text)]
    pairs = [p for p in pairs if p.question and p.answer]
    if not pairs:
        raise ParseError("no 'DQ i:' / 'DA i:' pairs found")
    return pairs


def misnumbered_disambiguations(text: str) -> list[QAPair]:
    """The ``DQ i: … DA j: …`` pairs with j ≠ i ("DQ 3: …? DA 1: June 14, 2017"), which ``parse_disambiguations``
    leaves out, in the reply's order; none for a JSON reply."""
    if text.strip().startswith(("{", "[", "```")):
        return []
    pairs = [
        QAPair(question=_clean(m["q"]), answer=_clean(m["a"]))
        for m in _DQ_ANY_DA.finditer(text)
        if int(m["n"]) != int(m["m"])
    ]
    return [p for p in pairs if p.question and p.answer]


def _pairs_from_json(value: Any) -> list[QAPair]:
    if isinstance(value, dict):
        value = value.get("disambiguations", value.get("pairs", []))
    if not isinstance(value, list):
        raise ParseError("JSON has no list of pairs")
    pairs = []
    for item in value:
        if isinstance(item, dict):
            q = str(item.get("question", "")).strip()
            a = str(item.get("answer", "")).strip()
            if q and a:
                pairs.append(QAPair(question=q, answer=a))
    if not pairs:
        raise ParseError("JSON list holds no question/answer pairs")
    return pairs


def _first_word(text: str, words: tuple[str, ...]) -> str | None:
    """The first of ``words`` that appears as a whole word, scanning a JSON value or the text itself."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = extract_json(stripped)
            if isinstance(value, dict) and value:
                stripped = " ".join(str(v) for v in value.values())
        except ParseError:
            pass
    match = re.search(r"\b(" + "|".join(words) + r")\b", stripped, re.IGNORECASE)
    return match.group(1).lower() if match else None


def parse_yes_no(text: str) -> bool:
    word = _first_word(text, ("yes", "no"))
    if word is None:
        raise ParseError("neither Yes nor No found")
    return word == "yes"


def parse_true_false(text: str) -> bool:
    word = _first_word(text, ("true", "false"))
    if word is None:
        raise ParseError("neither True nor False found")
    return word == "true"


_LIST_ITEM = re.compile(r"^\s*(?:\d+\s*[:.)-]|[-*•])\s*(.+?)\s*$", re.MULTILINE)


def parse_numbered_list(text: str) -> list[str]:
    """Items of a ``1: …`` / ``1. …`` / ``- …`` list, or a JSON list of strings (possibly under one key)."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            value = extract_json(stripped)
            if isinstance(value, dict):
                value = next((v for v in value.values() if isinstance(v, list)), [])
            items = [str(v).strip() for v in value if str(v).strip()]
            if items:
                return items
        except ParseError:
            pass
    items = [_clean(m.group(1)) for m in _LIST_ITEM.finditer(text)]
    items = [i for i in items if i]
    if not items:
        raise ParseError("no list items found")
    return items


def strip_label(text: str, labels: tuple[str, ...] = ("final answer", "answer", "response")) -> str:
    """Remove a leading ``Answer:``-style label a model echoes from the few-shot format."""
    text = text.strip()
    pattern = r"^\s*(?:" + "|".join(re.escape(label) for label in labels) + r")\s*:\s*"
    return re.sub(pattern, "", text, count=1, flags=re.IGNORECASE).strip()


def usable_text(text: str, min_words: int) -> bool:
    """Text a reader could use: ``min_words`` words holding letters or digits, and mostly letters and digits rather
    than symbols."""
    words = [token for token in text.split() if any(ch.isalnum() for ch in token)]
    compact = "".join(text.split())
    return len(words) >= min_words and sum(ch.isalnum() for ch in compact) >= 0.6 * len(compact)


def parse_long_answer(text: str) -> str:
    """A long-form answer; a reply without usable text (``%%%@@@ garbage ~~~``) is a parse failure, never an answer."""
    answer = strip_label(text)
    if not usable_text(answer, 2):
        raise ParseError("the answer has no usable text")
    return answer


_PAIR_LINE = re.compile(r"(?:^|\s)D[QA] ?\d+:")  # the model carrying on in the DQ/DA format after its answer


def parse_answer(text: str) -> str:
    """A long answer: the reply less an echoed "Answer:" label and anything from a DQ/DA line on (the papers' pair
    format, which the model may carry on in); a ``ParseError`` when no usable text is left."""
    answer = _PAIR_LINE.split(parse_long_answer(text))[0].strip()
    if not usable_text(answer, 2):
        raise ParseError("the answer has no usable text before its DQ/DA lines")
    return answer


# a sentence ends at . ! or ? (then an optional closing quote or bracket, a closing quote set apart by a space, and a
# citation like [3], with a stop of its own: "sperm. [8].") before a space or the end; not after an initial ("J. K.")
# or a common abbreviation ("St. Louis")
SAYS = (  # a verb that attributes what follows to a source: "states", "clearly says", "also notes"
    r"(?:(?:\w+ly|also)\s+)?(?:states?|says?|mentions?|indicates?|shows?|notes?|confirms?|explains?|reports?|tells?)"
)
_OPENS_A_SENTENCE = rf"(?!\s+{SAYS}\b)"
_SENTENCE_END = re.compile(  # a citation after the stop is the sentence's, unless it opens the next: "[13] states …"
    rf"""[.!?]["'”’)\]]*(?:\s+["”](?=\s|$))?(?:\s*\[\d+\]{_OPENS_A_SENTENCE})*(?:(?<=\])[.!?])?(?=\s|$)"""
)
_NOT_AN_END = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|No|Mt|Ft|U\.S|U\.K|Inc|Co|Ltd))\.$")


_ITEM_MARKER = re.compile(r"(?:^|\n)[ \t]*(?:\d{1,2}[.)]|[-*•])[ \t]+")  # "1. ", "2) ", "- " opening a line
_LOWER_NEXT = re.compile(r"""\s*["'”’]?\s*[a-z]""")  # '"Who won? " can be read ...': the sentence goes on


def sentences(text: str) -> list[str]:
    """``text`` split after each sentence end (the same ends as ``whole_sentences``) and at each list item (its
    marker dropped: "1. ", "- "), each stripped; a part without a letter or digit ("." after "… [2]. .") is none.
    An end followed by a lower-case word is none."""
    parts = []
    for block in _ITEM_MARKER.split(text):
        starts = 0
        for match in _SENTENCE_END.finditer(block):
            if not _NOT_AN_END.search(block[: match.start() + 1]) and not _LOWER_NEXT.match(block, match.end()):
                parts.append(block[starts : match.end()].strip())
                starts = match.end()
        parts.append(block[starts:].strip())
    return [part for part in parts if worded(part)]


def worded(text: str) -> bool:
    """Whether ``text`` holds a letter or digit outside citation marks: a sentence, not stray punctuation nor a
    citation left behind by a sentence that went ("[14].")."""
    return any(ch.isalnum() for ch in CITATION_MARK.sub("", text))


def whole_sentences(text: str) -> str:
    """A reply cut at its token cap, up to the end of its last whole sentence (unchanged if it has none): a long
    answer should not stop mid-word. Ends are those of ``sentences``: a quoted question that a lower-case word
    carries on ('the answer to "Who was first? " is either') ends none."""
    text = text.rstrip()
    ends = [
        m.end()
        for m in _SENTENCE_END.finditer(text)
        if not _NOT_AN_END.search(text[: m.start() + 1]) and not _LOWER_NEXT.match(text, m.end())
    ]
    return text[: ends[-1]] if ends else text


AMBIGUITY_TYPES = ("AmbSub", "AmbObj", "AmbPred", "AmbTime", "AmbLoc", "N/A")


def parse_ambiguity(text: str) -> tuple[list[str], str]:
    """DIVA's I_a output ``##Reason: … ##Answer: [AmbSub], [AmbTime]`` → (types, reason); N/A when no type is named."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = extract_json(stripped)
            if isinstance(value, dict):
                types = value.get("types", value.get("answer", []))
                types = types if isinstance(types, list) else [types]
                stripped = f"##Reason: {value.get('reason', '')} ##Answer: {' '.join(f'[{t}]' for t in types)}"
        except ParseError:
            pass
    reason_match = re.search(r"#*\s*Reason\s*:\s*(.+?)(?=#*\s*Answer\s*:|$)", stripped, re.IGNORECASE | re.DOTALL)
    answer_match = re.search(r"#*\s*(?:Answer|Types?)\s*:\s*(.+)$", stripped, re.IGNORECASE | re.DOTALL)
    scope = answer_match.group(1) if answer_match else stripped
    found = []
    for name in AMBIGUITY_TYPES:
        pattern = r"N\s*/?\s*A\b" if name == "N/A" else re.escape(name)
        if re.search(pattern, scope, re.IGNORECASE):
            found.append(name)
    if not found:
        raise ParseError("no ambiguity type found")
    if len(found) > 1 and "N/A" in found:
        found.remove("N/A")
    reason = " ".join(reason_match.group(1).split()) if reason_match else ""
    return found, reason


_SELF_ASK = re.compile(
    r"(?P<kind>follow[\s-]*up(?:\s+question)?|so\s+the\s+final\s+answer\s+is|final\s+answer)\s*:\s*(?P<text>[^\n]+)",
    re.IGNORECASE,
)


def parse_self_ask(text: str) -> tuple[bool, str]:
    """Self-Ask's next step: ``(True, sub-question)`` for ``Follow up: …``, ``(False, answer)`` for the final answer."""
    match = _SELF_ASK.search(text)
    if match is None:
        raise ParseError("neither 'Follow up:' nor 'So the final answer is:' found")
    value = _clean(match["text"])
    if not value:
        raise ParseError("empty follow-up question or final answer")
    return match["kind"].lower().startswith("follow"), value


_FORMAT_ECHOES = {"short answer", "not a sentence", "a short answer"}  # the format's own words, copied back


def parse_short_answer(text: str) -> str:
    """A short factoid answer: the first non-empty line, without an ``Answer:`` label or a final full stop. The
    format's placeholder copied back ("<short answer>", "not a sentence") is no answer: ``ParseError``."""
    lines = [strip_label(line) for line in text.strip().splitlines() if strip_label(line)]
    if not lines or not any(ch.isalnum() for ch in lines[0]):
        raise ParseError("the answer is empty or has no letters or digits")
    answer = _clean(lines[0]).rstrip(".").strip()
    if answer.strip("<>").lower() in _FORMAT_ECHOES:
        raise ParseError(f"the answer copies the format's placeholder: {answer!r}")
    return answer


_NULL_WORDS = {"", "null", "none", "n/a", "na", "unknown", "abstain"}
_FIELD = r"^\s*(?:\**\s*){label}\s*\**\s*:\s*\**\s*(.+?)\s*$"


def _is_null(value: Any) -> bool:
    return value is None or _clean(str(value)).rstrip(".").lower() in _NULL_WORDS


def parse_execution(text: str) -> QAPair | None:
    """VerDICt I_E: ``Interpretation: … / Answer: …`` (or JSON) → a pair; ``null`` (either field) → None (abstain)."""
    stripped = text.strip()
    if stripped.startswith(("{", "```")):
        try:
            value = extract_json(stripped)
        except ParseError:
            value = None
        if isinstance(value, dict):
            question = value.get("interpretation", value.get("question"))
            answer = value.get("answer")
            if _is_null(question) or _is_null(answer):
                return None
            return QAPair(question=_clean(str(question)), answer=_clean(str(answer)))
    if _is_null(stripped.splitlines()[0] if stripped else ""):
        return None
    question = re.search(
        _FIELD.format(label="(?:interpretation|question|DQ\\s*1?)"), text, re.IGNORECASE | re.MULTILINE
    )
    answer = re.search(_FIELD.format(label="(?:answer|DA\\s*1?)"), text, re.IGNORECASE | re.MULTILINE)
    if not question or not answer:
        raise ParseError("no 'Interpretation:' / 'Answer:' fields and no 'null'")
    if _is_null(question.group(1)) or _is_null(answer.group(1)):
        return None
    return QAPair(question=_clean(question.group(1)), answer=_clean(answer.group(1)))


def parse_query(text: str) -> str:
    """A one-line search query (VerDICt I_R): the first non-empty line, its label and quotes removed."""
    for line in text.strip().splitlines():
        query = _clean(strip_label(line, ("relaxed query", "search query", "query")))
        if query:
            return query
    raise ParseError("the query is empty")


def parse_decisions(text: str, count: int) -> list[bool]:
    """``count`` Yes/No labels in order: a JSON list (or ``{"decisions": [...]}``), numbered lines, or bare words."""
    stripped = text.strip()
    words: list[str] = []
    if stripped.startswith(("{", "[", "```")):
        try:
            value = extract_json(stripped)
            if isinstance(value, dict):
                value = next((v for v in value.values() if isinstance(v, list)), [])
            words = [str(v) for v in value] if isinstance(value, list) else []
        except ParseError:
            words = []
    if not words:
        numbered = re.findall(r"^\s*\d+\s*[:.)-]?\s*.*?\b(yes|no)\b", text, re.IGNORECASE | re.MULTILINE)
        words = numbered if len(numbered) == count else re.findall(r"\b(yes|no)\b", text, re.IGNORECASE)
    labels = [w.strip().lower() for w in words]
    if len(labels) != count or any(label not in ("yes", "no") for label in labels):
        raise ParseError(f"expected {count} Yes/No labels, found {len(labels)}")
    return [label == "yes" for label in labels]


_ANSWER_FIELD = re.compile(r"answer\s*:\s*(.*?)(?:\.?\s*explanation\s*:|$)", re.IGNORECASE | re.DOTALL)
_EXPLANATION_FIELD = re.compile(r"explanation\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_agent_reply(text: str) -> tuple[str, str]:
    """MADAM-RAG's agent: ``Answer: … Explanation: …`` → (answer, explanation); without the labels the first
    sentence is the answer. An empty answer is a ``ParseError`` (an agent that says nothing has not answered)."""
    stripped = text.strip().strip("'\"")
    found = _ANSWER_FIELD.search(stripped)
    explanation = _EXPLANATION_FIELD.search(stripped)
    answer = found.group(1) if found else (sentences(stripped) or [""])[0]
    answer = _clean(answer.splitlines()[0] if answer.strip() else "").strip(" .{}[]")
    if not answer or not any(ch.isalnum() for ch in answer):
        raise ParseError("the agent gave no answer")
    return answer, _clean(explanation.group(1)).strip(" .{}'\"") if explanation else ""


_ALL_ANSWERS = re.compile(r"all correct answers\s*:\s*(\[.*?\]|[^\n.]*)", re.IGNORECASE | re.DOTALL)


def parse_aggregation(text: str) -> tuple[list[str], str]:
    """MADAM-RAG's aggregator: ``All Correct Answers: [...]. Explanation: …`` → (answers, explanation); ``unknown``
    or ``[]`` is no answer. Without the label there is nothing to trust: ``ParseError``."""
    found = _ALL_ANSWERS.search(text)
    if found is None:
        if _clean(text).strip(" .'\"").lower() == "unknown":
            return [], ""
        raise ParseError("no 'All Correct Answers:' line")
    raw = found.group(1).strip()
    try:
        values = json.loads(raw) if raw.startswith("[") else [raw]
    except json.JSONDecodeError:
        values = [v.strip(" '\"") for v in raw.strip("[]").split(",")]
    answers = [_clean(str(v)).strip(" .'\"") for v in values if not isinstance(v, (list, dict))]
    answers = list(dict.fromkeys(a for a in answers if a and a.lower() not in _NULL_WORDS))
    explanation = _EXPLANATION_FIELD.search(text[found.end() :])
    return answers, _clean(explanation.group(1)).strip(" .{}'\"") if explanation else ""


_FINAL_LINE = re.compile(
    r"^\s*(?:\**\s*)(?:so the (?:final )?answer is|\[?final answer\]?|answer)\s*\**\s*:\s*(.+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)


_REASONING_LABEL = re.compile(r"^\**\s*reasoning\s*\**\s*:\s*\**\s*", re.IGNORECASE)


def reasoning_of(text: str) -> str:
    """A step-by-step reply's reasoning: what it says before its last answer line, without the ``Reasoning:`` label,
    on one line ('' for a reply without an answer line or with nothing before it)."""
    found = list(_FINAL_LINE.finditer(text))
    if not found:
        return ""
    before = _REASONING_LABEL.sub("", text[: found[-1].start()].strip(), count=1)
    return " ".join(before.split())


def parse_final_answer(text: str) -> str:
    """A step-by-step reply's short answer: the last ``So the answer is: …`` (or ``[Final Answer]:``/``Answer:``)
    line; without one, the reply read as a short answer."""
    found = _FINAL_LINE.findall(text)
    if found:
        return parse_short_answer(found[-1])
    if re.search(r"^\s*reasoning\s*:", text, re.IGNORECASE | re.MULTILINE):
        raise ParseError("the reasoning ends without its answer line")
    return parse_short_answer(text)
