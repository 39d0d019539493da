"""LLM nodes are coroutines: awaited on the caller's event loop by ``agent.arun``, driven on one background loop by
``agent.run``; async HTTP clients are per event loop. Real Chroma, real embeddings, a real HTTP endpoint
(``chat_endpoint``, HTTP/1.1 keep-alive, in conftest)."""

import asyncio
import contextvars
import threading

import pytest

import agent
from agent.sync import run_sync
from tests.test_diva import PREMIERE, QUESTION, script

BACKGROUND = "ambigqa-async-nodes"


def test_arun_awaits_every_llm_call_on_the_callers_loop_and_fans_out_there(collection, scripted):
    name, model = scripted(script("Yes"), latency=0.2)

    async def main():
        return await asyncio.gather(*(agent.arun(QUESTION, "diva", llm=name, collection=collection) for _ in range(2)))

    results = asyncio.run(main())
    assert all(r.extra["grade"] == "Useful" and r.usage.total.calls == 7 for r in results)
    assert {c.thread for c in model.calls} == {threading.current_thread().name}  # no worker thread made a call
    verify = sorted((c for c in model.calls if c.prompt == "verify"), key=lambda c: c.started)
    assert sum(b.started < a.ended for a, b in zip(verify, verify[1:])) >= 4  # fan-out and questions overlap
    assert set(results[0].usage.by_node) == {"type_ambiguity", "interpret", "verify", "rag_extract", "rag_generate"}


def test_run_drives_the_same_nodes_on_the_background_loop(collection, scripted):
    name, model = scripted(script("Yes"), latency=0.2)
    result = agent.run(QUESTION, "diva", llm=name, collection=collection)
    assert result.extra["grade"] == "Useful" and result.usage.by_node["verify"].calls == 3
    assert {c.thread for c in model.calls} == {BACKGROUND}
    verify = [c for c in model.calls if c.prompt == "verify"]
    assert max(c.started for c in verify) < min(c.ended for c in verify)  # still concurrent


def test_the_graphs_run_under_the_async_api_and_sync_callers_go_through_the_bridge(collection, scripted):
    from agent.context import RunContext, make_context
    from graphs.rag import graph

    name, _ = scripted({"rag_extract": f"DQ 1: {PREMIERE}\nDA 1: 4 November 2001", "rag_generate": "Answer: In 2001."})
    context = make_context(graph.context_schema, {"llm": name, "collection": collection})
    assert isinstance(context, RunContext)
    awaited = asyncio.run(graph.ainvoke({"question": QUESTION}, context=context))
    bridged = run_sync(graph.ainvoke({"question": QUESTION}, context=context))
    assert bridged["answer"] == awaited["answer"] == "In 2001."
    assert [d.answer for d in bridged["disambiguations"]] == ["4 November 2001"]
    with pytest.raises(TypeError, match=r"No synchronous function provided to \"rag_extract\""):
        graph.invoke({"question": QUESTION}, context=context)  # LangGraph's own word: use the async API


def test_iterate_sync_streams_as_items_come_and_closing_it_cancels_the_stream():
    from agent.sync import iterate_sync

    request = contextvars.ContextVar("request", default="none")
    produced, cancelled = [], threading.Event()

    async def numbers():
        try:
            for n in range(100):
                produced.append(n)
                yield n, request.get(), threading.current_thread().name
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    request.set("caller")
    stream = iterate_sync(numbers())
    assert next(stream) == (0, "caller", BACKGROUND) and next(stream)[0] == 1
    stream.close()
    assert cancelled.wait(5) and len(produced) < 100

    async def fail():
        yield 1
        raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        list(iterate_sync(fail()))
    assert list(iterate_sync(numbers(), contextvars.Context()))[0][1] == "none"  # a fresh context when asked


def test_run_sync_keeps_the_callers_context_works_under_a_running_loop_and_raises_what_failed():
    request = contextvars.ContextVar("request", default="none")

    async def read():
        await asyncio.sleep(0)
        return request.get(), threading.current_thread().name

    async def fail():
        raise ValueError("bad reply")

    request.set("caller")
    assert run_sync(read()) == ("caller", BACKGROUND)

    async def notebook_cell():  # Jupyter: a loop already runs in this thread, and sync code is called from it
        return run_sync(read())

    assert asyncio.run(notebook_cell()) == ("caller", BACKGROUND)
    with pytest.raises(ValueError, match="bad reply"):
        run_sync(fail())

    async def nested():  # on the background loop, a node must await, not block its own loop
        return run_sync(read())

    with pytest.raises(RuntimeError, match="await it instead"):
        run_sync(nested())


def test_async_http_clients_belong_to_one_event_loop_each(chat_endpoint, collection, monkeypatch):
    from agent.llm.factory import get_chat_model
    from agent.settings import get_settings

    monkeypatch.setenv("AMBIGQA_OPENAI_BASE_URL", chat_endpoint[0])
    monkeypatch.setenv("AMBIGQA_OPENAI_API_KEY", "x")
    get_settings.cache_clear()
    try:

        async def answer():
            loop = asyncio.get_running_loop()
            model = get_chat_model("openai", loop=loop)
            assert model is get_chat_model("openai", loop=loop)  # one client per loop and endpoint
            result = await agent.arun(QUESTION, "closed_book", llm="openai", collection=collection)
            return model, result.answer

        first, second = asyncio.run(answer()), asyncio.run(answer())  # a closed loop's connections are not reused
        assert first[1] == second[1] == "In November 2001."
        assert first[0] is not second[0] and get_chat_model("openai") not in (first[0], second[0])
        assert agent.run(QUESTION, "closed_book", llm="openai", collection=collection).answer == "In November 2001."
    finally:
        get_settings.cache_clear()


def test_llm_node_accounts_every_call_it_makes_under_its_name_on_any_loop(scripted):
    """Usage is added where nodes are wrapped: concurrent calls, a call on a worker thread and a retried call all
    count, under the node's name, and a node that calls nothing adds no usage."""
    from langgraph.graph import END, START, StateGraph

    from agent.llm.calls import LLMOptions, aask, ask
    from agent.llm.parsing import parse_short_answer
    from agent.nodes import llm_node
    from agent.state import AnswerState

    def build(options: LLMOptions):
        async def think(state: AnswerState) -> dict:
            def one():
                return aask("closed_book", options, parse=parse_short_answer, question=state["question"])

            await asyncio.gather(one(), one())  # the first of them is retried once
            await asyncio.to_thread(ask, "closed_book", options, parse=parse_short_answer, question=state["question"])
            return {"answer": "done"}

        async def idle(state: AnswerState) -> dict:
            return {"passages": []}

        builder = StateGraph(AnswerState)
        builder.add_node("think", llm_node(think))
        builder.add_node("idle", llm_node(idle))
        builder.add_edge(START, "think")
        builder.add_edge("think", "idle")
        builder.add_edge("idle", END)
        return builder.compile()

    for drive in (asyncio.run, run_sync):
        name, model = scripted({"closed_book": ["%%%", "Answer: 2001", "Answer: 2001", "Answer: 2001"]})
        graph = build(LLMOptions(llm=name))
        result = drive(graph.ainvoke({"question": QUESTION}))
        assert len(model.calls) == 4 and set(result["usage"].by_node) == {"think"}
        assert result["usage"].by_node["think"].calls == 4 and result["usage"].total.calls == 4
