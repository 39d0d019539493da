"""Every method as a LangChain tool, so a larger agent can call it: the answer as content, the rest as artifact."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from agent.registry import DESCRIPTIONS, METHODS, load_graph


class QuestionArgs(BaseModel):
    question: str = Field(description="the question to answer, as the user asked it")


def as_tool(
    method: str, llm: str | BaseChatModel | None = None, collection: str | None = None, **options: Any
) -> StructuredTool:
    """A tool named ``ask_<method>``: content is the long-form answer, artifact the disambiguations and passages."""
    from agent.runner import run

    load_graph(method)  # unknown methods fail here, not inside an agent loop

    def answer(question: str) -> tuple[str, dict[str, Any]]:
        result = run(question, method=method, llm=llm, collection=collection, **options)
        artifact = {
            "disambiguations": [d.model_dump() for d in result.disambiguations],
            "passage_ids": [p.id for p in result.passages],
            "usage": result.usage.total.model_dump(),
        }
        return result.answer, artifact

    return StructuredTool.from_function(
        func=answer,
        name=f"ask_{method}",
        description=DESCRIPTIONS[method],
        args_schema=QuestionArgs,
        response_format="content_and_artifact",
    )


def all_tools(llm: str | BaseChatModel | None = None, collection: str | None = None) -> list[StructuredTool]:
    return [as_tool(method, llm, collection) for method in METHODS]
