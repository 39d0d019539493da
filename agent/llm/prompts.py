"""Load prompt files from ``prompts/``: a shared system part first, the per-call user part last (prefix cache)."""

from __future__ import annotations

import math
from functools import cache
from string import Template

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agent.resources import prompt_file

USER_MARKER = "<<<user>>>"
CHARS_PER_TOKEN = 3.5  # English under Qwen2.5's tokenizer runs ~4 characters a token: this errs on the long side


@cache
def load_prompt(name: str) -> tuple[Template, Template]:
    """Return the (system, user) templates of ``prompts/<name>.txt``; ``$var`` placeholders."""
    path = prompt_file(name)
    if not path.is_file():
        raise FileNotFoundError(f"prompt '{name}' not found at {path}")
    text = path.read_text(encoding="utf-8")
    if USER_MARKER not in text:
        raise ValueError(f"prompt {path} lacks the '{USER_MARKER}' line that separates the shared and per-call parts")
    system, user = text.split(USER_MARKER, 1)
    return Template(system.strip()), Template(user.strip())


def estimate_tokens(text: str) -> int:
    """A conservative token count without the model's tokenizer (budgets, not billing)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def render(name: str, system_suffix: str = "", **variables: str) -> list[BaseMessage]:
    system, user = load_prompt(name)
    system_text = system.substitute(variables).strip()  # a prompt without examples ends where they would stand
    if system_suffix:
        system_text = f"{system_text}\n\n{system_suffix}"
    return [SystemMessage(system_text), HumanMessage(user.substitute(variables))]


def prompt_tokens(name: str, **variables: str) -> int:
    """Estimated tokens of the rendered prompt (chat-template tokens aside)."""
    return sum(estimate_tokens(str(message.content)) for message in render(name, **variables))
