"""The check every question passes before a method runs (CLI, API, server, MCP, tools). It imports nothing of the
LLM, graph or store stack, so the CLI rejects a bad question at once."""

from __future__ import annotations

from typing import Any

from agent.errors import InvalidQuestionError
from agent.settings import get_settings
from agent.text import printable


def validate_question(question: Any) -> str:
    """``question`` as one line of printable text, or an ``InvalidQuestionError`` saying what is wrong with it: empty,
    not UTF-8, only control characters, or longer than the ``max_question_chars`` setting."""
    if not isinstance(question, str) or not question.strip():
        raise InvalidQuestionError(
            "the question is empty: ask something, e.g. 'When did the Harry Potter film come out?'"
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidQuestionError("the question is not valid UTF-8 text") from None
    question = " ".join(printable(question).split())  # no terminal escapes or control characters
    if not question:
        raise InvalidQuestionError("the question holds only control characters")
    limit = get_settings().max_question_chars
    if len(question) > limit:
        raise InvalidQuestionError(f"the question has {len(question):,} characters; the limit is {limit:,}")
    return question
