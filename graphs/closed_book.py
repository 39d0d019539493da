"""Closed-book baseline: one LLM call answers from parametric knowledge (DIVA prompt I_l)."""

from __future__ import annotations

from typing import Any

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import field_validator

from agent.chat import REPLY, add_chat_io
from agent.context import RunContext, context_of
from agent.errors import ConfigError
from agent.nodes import llm_node
from agent.state import AnswerOutput, AnswerState, QuestionInput
from agent.steps.rac import closed_book


class ClosedBookContext(RunContext):
    @field_validator("passages", mode="before")
    @classmethod
    def _reads_none(cls, value: Any) -> None:
        if value is not None:
            raise ConfigError("closed_book answers from the model alone and reads no passages: pick another method")


async def answer(state: AnswerState, runtime: Runtime[ClosedBookContext]) -> dict:
    ctx = context_of(runtime, ClosedBookContext)
    book = await ctx.acasebook(state["question"], "answers")  # one call: no prefix to share, the short examples suffice
    reply = await closed_book(state["question"], ctx.llm_options(), book)
    return {"answer": reply.value, "disambiguations": [], "passages": []}


builder = StateGraph(
    AnswerState, input_schema=QuestionInput, output_schema=AnswerOutput, context_schema=ClosedBookContext
)
builder.add_node("answer", llm_node(answer))
add_chat_io(builder, "answer")
builder.add_edge("answer", REPLY)
graph = builder.compile(name="closed_book")
