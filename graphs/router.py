"""Router (ours, beyond the papers): DIVA's ambiguity typing sends clear questions to vanilla RAG and ambiguous ones
to the configured method; in clarify mode a person picks the interpretations to answer (LangGraph ``interrupt``).

type_ambiguity → N/A: rag │ ambiguous: disambiguate (the configured method, run as a subgraph)
                          │ ambiguous + clarify: interpret → clarify (interrupt) → answer_chosen (rag per choice)
"""

from __future__ import annotations

import contextvars
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import Field

from agent.steps.ambiguity import classify_ambiguity, demos_for, infer_interpretations
from agent.context import RunContext, context_of
from agent.steps.fewshot import Selection
from agent.llm.calls import run_concurrently, usage_update
from agent.schemas import AmbiguityType, Disambiguation, Passage, UsageReport
from agent.state import AnswerOutput, QuestionInput
from agent.llm.usage import merge_usage

Method = Literal["diva", "rag", "closed_book"]


class RouterContext(RunContext):
    ambiguous_method: Method = Field(default="diva", description="the method that answers ambiguous questions")
    clarify: bool = Field(default=False, description="ask a person which interpretations to answer (needs a checkpointer)")
    top_k: int = Field(default=5, ge=1, le=50, description="passages per question for the rag route")
    fewshot: int = Field(default=5, ge=0, le=15, description="demonstrations in the typing and interpretation prompts")
    demo_selection: Selection = "nearest"


class RouterOutput(AnswerOutput, total=False):
    ambiguity_types: list[AmbiguityType]
    ambiguity_reason: str
    route: str
    interpretations: list[str]
    chosen: list[str]


class RouterState(QuestionInput, RouterOutput, total=False):
    pass


def type_ambiguity(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    ctx = context_of(runtime, RouterContext)
    demos = demos_for(state["question"], ctx.fewshot, ctx.demo_selection)
    reply = classify_ambiguity(state["question"], demos, ctx.llm_options())
    return {"ambiguity_types": reply.value.types, "ambiguity_reason": reply.value.reason, "usage": usage_update(reply)}


def _answer_with(method: str, question: str, ctx: RouterContext, detach: bool = False, **inputs: Any) -> dict[str, Any]:
    """Run a method's graph on ``question`` as a subgraph of this run (its node updates stream with ours).

    ``detach`` runs it outside this run instead: concurrent subgraphs of one node would share a checkpoint namespace.
    """
    from agent.runner import load_graph

    graph = load_graph(method)
    fields = graph.context_schema.model_fields
    context = graph.context_schema(**{k: v for k, v in ctx.model_dump().items() if k in fields})
    if detach:
        return contextvars.Context().run(graph.invoke, {"question": question, **inputs}, context=context)
    return graph.invoke({"question": question, **inputs}, context=context)


def rag(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    result = _answer_with("rag", state["question"], context_of(runtime, RouterContext))
    return {**result, "route": "rag"}


def disambiguate(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    ctx = context_of(runtime, RouterContext)
    typing = {k: state[k] for k in ("ambiguity_types", "ambiguity_reason") if ctx.ambiguous_method == "diva" and k in state}
    result = _answer_with(ctx.ambiguous_method, state["question"], ctx, **typing)  # DIVA reuses our typing
    contract = ("answer", "disambiguations", "passages", "usage")
    return {**{k: result[k] for k in contract if k in result}, "route": ctx.ambiguous_method}


def interpret(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    ctx = context_of(runtime, RouterContext)
    demos = demos_for(state["question"], ctx.fewshot, ctx.demo_selection)
    reply = infer_interpretations(state["question"], state.get("ambiguity_reason", ""), demos, ctx.llm_options())
    return {"interpretations": reply.value or [state["question"]], "usage": usage_update(reply)}


def clarify(state: RouterState) -> dict:
    """Pause for a person: the resume value is a list of interpretation numbers (1-based) or texts; empty = all."""
    options = state["interpretations"]
    picked = interrupt({"question": state["question"], "interpretations": options})
    chosen = []
    for item in picked or []:
        if isinstance(item, int) and 1 <= item <= len(options):
            chosen.append(options[item - 1])
        elif isinstance(item, str) and item.strip():
            chosen.append(item.strip())
    return {"chosen": chosen or options, "route": "clarify"}


def answer_chosen(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    """Each chosen interpretation has one reading: answer it with RAG (concurrently), then join the answers."""
    ctx = context_of(runtime, RouterContext)
    results = run_concurrently(lambda q: _answer_with("rag", q, ctx, detach=True), state["chosen"], ctx.max_concurrency)
    usage = UsageReport()
    passages: dict[str, Passage] = {}
    disambiguations: list[Disambiguation] = []
    for result in results:
        usage = merge_usage(usage, result.get("usage"))
        passages.update({p.id: p for p in result.get("passages", [])})
        disambiguations += result.get("disambiguations", [])
    if len(results) == 1:
        answer = results[0]["answer"]
    else:
        answer = "\n\n".join(f"{q} {r['answer']}" for q, r in zip(state["chosen"], results))
    return {"answer": answer, "disambiguations": disambiguations, "passages": list(passages.values()), "usage": usage}


def route(state: RouterState, runtime: Runtime[RouterContext]) -> Literal["rag", "disambiguate", "interpret"]:
    if state.get("ambiguity_types") in (None, [], ["N/A"]):
        return "rag"
    return "interpret" if context_of(runtime, RouterContext).clarify else "disambiguate"


def build(checkpointer: BaseCheckpointSaver | None = None) -> Any:
    """Compile the router; clarify mode needs a checkpointer (``ask --clarify`` passes a SQLite one)."""
    builder = StateGraph(RouterState, input_schema=QuestionInput, output_schema=RouterOutput, context_schema=RouterContext)
    builder.add_node("type_ambiguity", type_ambiguity)
    builder.add_node("rag", rag)
    builder.add_node("disambiguate", disambiguate)
    builder.add_node("interpret", interpret)
    builder.add_node("clarify", clarify)
    builder.add_node("answer_chosen", answer_chosen)
    builder.add_edge(START, "type_ambiguity")
    builder.add_conditional_edges("type_ambiguity", route)
    builder.add_edge("interpret", "clarify")
    builder.add_edge("clarify", "answer_chosen")
    builder.add_edge("rag", END)
    builder.add_edge("disambiguate", END)
    builder.add_edge("answer_chosen", END)
    return builder.compile(name="router", checkpointer=checkpointer)


graph = build()
