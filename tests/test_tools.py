"""A method as a tool inside a larger ReAct agent whose own LLM is scripted."""

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent

from agent.llm.scripted import ScriptedChatModel
from agent.registry import METHODS
from agent.surfaces.tools import all_tools, as_tool

METHOD = "diva"  # the method whose tool the agent calls
QUESTION = "When did the Harry Potter film come out?"


def test_tool_schema_and_name():
    tool = as_tool(METHOD)
    assert tool.name == f"ask_{METHOD}"
    assert tool.args == {
        "question": {
            "description": "the question to answer, as the user asked it",
            "title": "Question",
            "type": "string",
        }
    }
    assert [t.name for t in all_tools()] == [f"ask_{m}" for m in METHODS]


def test_a_react_agent_calls_the_method_tool_and_gets_answer_and_artifact(collection, scripted):
    method_llm, _ = scripted(
        {
            "type_ambiguity": "##Reason: the premiere and the US release differ. ##Answer: [AmbLoc]",
            "interpret": "1: When was the film's world premiere?\n2: When was the film released in the US?",
            "verify": "Yes",
            "rag_extract": "DQ 1: When was the world premiere?\nDA 1: 4 November 2001",
            "rag_generate": "Answer: It premiered on 4 November 2001.",
        }
    )
    tool = as_tool(METHOD, llm=method_llm, collection=collection)
    agent_llm = ScriptedChatModel(
        default=[
            AIMessage(content="", tool_calls=[{"name": tool.name, "args": {"question": QUESTION}, "id": "call-1"}]),
            AIMessage(content="The film premiered on 4 November 2001."),
        ]
    )
    react = create_react_agent(agent_llm, [tool])
    state = react.invoke({"messages": [("user", QUESTION)]})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    assert tool_messages[0].content == "It premiered on 4 November 2001."
    assert tool_messages[0].artifact["disambiguations"][0]["passage_ids"] == ["hp-premiere"]
    assert state["messages"][-1].content == "The film premiered on 4 November 2001."
