"""What the LangGraph Agent Server (``langgraph dev`` / ``langgraph up``) adds from ``langgraph.json``: the API key
(``auth``) and an ``http.app`` with ``/passages`` and the request checks ``serve`` makes.

The key is ``AMBIGQA_API_KEY`` (the environment or the ``.env`` file ``langgraph.json`` names), sent as ``X-API-Key``
and compared as UTF-8 bytes in constant time; without one the server is open, as ``serve`` is on loopback. Before a
run is created (``POST /runs…``, ``/threads/{id}/runs…``) its body is read within a byte limit and checked: the question
(the CLI's one-line error, as a 422), the options a request may set and the collection against
``AMBIGQA_SERVED_COLLECTIONS`` (comma-separated; default: ``AMBIGQA_COLLECTION``). A resume (``command``) carries no
question. docs/serving.md, "The Agent Server".
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from typing import Any

from fastapi import FastAPI, HTTPException
from langgraph_sdk import Auth

from agent.errors import AgentError, InvalidQuestionError
from agent.settings import get_settings
from agent.surfaces.guard import API_KEY_HEADER, Policy, Refusal, check_options, parse_json, read_body, reply
from agent.surfaces.keys import key_matches
from agent.surfaces.server import STATUS, PassagesRequest, served_collection

RUN_PATHS = re.compile(r"/(?:threads/[^/]+/)?runs(?:/wait|/stream|/batch)?/?")
MAX_BODY_BYTES = 64_000
BODY_TIMEOUT_S = 10.0

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> str:
    """Every request (Studio's included) carries the key, or is a 401 that says which header to send."""
    key = os.environ.get("AMBIGQA_API_KEY")
    if not key:
        return "anonymous"
    given = headers.get(API_KEY_HEADER)
    if given is None or not key_matches(given, key):
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or wrong X-API-Key header")
    return "key-holder"


@cache
def policy() -> Policy:
    """The operator's limits, read once from the environment."""
    settings = get_settings()
    served = os.environ.get("AMBIGQA_SERVED_COLLECTIONS", "")
    collections = tuple(name.strip() for name in served.split(",") if name.strip()) or (settings.collection,)
    return Policy(collections=collections, max_question_chars=settings.max_question_chars)


def question_of(run_input: Any) -> Any:
    """The question a run's input asks: its ``question``, else its last human chat message's text."""
    if not isinstance(run_input, dict):
        return None
    if "question" in run_input:
        return run_input["question"]
    for message in reversed(run_input.get("messages") or []):
        if isinstance(message, dict) and message.get("type", message.get("role")) in ("human", "user"):
            content = message.get("content")
            if isinstance(content, list):  # content blocks: the text ones
                content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
            return content
    return None


def check_run(body: Any) -> None:
    """A run request's body as ``serve`` would check it; a ``Refusal`` (422) says what is wrong in one line."""
    from agent.questions import validate_question
    from agent.registry import METHODS

    if not isinstance(body, dict):
        raise Refusal(422, "the body must be a JSON object")
    payloads = body.get("payloads")
    runs = payloads if isinstance(payloads, list) else [body]  # /runs/batch
    for run in runs:
        if not isinstance(run, dict):
            raise Refusal(422, "each run must be a JSON object")
        if run.get("input") is not None or run.get("command") is None:
            try:
                validate_question(question_of(run.get("input")))
            except InvalidQuestionError as exc:
                raise Refusal(422, str(exc)) from None
        method = run.get("assistant_id")
        options = {**((run.get("config") or {}).get("configurable") or {}), **(run.get("context") or {})}
        if method in METHODS:
            check_options(method, {"configurable": options}, "context", policy())
        else:  # an assistant made from a graph: its id says no method, so only the collection is checked here
            policy().check_collection(options.get("collection"), "context")


class RunChecks:
    """ASGI middleware: a run-creating request's body read within ``MAX_BODY_BYTES`` and ``check_run``'s checks."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not RUN_PATHS.fullmatch(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(receive, MAX_BODY_BYTES, BODY_TIMEOUT_S)
            check_run(parse_json(body))
        except Refusal as refusal:
            await reply(send, refusal.status, refusal.detail)
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


app = FastAPI(title="ambigqa on the Agent Server")
app.add_middleware(RunChecks)


@app.post("/passages")
def passages(request: PassagesRequest) -> list[dict[str, Any]]:
    """The stored passages with the ids a result cites, whole, in the order given; an unknown id is a 404."""
    from agent.runner import lookup

    try:
        found = lookup(request.ids, collection=served_collection(request.collection, policy().collections))
    except AgentError as exc:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        raise HTTPException(status, str(exc).splitlines()[0]) from None
    return [json.loads(p.model_dump_json(exclude={"score"})) for p in found]
