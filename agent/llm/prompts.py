"""Load prompt files from ``prompts/``: a shared system part first, the per-call user part last (prefix cache)."""

from __future__ import annotations

from functools import cache
from string import Template

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agent.resources import prompt_file

USER_MARKER = "<<<user>>>"


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


def render(name: str, system_suffix: str = "", **variables: str) -> list[BaseMessage]:
    system, user = load_prompt(name)
    system_text = system.substitute(variables)
    if system_suffix:
        system_text = f"{system_text}\n\n{system_suffix}"
    return [SystemMessage(system_text), HumanMessage(user.substitute(variables))]
