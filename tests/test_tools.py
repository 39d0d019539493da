"""A method as a tool inside a larger ReAct agent whose own LLM is scripted."""

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent

from agent.llm.scripted import ScriptedChatModel
from agent.registry import METHODS
from agent.surfaces.tools import all_tools, as_tool
from agent.text import without_citations

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
            "minLength": 1,
            "maxLength": 2000,
        }
    }
    assert [t.name for t in all_tools()] == [f"ask_{m}" for m in METHODS]


def test_a_react_agent_calls_the_method_tool_and_gets_answer_and_artifact(collection, scripted):
    method_llm, _ = scripted(
        {
            "type_ambiguity": "##Reason: the premiere and the US release differ. ##Answer: [AmbLoc]",
            "interpret": "1: When was the film's world premiere?\n2: When was the film released in the US?",
            "verify": "Yes",
            "rag_extract_short": "DQ 1: When was the world premiere?\nDA 1: 4 November 2001",
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
    assert without_citations(tool_messages[0].content) == "It premiered on 4 November 2001."
    assert tool_messages[0].artifact["disambiguations"][0]["passage_ids"] == ["hp-premiere"]
    assert state["messages"][-1].content == "The film premiered on 4 November 2001."


def _agent_calling(tool, question):
    return ScriptedChatModel(
        default=[
            AIMessage(content="", tool_calls=[{"name": tool.name, "args": {"question": question}, "id": "call-1"}]),
            AIMessage(content="Sorry, I could not answer that."),
        ]
    )


def test_a_bad_question_comes_back_to_the_calling_model_as_a_tool_message(collection):
    tool = as_tool("rag", llm="fake", collection=collection)
    for question in ("", "   "):
        react = create_react_agent(_agent_calling(tool, question), [tool])
        state = react.invoke({"messages": [("user", "?")]})  # the agent loop goes on: no exception
        message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        assert message.status == "error" and "question" in message.content
        assert state["messages"][-1].content == "Sorry, I could not answer that."


def test_the_methods_run_nests_under_the_callers_trace(collection, scripted):
    from langchain_core.tracers.base import BaseTracer

    class Collect(BaseTracer):
        def __init__(self):
            super().__init__()
            self.runs = []

        def _persist_run(self, run):
            pass

        def _start_trace(self, run):
            super()._start_trace(run)
            self.runs.append(run)

    name, _ = scripted({"rag_extract": "DQ 1: When?\nDA 1: 2001", "rag_generate": "Answer: It came out in 2001."})
    tool = as_tool("rag", llm=name, collection=collection)
    tracer = Collect()
    tool.invoke({"question": QUESTION}, config={"callbacks": [tracer]})
    tool_run = next(r for r in tracer.runs if r.name == tool.name)
    graph_runs = [r for r in tracer.runs if r.name == "rag"]
    assert graph_runs and graph_runs[0].parent_run_id == tool_run.id  # one trace, not a separate root
    by_id = {r.id: r for r in tracer.runs}
    llm_run = next(r for r in tracer.runs if r.run_type == "llm" and r.name == "rag_generate")
    ancestors = []
    while llm_run.parent_run_id in by_id:  # the LLM node ran on the background loop, in the run's context
        llm_run = by_id[llm_run.parent_run_id]
        ancestors.append(llm_run.name)
    assert ancestors[-2:] == ["rag", tool.name]


def test_an_async_agent_awaits_the_tool_and_its_llm_calls_on_its_own_loop(collection, scripted):
    import asyncio
    import threading

    name, model = scripted({"rag_extract": "DQ 1: When?\nDA 1: 2001", "rag_generate": "Answer: It came out in 2001."})
    tool = as_tool("rag", llm=name, collection=collection)
    react = create_react_agent(_agent_calling(tool, QUESTION), [tool])
    state = asyncio.run(react.ainvoke({"messages": [("user", QUESTION)]}))
    message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert message.content == "It came out in 2001 [1][2]." and message.artifact["usage"]["calls"] == 2  # cited
    assert {c.thread for c in model.calls} == {threading.current_thread().name}


def test_unknown_options_fail_when_the_tool_is_made():
    import pytest

    from agent.errors import ConfigError

    with pytest.raises(ConfigError, match="rag has no option bogus"):
        as_tool("rag", bogus=1)
