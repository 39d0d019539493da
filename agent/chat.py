"""Chat messages in and out of every graph, for LangGraph's chat front ends (Studio's chat view, agent-chat-ui).

A run's question is its last chat message when that is a human one (a new turn), else its ``question``; either way it
is checked as every surface checks it (``agent.questions``), and a question given as text joins ``messages`` as the
human turn. The answer comes back as one AI message: the answer, then each interpretation with its answer, then the
passages it read. Every graph wires these two nodes around its own: ``take_question`` first, ``reply`` last.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from agent.questions import validate_question
from agent.schemas import Disambiguation, Passage

REPLY = "reply"
CHAT_NODES = frozenset({"take_question", REPLY})  # plumbing, not steps of a method: progress displays skip them


class ChatMessages(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def message_text(message: AnyMessage) -> str:
    """A message's text; content blocks (a list) give their text parts."""
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if isinstance(part, dict))


def take_question(state: dict[str, Any]) -> dict[str, Any]:
    """The run's question, checked (an ``InvalidQuestionError`` says what is wrong with it)."""
    messages = state.get("messages") or []
    if messages and messages[-1].type == "human":
        return {"question": validate_question(message_text(messages[-1]))}
    question = validate_question(state.get("question"))
    return {"question": question, "messages": [HumanMessage(question)]}


def reply_text(answer: str, disambiguations: list[Disambiguation], passages: list[Passage]) -> str:
    """The answer as a chat reply: the answer, the interpretations it covers, the passages it read."""
    parts = [answer.strip() or "(no answer)"]
    if len(disambiguations) > 1:
        parts.append(
            "Interpretations:\n" + "\n".join(f"{n}. {d.question} {d.answer}" for n, d in enumerate(disambiguations, 1))
        )
    if passages:
        parts.append("Sources:\n" + "\n".join(f"[{p.id}] {p.title}".rstrip() for p in passages))
    return "\n\n".join(parts)


def reply(state: dict[str, Any]) -> dict[str, Any]:
    """The answer as the run's AI message (its interpretations and passage ids also in ``additional_kwargs``)."""
    disambiguations = state.get("disambiguations") or []
    passages = state.get("passages") or []
    details = {
        "disambiguations": [d.model_dump(mode="json") for d in disambiguations],
        "passage_ids": [p.id for p in passages],
    }
    text = reply_text(state.get("answer", ""), disambiguations, passages)
    return {"messages": [AIMessage(text, additional_kwargs={"ambigqa": details})]}


def add_chat_io(builder: StateGraph[Any, Any, Any, Any], first: str) -> None:
    """Start ``builder``'s graph with ``take_question`` before ``first``, and end it with ``reply`` (its last nodes
    lead to ``REPLY``)."""
    # the two read any method's state as a plain dict: a schema here would become the node's input channels
    builder.add_node("take_question", take_question)  # type: ignore[type-var]
    builder.add_node(REPLY, reply)  # type: ignore[type-var]
    builder.add_edge(START, "take_question")
    builder.add_edge("take_question", first)
    builder.add_edge(REPLY, END)
