"""Every method as a LangChain tool, so a larger agent can call it: the answer as content, the rest as artifact."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from graphs import METHODS

DESCRIPTIONS = {
    "closed_book": "Answer a question from the model's own knowledge, covering its possible readings.",
    "rag": "Answer a possibly ambiguous question from retrieved passages, listing each reading with its answer.",
    "diva": "Answer an ambiguous question with DIVA: infer its interpretations, retrieve and verify passages, answer all.",
    "toc": "Answer an ambiguous question with Tree of Clarifications: explore its readings as a tree, then answer all.",
    "verdict": "Answer an ambiguous question with VerDICt: one interpretation per verified passage, consolidated.",
    "sunar": "Answer a complex multi-hop question by decomposing it and retrieving evidence hop by hop.",
    "router": "Answer a question, routing clear ones to simple RAG and ambiguous ones to a disambiguation method.",
}


class QuestionArgs(BaseModel):
    question: str = Field(description="the question to answer, as the user asked it")


def as_tool(method: str, llm: str | BaseChatModel | None = None, collection: str | None = None, **options: Any) -> StructuredTool:
    """A tool named ``ask_<method>``: content is the long-form answer, artifact the disambiguations and passages."""
    from agent.runner import load_graph, run

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
        description=DESCRIPTIONS.get(method, f"Answer a question with the {method} method."),
        args_schema=QuestionArgs,
        response_format="content_and_artifact",
    )


def all_tools(llm: str | BaseChatModel | None = None, collection: str | None = None) -> list[StructuredTool]:
    return [as_tool(method, llm, collection) for method in METHODS]
