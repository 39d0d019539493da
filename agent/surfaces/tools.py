"""Every method as a LangChain tool, so a larger agent can call it: the answer as content, the rest as artifact.

A bad question or option comes back to the calling model as the tool's message, saying what to fix (the agent loop
goes on); the method's run nests under the caller's trace (the tool's callbacks are passed through).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import Callbacks
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from agent.errors import AgentError, InvalidQuestionError
from agent.registry import DESCRIPTIONS, METHODS, load_graph
from agent.settings import get_settings

if TYPE_CHECKING:
    from agent.schemas import RunResult


def question_args(max_chars: int) -> type[BaseModel]:
    class QuestionArgs(BaseModel):
        question: str = Field(
            min_length=1, max_length=max_chars, description="the question to answer, as the user asked it"
        )

    return QuestionArgs


def _validation_message(error: Exception) -> str:
    return (
        f"The question was not accepted ({str(error).splitlines()[-1].strip()}); ask again with a non-empty question."
    )


@contextmanager
def _tool_errors(method: str) -> Iterator[None]:
    """Errors the calling model can act on, as the tool's reply (``handle_tool_error``)."""
    try:
        yield
    except InvalidQuestionError as exc:
        raise ToolException(f"{exc}. Call the tool again with a corrected question.") from None
    except AgentError as exc:
        raise ToolException(f"ask_{method} failed: {exc}") from None


def _content(result: RunResult) -> tuple[str, dict[str, Any]]:
    """The answer for the model, the disambiguations and passages as the artifact."""
    artifact = {
        "disambiguations": [d.model_dump() for d in result.disambiguations],
        "passage_ids": [p.id for p in result.passages],
        "usage": result.usage.total.model_dump(),
    }
    return result.answer, artifact


def as_tool(
    method: str, llm: str | BaseChatModel | None = None, collection: str | None = None, **options: Any
) -> StructuredTool:
    """A tool named ``ask_<method>``: content is the long-form answer, artifact the disambiguations and passages."""
    from agent.context import make_context
    from agent.runner import arun, run

    graph = load_graph(method)  # unknown methods and options fail here, not inside an agent loop
    make_context(graph.context_schema, options, strict=True, owner=method)

    def answer(question: str, callbacks: Callbacks = None) -> tuple[str, dict[str, Any]]:
        with _tool_errors(method):
            return _content(
                run(question, method=method, llm=llm, collection=collection, callbacks=callbacks, **options)
            )

    async def aanswer(question: str, callbacks: Callbacks = None) -> tuple[str, dict[str, Any]]:
        """Under an async agent: the method's LLM calls are awaited on the agent's loop."""
        with _tool_errors(method):
            result = await arun(question, method=method, llm=llm, collection=collection, callbacks=callbacks, **options)
        return _content(result)

    return StructuredTool.from_function(
        func=answer,
        coroutine=aanswer,
        name=f"ask_{method}",
        description=DESCRIPTIONS[method],
        args_schema=question_args(get_settings().max_question_chars),
        response_format="content_and_artifact",
        handle_tool_error=True,
        handle_validation_error=_validation_message,
    )


def all_tools(llm: str | BaseChatModel | None = None, collection: str | None = None) -> list[StructuredTool]:
    return [as_tool(method, llm, collection) for method in METHODS]
