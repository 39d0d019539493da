"""The ``response_format`` that constrains a reply to a JSON schema, and what to send when an endpoint refuses it.

OpenAI and vLLM take ``{"type": "json_schema", ...}``; a server that validates the request as older llama-cpp-python
did refuses that type (422) and takes ``{"type": "json_object", "schema": ...}`` instead; some servers take neither. A call whose format is refused is sent
again at once with the next form (the schema then travels only in the system prompt's hint, and the reply is parsed
as tolerantly as ever), and the endpoint is remembered so later calls start there.
"""

from __future__ import annotations

import threading
from typing import Any

from agent.settings import get_settings

_refused: dict[tuple[str, str], int] = {}  # (base URL, model) → how many forms it refused
_lock = threading.Lock()


def json_response_format(name: str | None, schema: dict) -> dict | None:
    """The ``response_format`` that constrains output to ``schema`` on this provider, if it has one."""
    name = name or get_settings().llm
    if name == "local":  # our embedded llama-cpp-python server: json_object + schema → grammar
        return {"type": "json_object", "schema": schema}
    if name == "openai":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}}
    return None


def _forms(response_format: dict) -> list[dict | None]:
    """``response_format`` and what stands in for it, most constraining first."""
    if response_format.get("type") != "json_schema":
        return [response_format, None]
    schema = response_format["json_schema"]["schema"]
    return [response_format, {"type": "json_object", "schema": schema}, None]


def _form(response_format: dict, refused: int) -> dict | None:
    forms = _forms(response_format)
    return forms[min(refused, len(forms) - 1)]


def _endpoint(model: Any) -> tuple[str, str]:
    return str(getattr(model, "openai_api_base", "") or ""), str(getattr(model, "model_name", "") or "")


def accepted_params(model: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the response format this endpoint has not refused (unchanged for one that refused none)."""
    if "response_format" not in params:
        return params
    with _lock:
        refused = _refused.get(_endpoint(model), 0)
    if not refused:
        return params
    form = _form(params["response_format"], refused)
    params = {key: value for key, value in params.items() if key != "response_format"}
    return params if form is None else {**params, "response_format": form}


def refused_format(exc: Exception, model: Any, params: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Whether ``exc`` is the endpoint refusing the response format of ``sent`` (what ``accepted_params`` made of
    ``params``); the endpoint then moves on to the next form, so sending ``accepted_params`` again tries that one.
    False for any other error, or when nothing constraining was sent."""
    format_sent = sent.get("response_format")
    if format_sent is None or not _is_format_refusal(exc):
        return False
    with _lock:
        key = _endpoint(model)
        refused = _refused.get(key, 0)
        if _form(params["response_format"], refused) == format_sent:  # not moved on by a concurrent call
            _refused[key] = refused + 1
    return True


def _is_format_refusal(exc: Exception) -> bool:
    try:
        import openai
    except ImportError:
        return False
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object", "grammar"))
