"""A scripted chat model: the LLM boundary for tests and for ``--llm fake`` (no model, instant, deterministic).

Each call is identified by the prompt it renders (``prompt:<name>`` tag set by ``agent.llm.calls``). A script maps
prompt names to a reply string, a list of replies consumed in order, or a function of the call. Usage counts
word-level tokens and, like llama.cpp, reports the prompt prefix shared with the previous call as cached.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from agent.llm.prompts import PROMPT
from agent.text import PASSAGES_HEADING


@dataclass
class ScriptedCall:
    prompt: str
    messages: list[BaseMessage]
    kwargs: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0
    thread: str = ""  # where the call ran

    @property
    def system(self) -> str:
        return str(self.messages[0].content) if self.messages else ""

    @property
    def user(self) -> str:
        return str(self.messages[-1].content) if self.messages else ""


Reply = str | AIMessage | list[str | AIMessage] | Callable[[ScriptedCall], str | AIMessage]


def _token_list(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def _tokens(text: str) -> int:
    return len(_token_list(text))


def _prompt_tokens(messages: list[BaseMessage]) -> list[str]:
    """The prompt as one token sequence, as a chat template lays it out (a role marker before each message)."""
    return [t for m in messages for t in (f"<{m.type}>", *_token_list(str(m.content)))]


class ScriptedChatModel(BaseChatModel):
    """Replies from ``script[prompt]`` (or ``default``); records every call for assertions."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: dict[str, Any] = Field(default_factory=dict, description="prompt name → Reply")
    default: Any = Field(default=None, description="the Reply for prompts the script does not name")
    latency: float = Field(default=0.0, description="seconds each call sleeps (to test concurrency)")
    fail_with: Exception | None = None
    context_window: int | None = Field(
        default=None, description="prompt and reply tokens over it are refused with a 400, worded as llama.cpp's server"
    )
    _calls: list[ScriptedCall] = PrivateAttr(default_factory=list)
    _cursor: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _previous: list[str] = PrivateAttr(default_factory=list)  # the last prompt, for the simulated prefix cache
    _refused: list[str] = PrivateAttr(default_factory=list)  # prompts refused as over the context window

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        return list(self._calls)

    @staticmethod
    def context_tokens(messages: list[BaseMessage]) -> int:
        """The tokens ``messages`` take of the context window, as this model counts them."""
        return len(_prompt_tokens(messages))

    @property
    def refused(self) -> list[str]:
        """The names of the prompts refused as over ``context_window``, in order (they are not in ``calls``)."""
        return list(self._refused)

    def prompts(self) -> list[str]:
        return [c.prompt for c in sorted(self._calls, key=lambda c: c.started)]

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        """Tools are the script's business: replies may be ``AIMessage``s with ``tool_calls``."""
        return self

    def _reply(self, call: ScriptedCall) -> str | AIMessage:
        reply = self.script.get(call.prompt, self.default)
        if reply is None:
            raise KeyError(f"scripted model has no reply for prompt '{call.prompt}'")
        if callable(reply):
            return reply(call)
        if isinstance(reply, list):
            with self._lock:
                i = self._cursor.get(call.prompt, 0)
                self._cursor[call.prompt] = i + 1
            return reply[min(i, len(reply) - 1)]
        return reply

    def _begin(self, messages: list[BaseMessage], tags: list[str], kwargs: dict[str, Any]) -> tuple[ScriptedCall, int]:
        """Record the call; the prompt's tokens served from the simulated prefix cache."""
        if self.fail_with is not None:
            raise self.fail_with
        prompt = next((t.split(":", 1)[1] for t in tags if t.startswith("prompt:")), "") or PROMPT.get()
        self._refuse_overflow(prompt, messages, kwargs.get("max_tokens", 0))
        call = ScriptedCall(prompt, messages, kwargs, time.perf_counter(), thread=threading.current_thread().name)
        tokens = _prompt_tokens(messages)
        with self._lock:  # like llama.cpp: the prefix shared with the previous prompt is served from the cache
            self._calls.append(call)
            shared = next((i for i, (a, b) in enumerate(zip(self._previous, tokens)) if a != b), None)
            cached = min(len(self._previous), len(tokens)) if shared is None else shared
            self._previous = tokens
        return call, cached

    def _refuse_overflow(self, name: str, messages: list[BaseMessage], reply: int) -> None:
        """The endpoint's 400 for a prompt that, with its reply, runs over ``context_window`` tokens."""
        prompt = self.context_tokens(messages)
        if self.context_window is None or prompt + reply <= self.context_window:
            return
        with self._lock:
            self._refused.append(name)
        import httpx
        import openai

        message = (
            f"This model's maximum context length is {self.context_window} tokens. However, you requested "
            f"{prompt + reply} tokens ({prompt} in the messages, {reply} in the completion). Please reduce the length "
            "of the messages or completion."
        )
        response = httpx.Response(400, request=httpx.Request("POST", "http://scripted.invalid/v1/chat/completions"))
        raise openai.BadRequestError(
            message,
            response=response,  # type: ignore[arg-type]  # openai's stubs want httpx2's Response
            body={"message": message},
        )

    def _message(self, call: ScriptedCall, cached: int) -> AIMessage:
        reply = self._reply(call)
        call.ended = time.perf_counter()
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply)
        prompt_tokens = len(_prompt_tokens(call.messages))
        completion_tokens = _tokens(str(message.content))
        return message.model_copy(
            update={
                "usage_metadata": {
                    "input_tokens": prompt_tokens,
                    "output_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "input_token_details": {"cache_read": cached},
                },
                "response_metadata": {"finish_reason": "stop", **message.response_metadata},  # a script may cut
            }
        )

    def _result(self, call: ScriptedCall, cached: int) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._message(call, cached))])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call, cached = self._begin(messages, run_manager.tags if run_manager else [], kwargs)
        if self.latency:
            time.sleep(self.latency)
        return self._result(call, cached)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Native async, as an HTTP client is: the call waits on the event loop, not on a thread."""
        call, cached = self._begin(messages, run_manager.tags if run_manager else [], kwargs)
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._result(call, cached)

    def _chunks(self, call: ScriptedCall, cached: int) -> Iterator[ChatGenerationChunk]:
        """The reply as a stream: a chunk per word (its spacing kept), the last carrying the usage and finish."""
        message = self._message(call, cached)
        if message.tool_calls:  # a tool call comes whole, as one chunk
            calls = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(message.tool_calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=message.content,
                    tool_call_chunks=calls,
                    usage_metadata=message.usage_metadata,
                    response_metadata=message.response_metadata,
                    chunk_position="last",
                )
            )
            return
        words = re.findall(r"\s*\S+", str(message.content)) or [""]
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word,
                    usage_metadata=message.usage_metadata if last else None,
                    response_metadata=message.response_metadata if last else {},
                    chunk_position="last" if last else None,
                )
            )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """Streamed like an endpoint's server-sent events: each word reaches the callbacks as it is "written"."""
        call, cached = self._begin(messages, run_manager.tags if run_manager else [], kwargs)
        for chunk in self._chunks(call, cached):
            if self.latency:
                time.sleep(self.latency / 10)
            yield chunk  # LangChain reports each chunk to the callbacks

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call, cached = self._begin(messages, run_manager.tags if run_manager else [], kwargs)
        for chunk in self._chunks(call, cached):
            if self.latency:
                await asyncio.sleep(self.latency / 10)
            yield chunk


# --- the demo script behind ``--llm fake``: plausible, deterministic replies derived from the prompt's input ---

_PASSAGE_LINE = re.compile(r"^\[(\d+)\][ \t]*(.*?)[ \t]*\|[ \t]*(.+)$", re.MULTILINE)
_FACT = re.compile(r"\b(?:1[5-9]|20)\d\d\b|\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")


def _subject(title: str, text: str) -> str:
    """What a passage is about: its title, else (an untitled passage) the first fact or opening words of its text."""
    if title:
        return title
    text = text.strip("«» ")
    fact = _FACT.search(text)
    return fact.group(0) if fact else " ".join(text.split()[:4]).rstrip(".,;:")


def _question(call: ScriptedCall) -> str:
    asked = re.findall(r"^Question:\s*(.+)$", call.user, re.MULTILINE)  # the last: instructions may show examples
    return asked[-1].strip() if asked else "the question"


def _retrieved(call: ScriptedCall) -> str:
    """The call's own passages: after the last passages heading of the conversation (not the worked examples'
    evidence; a call may continue an earlier one that read them), else the per-call part."""
    conversation = "\n".join(str(m.content) for m in call.messages)
    _, heading, passages = conversation.rpartition(PASSAGES_HEADING)
    return passages if heading else call.user


def _demo_extract(call: ScriptedCall) -> str:
    question = _question(call).rstrip("?")
    lines, seen = [], set()
    for _, title, text in _PASSAGE_LINE.findall(_retrieved(call)):
        title = _subject(title, text)
        fact = next((f for f in _FACT.findall(text) if f != title), None)
        if title in seen or not fact:
            continue
        seen.add(title)
        n = len(seen)
        lines += [f"DQ {n}: {question}, in the sense of {title}?", f"DA {n}: {fact}"]
        if n == 3:
            break
    return "\n".join(lines) or "DQ 1: " + question + "?\nDA 1: unknown"


def _demo_generate(call: ScriptedCall) -> str:
    pairs = re.findall(r"DQ \d+: (.+)\nDA \d+: (.+)", call.user)
    body = " ".join(f"For “{q}” the answer is {a}." for q, a in pairs)
    return f"Answer: “{_question(call)}” can be read in {len(pairs)} ways. {body}"


def _demo_revise(call: ScriptedCall) -> str:
    conversation = "\n".join(str(m.content) for m in call.messages[:-1])
    pairs = re.findall(r"DQ \d+: (.+)\nDA \d+: (.+)", conversation)
    return "Answer: " + " ".join(f"For “{q}” the answer is {a}." for q, a in pairs)


def _demo_closed_book(call: ScriptedCall) -> str:
    return f"Final Answer: “{_question(call)}” can mean several things; without documents this answer stays general."


_AMBIGUITY_BY_WORD = {
    "when": ("AmbTime", "the question names no date, and the answer may differ between events or years"),
    "where": ("AmbLoc", "the place meant is unclear"),
    "who": ("AmbSub", "the person or group asked about could be one of several"),
}


def _demo_type_ambiguity(call: ScriptedCall) -> str:
    question = _question(call)
    kind, why = _AMBIGUITY_BY_WORD.get(
        question.split()[0].lower(), ("AmbObj", "what is asked about could be one of several things")
    )
    return f"##Reason: In “{question}”, {why}.\n##Answer: [{kind}]"


def _demo_interpret(call: ScriptedCall) -> str:
    question = _question(call).rstrip("?")
    return f"1: {question}, in its best-known sense?\n2: {question}, in its other senses?"


def _demo_verify(call: ScriptedCall) -> str:
    words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", _question(call))}
    passages = " ".join(text for _, _, text in _PASSAGE_LINE.findall(_retrieved(call))).lower()
    return "Yes" if any(w in passages for w in words) else "No"


def _demo_toc_verify(call: ScriptedCall) -> str:
    context = re.search(r"Context:\s*(.+?)\n\s*\nQuestion:", call.user, re.DOTALL)
    answer = re.search(r"^Proposed Answer:\s*(.+)$", call.user, re.MULTILINE)
    found = context is not None and answer is not None and answer.group(1).strip().lower() in context.group(1).lower()
    return "True" if found else "False"


def _demo_decompose(call: ScriptedCall) -> str:
    question = re.search(r"^Question:\s*(.+)$", call.user, re.MULTILINE)
    asked = call.user.count("Follow up:")
    if asked >= 2:
        return "So the final answer is: " + (re.findall(r"Intermediate answer: (.+)", call.user) or ["unknown"])[-1]
    subject = question.group(1).rstrip("?") if question else "the question"
    return f"Follow up: {'What is' if asked else 'Who or what is'} the main subject of: {subject}?"


def _demo_short_answer(call: ScriptedCall) -> str:
    match = _PASSAGE_LINE.search(call.user)
    return f"Answer: {_subject(match.group(2), match.group(3)) if match else 'unknown'}"


def _demo_reasoned_answer(call: ScriptedCall) -> str:
    match = _PASSAGE_LINE.search(call.user)
    if not match:
        return "Reasoning: no passage says.\nSo the answer is: unknown"
    subject = _subject(match.group(2), match.group(3))
    return f"Reasoning: passage [{match.group(1)}] is about {subject}.\nSo the answer is: {subject}"


def _demo_relax(call: ScriptedCall) -> str:
    return " ".join(
        w
        for w in _question(call).rstrip("?").split()
        if w.lower() not in {"who", "what", "when", "where", "which", "how", "is", "was", "did", "does", "the"}
    )


def _demo_execute(call: ScriptedCall) -> str:
    match = re.search(r"^Passage:\s*(.+?)\s*\|\s*(.+)$", call.user, re.MULTILINE)
    fact = _FACT.search(match.group(2)) if match else None
    if not match or not fact:
        return "null"
    return f"Interpretation: {_question(call).rstrip('?')}, in the sense of {match.group(1)}?\nAnswer: {fact.group(0)}"


def _demo_verdict_answer(call: ScriptedCall) -> str:
    pairs = re.findall(r"DQ \d+: (.+)\nDA \d+: (.+)", call.user)
    body = " ".join(f"For “{q}” the answer is {a}." for q, a in pairs)
    return f"Answer: “{_question(call)}” can be read in {len(pairs)} ways, each grounded in a passage. {body}"


def _demo_madam_agent(call: ScriptedCall) -> str:
    document = re.split(r"document:", call.user, maxsplit=1, flags=re.IGNORECASE)[-1].split("The other agents'")[0]
    fact = _FACT.search(document)
    if not fact:
        return "Answer: unknown. Explanation: The document does not say."
    return f"Answer: {fact.group(0)}. Explanation: The document states {fact.group(0)}."


def _demo_madam_aggregate(call: ScriptedCall) -> str:
    answers = re.findall(r"^Agent \d+: Answer: (.+?)\. Explanation", call.user, re.MULTILINE)
    kept = [a for a in dict.fromkeys(answers) if a != "unknown"]
    return f"All Correct Answers: {json.dumps(kept)}. Explanation: Each answer is stated by an agent's document."


def _demo_match(call: ScriptedCall) -> str:
    reference = call.user.split("Reference disambiguations:", 1)[-1]
    return "\n".join(f"{n}: Yes" for n in re.findall(r"^(\d+)\.", reference, re.MULTILINE))


def _demo_dedup(call: ScriptedCall) -> str:
    return call.user.split("Disambiguated questions:", 1)[-1].split("Distinct questions:", 1)[0].strip()


DEMO_SCRIPT: dict[str, Reply] = {
    "rag_extract": _demo_extract,
    "rag_extract_examples": _demo_extract,
    "rag_extract_short": _demo_extract,
    "rag_generate": _demo_generate,
    "answer_revise": _demo_revise,
    "closed_book": _demo_closed_book,
    "type_ambiguity": _demo_type_ambiguity,
    "interpret": _demo_interpret,
    "verify": _demo_verify,
    "toc_verify": _demo_toc_verify,
    "sunar_decompose": _demo_decompose,
    "sunar_answer_sub": _demo_reasoned_answer,
    "rag_short": _demo_reasoned_answer,
    "sunar_answer_sub_short": _demo_short_answer,
    "sunar_meta_reason": _demo_reasoned_answer,
    "sunar_meta_reason_short": _demo_short_answer,
    "sunar_entails": "Yes",
    "verdict_relax": _demo_relax,
    "verdict_execute": _demo_execute,
    "verdict_answer": _demo_verdict_answer,
    "verdict_answer_disambiguations": _demo_verdict_answer,
    "madam_agent": _demo_madam_agent,
    "madam_debate": _demo_madam_agent,
    "madam_aggregate": _demo_madam_aggregate,
    "madam_agent_official": _demo_madam_agent,
    "madam_debate_official": _demo_madam_agent,
    "madam_aggregate_official": _demo_madam_aggregate,
    "eval_verify": "Yes",
    "eval_match": _demo_match,
    "eval_dedup": _demo_dedup,
}


def demo_model(latency: float = 0.0) -> ScriptedChatModel:
    return ScriptedChatModel(script=dict(DEMO_SCRIPT), default="Yes.", latency=latency)
