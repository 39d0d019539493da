"""Router (ours, beyond the papers): DIVA's ambiguity typing sends clear questions to vanilla RAG and ambiguous ones
to the configured method; in clarify mode a person picks the interpretations to answer (LangGraph ``interrupt``).

type_ambiguity → N/A: rag │ ambiguous: the configured method (closed_book, rag, diva, toc, verdict or sunar), each a
                          │ subgraph node that Studio draws
                          │ ambiguous + clarify: interpret → clarify (interrupt) → answer_reading (rag, one task per
                          │ choice, each a subgraph of this run) → answer_chosen (joins them)
"""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, Literal, get_args

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Send, interrupt
from pydantic import Field

from agent.chat import REPLY, add_chat_io
from agent.context import RunContext, TopK, context_of, make_context
from agent.llm.usage import merge_usage
from agent.nodes import llm_node
from agent.schemas import AmbiguityType, Disambiguation, Passage, UsageReport
from agent.state import AnswerOutput, QuestionInput, RunState
from agent.steps.ambiguity import classify_ambiguity, infer_interpretations
from graphs import closed_book, diva, rag, sunar, toc, verdict

Method = Literal["closed_book", "rag", "diva", "toc", "verdict", "sunar"]
METHOD_GRAPHS = {
    "closed_book": closed_book.graph,
    "rag": rag.graph,
    "diva": diva.build(diva.TypedQuestionInput),  # takes the router's typing: I_a is not asked twice
    "toc": toc.graph,
    "verdict": verdict.graph,
    "sunar": sunar.graph,
}
CONTRACT = ("answer", "disambiguations", "passages", "retrieved", "usage")


class RouterContext(TopK, RunContext):
    ambiguous_method: Method = Field(default="diva", description="the method that answers ambiguous questions")
    clarify: bool = Field(
        default=False, description="ask a person which interpretations to answer (needs a checkpointer)"
    )
    max_interpretations: int = Field(
        default=8, ge=1, le=20, description="cap on the interpretations offered in clarify mode"
    )


class RouterOutput(AnswerOutput, total=False):
    ambiguity_types: list[AmbiguityType]
    ambiguity_reason: str
    route: str
    interpretations: list[str]
    chosen: list[str]


class RouterState(QuestionInput, RouterOutput, RunState, total=False):
    readings_answered: Annotated[list[dict[str, Any]], operator.add]  # answer_reading's results, for answer_chosen


async def type_ambiguity(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    ctx = context_of(runtime, RouterContext)
    reply = await classify_ambiguity(
        state["question"], ctx.llm_options(), await ctx.acasebook(state["question"], "ambiguity")
    )
    return {"ambiguity_types": reply.value.types, "ambiguity_reason": reply.value.reason}


def delegate(method: Method) -> Any:
    """The node that answers with ``method``'s graph, run as a subgraph of this run (its nodes stream with ours)."""
    subgraph = METHOD_GRAPHS[method]

    def inputs(state: RouterState) -> dict[str, Any]:
        typing: dict[str, Any] = {k: state[k] for k in ("ambiguity_types", "ambiguity_reason") if k in state}
        return {"question": state["question"], **typing}

    def context() -> Any:
        return make_context(subgraph.context_schema, context_of(get_runtime(), RouterContext))

    def answered(result: dict[str, Any]) -> dict[str, Any]:
        return {**{k: result[k] for k in CONTRACT if k in result}, "route": method}

    async def answer(state: RouterState) -> dict[str, Any]:
        return answered(await subgraph.ainvoke(inputs(state), context=context()))

    answer.__name__ = method
    return answer


async def interpret(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    ctx = context_of(runtime, RouterContext)
    book = await ctx.acasebook(state["question"], "ambiguity")
    reply = await infer_interpretations(state["question"], state.get("ambiguity_reason", ""), ctx.llm_options(), book)
    return {
        "interpretations": reply.value[: ctx.max_interpretations] or [state["question"]],
    }


def clarify(state: RouterState) -> dict:
    """Pause for a person with the interpretations (also in the human-interrupt shape chat front ends render); the
    resume value picks them (``picked``); none picked: all."""
    options = state["interpretations"]
    listed = "\n".join(f"{n}. {option}" for n, option in enumerate(options, 1))
    picked = interrupt(
        {
            "question": state["question"],
            "interpretations": options,
            "action_request": {"action": "choose_interpretations", "args": {"interpretations": options}},
            "config": {"allow_respond": True, "allow_accept": True, "allow_edit": True, "allow_ignore": False},
            "description": f"Which readings should be answered? Reply with their numbers, e.g. 1,3; accept: all.\n{listed}",
        }
    )
    return {"chosen": chosen(picked, options) or options, "route": "clarify"}


def chosen(picked: Any, options: list[str]) -> list[str]:
    """The interpretations a resume value picks: a list of numbers (1-based) or texts, or a chat front end's human
    response (``accept``: all; ``response``: numbers or a reading in words; ``edit``: the edited list)."""
    if isinstance(picked, list) and picked and isinstance(picked[0], dict):
        picked = picked[0]  # agent-chat-ui resumes with a list of one response
    if isinstance(picked, dict):
        kind, args = picked.get("type"), picked.get("args")
        if kind == "response" and isinstance(args, str):
            only_numbers = re.fullmatch(r"\s*\d+(?:\s*(?:,|;|and|\s)\s*\d+)*\s*", args)
            picked = [int(n) for n in re.findall(r"\d+", args)] if only_numbers else [args]
        elif kind == "edit" and isinstance(args, dict):
            picked = (args.get("args") or {}).get("interpretations") or []
        else:
            picked = []
    found = []
    for item in picked if isinstance(picked, list) else []:
        if isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= len(options):
            found.append(options[item - 1])
        elif isinstance(item, str) and item.strip():
            found.append(item.strip())
    return found


def chosen_readings(state: RouterState) -> list[Send]:
    """One ``answer_reading`` task per chosen interpretation, run side by side."""
    return [Send("answer_reading", {"question": question}) for question in state["chosen"]]


def answer_reading() -> Any:
    """The node that answers one chosen interpretation with rag, run as a subgraph of this run (each task has its own
    checkpoint namespace, so its nodes, tokens and traces reach the caller)."""
    rag = METHOD_GRAPHS["rag"]

    def context() -> Any:
        return make_context(rag.context_schema, context_of(get_runtime(), RouterContext))

    def answered(question: str, result: dict[str, Any]) -> dict[str, Any]:
        return {"readings_answered": [{"reading": question, **{k: result[k] for k in CONTRACT if k in result}}]}

    async def answer_reading(task: dict[str, Any]) -> dict[str, Any]:
        return answered(task["question"], await rag.ainvoke({"question": task["question"]}, context=context()))

    return answer_reading


def answer_chosen(state: RouterState) -> dict:
    """Join the chosen interpretations' answers, in the order they were chosen."""
    by_reading = {r["reading"]: r for r in state.get("readings_answered", [])}  # a resume that failed left none
    results = [by_reading[q] for q in state["chosen"] if q in by_reading]
    usage = UsageReport()
    passages: dict[str, Passage] = {}
    retrieved: dict[str, Passage] = {}
    disambiguations: list[Disambiguation] = []
    for result in results:
        usage = merge_usage(usage, result.get("usage"))
        passages.update({p.id: p for p in result.get("passages", [])})
        retrieved.update({p.id: p for p in result.get("retrieved", [])})
        disambiguations += result.get("disambiguations", [])
    if len(results) == 1:
        answer = results[0]["answer"]
    else:
        answer = "\n\n".join(f"{r['reading']} {r['answer']}" for r in results)
    return {
        "answer": answer,
        "disambiguations": disambiguations,
        "passages": list(passages.values()),
        "retrieved": list(retrieved.values()),
        "usage": usage,
    }


def route(state: RouterState, runtime: Runtime[RouterContext]) -> Literal[Method, "interpret"]:
    if state.get("ambiguity_types") in (None, [], ["N/A"]):
        return "rag"
    ctx = context_of(runtime, RouterContext)
    return "interpret" if ctx.clarify else ctx.ambiguous_method


def build(checkpointer: BaseCheckpointSaver | None = None) -> Any:
    """Compile the router; clarify mode needs a checkpointer (``agent.clarify`` passes ``agent.threads``' one)."""
    builder = StateGraph(
        RouterState, input_schema=QuestionInput, output_schema=RouterOutput, context_schema=RouterContext
    )
    builder.add_node("type_ambiguity", llm_node(type_ambiguity))
    for method in get_args(Method):
        builder.add_node(method, delegate(method))
        builder.add_edge(method, REPLY)
    builder.add_node("interpret", llm_node(interpret))
    builder.add_node("clarify", clarify)
    builder.add_node("answer_reading", answer_reading())
    builder.add_node("answer_chosen", answer_chosen)
    add_chat_io(builder, "type_ambiguity")
    builder.add_conditional_edges("type_ambiguity", route)
    builder.add_edge("interpret", "clarify")
    builder.add_conditional_edges("clarify", chosen_readings, ["answer_reading"])
    builder.add_edge("answer_reading", "answer_chosen")
    builder.add_edge("answer_chosen", REPLY)
    return builder.compile(name="router", checkpointer=checkpointer)


graph = build()
