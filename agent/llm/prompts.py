"""Load prompt files from ``prompts/``: what calls share first, the per-call part last (llama.cpp's prefix cache).

A prompt file is optional header lines (``max_tokens: N``, the reply's token cap; ``reply: answer``, the reply is the
answer text a person reads, so it is streamed to whoever listens), the instruction, a ``<<<user>>>`` line, and the
per-call part. A call with a shared ``prefix`` (a question's worked examples and
passages, ``agent.steps.casebook``) sends that prefix as the system message and the instruction after it, so that
every call of the question starts with the same tokens. An instruction may open with ``$evidence`` (the question's
passages): calls that read the same passages under different instructions then share them too (DIVA's verify and I_e).
A file without that line is a preface: fixed text a casebook opens with (``load_preface``), such as DIVA's definitions
of the ambiguity types, which then precede the examples in every call and are prefilled once across questions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from string import Template

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agent.resources import prompt_file

USER_MARKER = "<<<user>>>"
PROMPT: ContextVar[str] = ContextVar("ambigqa_prompt", default="")  # the prompt of the LLM call in flight (set by
# agent.llm.calls; a model that streams is not handed its run's tags, so agent.llm.scripted reads it here)
HEADER = re.compile(r"(max_tokens|reply):[ \t]*(\S+)[ \t]*\n")
CHARS_PER_TOKEN = 3.5  # English under Qwen2.5's tokenizer runs ~4 characters a token: this errs on the long side


@dataclass(frozen=True)
class Prompt:
    instruction: Template
    user: Template
    max_tokens: int | None  # what a reply needs; None: the run's cap
    answer: bool = False  # the reply is the answer a person reads (streamed as it is written)


@cache
def load_prompt(name: str) -> Prompt:
    """Parse ``prompts/<name>.txt``; ``$var`` placeholders."""
    path = prompt_file(name)
    if not path.is_file():
        raise FileNotFoundError(f"prompt '{name}' not found at {path}")
    text = path.read_text(encoding="utf-8")
    if USER_MARKER not in text:
        raise ValueError(f"prompt {path} lacks the '{USER_MARKER}' line that separates the shared and per-call parts")
    header, at = {}, 0
    while line := HEADER.match(text, at):
        header[line[1]], at = line[2], line.end()
    if header.get("reply", "answer") != "answer":
        raise ValueError(f"prompt {path}: 'reply:' takes only 'answer', not {header['reply']!r}")
    system, user = text[at:].split(USER_MARKER, 1)
    max_tokens = int(header["max_tokens"]) if "max_tokens" in header else None
    return Prompt(Template(system.strip()), Template(user.strip()), max_tokens, answer="reply" in header)


_LABEL = re.compile(r"^[A-Z][\w ]*?\d*:\s*", re.MULTILINE)  # "Question: ", "DQ 1: ": the format, not the example


@cache
def demonstration(name: str) -> str:
    """The worked examples of ``prompts/<name>.txt``: its shared part after the first line that starts with
    "Example", without the format's line labels; '' when it has none."""
    system = load_prompt(name).instruction.template
    start = re.search(r"^Example.*$", system, re.MULTILINE)
    return _LABEL.sub("", system[start.end() :]).strip() if start else ""


@cache
def load_preface(name: str) -> str:
    """``prompts/<name>.txt`` as fixed text (no placeholders, no ``<<<user>>>`` line)."""
    path = prompt_file(name)
    if not path.is_file():
        raise FileNotFoundError(f"preface '{name}' not found at {path}")
    return path.read_text(encoding="utf-8").strip()


def estimate_tokens(text: str) -> int:
    """A conservative token count without the model's tokenizer (budgets, not billing)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def render(
    name: str, system_suffix: str = "", prefix: str = "", history: Sequence[BaseMessage] = (), **variables: str
) -> list[BaseMessage]:
    """The messages of one call: [instruction, per-call part], or with a shared ``prefix``
    [prefix, instruction + per-call part], or after an earlier call's ``history`` (its messages and reply, which
    hold the prefix) [*history, instruction + per-call part]."""
    prompt = load_prompt(name)
    instruction = prompt.instruction.substitute(variables).strip()
    if system_suffix:
        instruction = f"{instruction}\n\n{system_suffix}"
    user = prompt.user.substitute(variables)
    if history:
        return [*history, HumanMessage(f"{instruction}\n\n{user}")]
    if prefix:
        return [SystemMessage(prefix), HumanMessage(f"{instruction}\n\n{user}")]
    return [SystemMessage(instruction), HumanMessage(user)]
