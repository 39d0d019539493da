"""Tree of Clarifications (Kim et al., EMNLP 2023): a breadth-first tree of DQ/DA pairs, then one long-form answer.

``retrieve`` fetches a candidate pool for the ambiguous question (AQ). Each BFS round sends the head of the queue to
the compiled ``expand`` subgraph (Sec. 3.2), concurrently: ``rerank`` the pool for the node's question (the
cross-encoder over the pool's closest passages, top 5, App. A.3) → ``clarify`` (RAC, Sec. 3.1: child DQ/DA pairs) →
``prune`` (near-duplicates marked by default; self-verification opt-in). A round expands as many nodes as should fill
the tree at the children per expansion seen so far, so it makes about the calls sequential BFS makes. ``grow`` adds the
children in BFS order and checks termination: ``max_nodes`` nodes (near-duplicates count, as every node the official
code adds counts; verification-pruned ones do not), 3 failed expansions in a row, or the expansion cap. When the queue
is spent (max depth reached, or every expansion failed) the root and the valid nodes are expanded again on passages
they have not read, up to ``max_restarts`` times, as the official code restarts. ``generate`` drafts the answer from up
to ``answer_pairs`` distinct pairs and 5 passages; the answer step checks it, the readings it leaves out included
(``answer_checks``: ``incomplete``).

Self-verification asks whether the child's answer could answer the *root* AQ given the best answer-containing
passage, as Sec. 3.2 and Tables 8-9 define it; the DQ itself is not shown. (The official code's verify path crashes:
``verify_with_evidence`` is called with five arguments and takes four.)
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, Field

from agent.answer_step import (
    AnswerOptions,
    AnswerStepState,
    ReviewedOutput,
    add_answer_step,
    checks_option,
    drafted,
)
from agent.chat import add_chat_io
from agent.context import context_of
from agent.llm.calls import Reply, aask, gather_concurrently
from agent.llm.parsing import parse_true_false
from agent.llm.usage import merge_usage
from agent.nodes import llm_node
from agent.retrieval.embeddings import embed
from agent.retrieval.pipeline import Reranker, rank_pool
from agent.schemas import Disambiguation, Passage, TrueFalse, UsageReport
from agent.state import QuestionInput, RunState
from agent.steps import rac
from agent.steps.checks import Check, foreign_figures
from agent.text import normalize_answer, passage_text, supporting_ids

RETRIEVED = 10  # passages reported as retrieved: one holding each answer first (BFS order), then the pool's best


class TocContext(AnswerOptions):
    pool_size: int = Field(default=100, ge=1, le=1000, description="candidate passages retrieved for the AQ (App. A.3)")
    top_k: int = Field(default=5, ge=1, le=20, description="passages reranked from the pool for each expansion (A.3)")
    max_nodes: int = Field(default=10, ge=1, le=50, description="stop at this many nodes (Sec. 5)")
    count_duplicates: bool = Field(
        default=True,
        description="near-duplicate children count toward max_nodes, as the official code counts every node it adds",
    )
    max_depth: int = Field(default=3, ge=1, le=10, description="deepest tree level; nodes there are not expanded")
    max_failures: int = Field(
        default=3, ge=1, le=10, description="stop after this many failed expansions in a row (Sec. 5)"
    )
    max_expansions: int = Field(
        default=4, ge=1, le=100, description="hard cap on expansions per question (paper and official code: 15)"
    )
    max_restarts: int = Field(
        default=0,
        ge=0,
        le=10,
        description="re-expansions of the root and valid nodes once the queue is spent (official code: 3)",
    )
    deduplicate: bool = Field(default=True, description="drop near-duplicate children (no LLM call; Table 3)")
    prune: bool = Field(default=False, description="self-verify child nodes (off: DIVA re-ran ToC without it)")
    reranker: Reranker = Field(
        default="cross-encoder", description="re-ranks the pool for each node's question (App. A.3: a cross-encoder)"
    )
    duplicate_similarity: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="a child whose answer matches a node's and whose DQ has this cosine is a duplicate",
    )
    min_nodes: int = Field(
        default=2, ge=0, le=50, description="fewer valid nodes than this undoes pruning, root side first"
    )
    answer_pairs: int = Field(default=10, ge=1, le=50, description="DQ/DA pairs in the answer prompt (App. A.3: 10)")
    answer_passages: int = Field(
        default=5, ge=1, le=20, description="passages in the answer prompt, answer-containing first"
    )
    answer_checks: list[Check] = checks_option("narrates", "states_nothing", "borrows", "incomplete")


class Clarification(Disambiguation):
    """A child DQ/DA pair as one expansion produced it."""

    pruned_by: Literal["", "verification", "duplicate"] = ""


class TreeNode(Clarification):
    id: int = Field(description="BFS order: a node's id is larger than its parent's")
    parent: int | None = None
    depth: int = 0
    pruned: bool = False
    expanded: int = Field(default=0, description="times this node was expanded")
    read_ids: list[str] = Field(default_factory=list, description="passages its expansions showed RAC")


class Expansion(BaseModel):
    node_id: int
    passage_ids: list[str]
    children: list[Clarification]


def collect(left: list[Expansion] | None, right: list[Expansion] | None) -> list[Expansion]:
    """Reducer for the round's results: expansions append, ``grow`` clears with None."""
    return [] if right is None else [*(left or []), *right]


class TocOutput(ReviewedOutput, total=False):
    tree: list[TreeNode]  # BFS order; the root holds the AQ
    stop_reason: str
    expansions: int
    restored: int  # verification-pruned nodes that undo-pruning gave back to the answer


class TocState(QuestionInput, TocOutput, AnswerStepState, RunState, total=False):
    pool: list[Passage]  # the candidate pool retrieved once for the AQ
    queue: list[int]  # ids of the nodes waiting for expansion, in BFS order
    frontier: list[int]  # the head of the queue that the next BFS round expands
    finished: Annotated[list[Expansion], collect]  # the current round's expansions, as they finish
    restarts: int
    failed_streak: int


class ExpandInput(RunState):  # the run's window cut goes in and comes back (max)
    node: TreeNode
    root_question: str
    root_pool: list[Passage]
    known: list[TreeNode]


class ExpandState(ExpandInput, total=False):
    """Only ``finished`` and ``usage`` are shared with the parent; the other keys stay in the subgraph.

    (No output schema: LangGraph streams a subgraph's updates only for its output keys, which would hide ``rerank``.)
    """

    node_passages: list[Passage]  # what RAC reads for this node
    children: list[Clarification]
    finished: list[Expansion]
    usage: Annotated[UsageReport, merge_usage]


# --- the expansion of one node (the subgraph) ---


def rerank(state: ExpandState, runtime: Runtime[TocContext]) -> dict:
    """Sec. 3.2: passages are reranked for the current node's question; a re-expansion skips what the node read."""
    ctx = context_of(runtime, TocContext)
    seen = set(state["node"].read_ids)
    pool = [p for p in state["root_pool"] if p.id not in seen]
    return {"node_passages": rank_pool(ctx.store(), state["node"].question, pool, ctx.top_k, ctx.retrieval())}


async def clarify(state: ExpandState, runtime: Runtime[TocContext]) -> dict:
    """RAC (Sec. 3.1): DQ/DA pairs for the node's question from its top passages; none when no passage is left."""
    if not state["node_passages"]:
        return {"children": [], "finished": [_expansion(state, [])]}
    ctx = context_of(runtime, TocContext)
    book = await ctx.acasebook(state["root_question"])  # one set of examples for the whole tree: a shared prefix
    reply = await rac.extract(state["node"].question, state["node_passages"], ctx.llm_options(), book)
    children = [Clarification(**pair.model_dump()) for pair in reply.value]
    return {"children": children, "finished": [_expansion(state, children)]}


async def prune(state: ExpandState, runtime: Runtime[TocContext]) -> dict:
    """Table 3: drop duplicates of nodes in the tree, then (``prune``) self-verify the rest concurrently."""
    ctx = context_of(runtime, TocContext)
    children = state["children"]
    if ctx.deduplicate:  # embeddings: on a worker thread, as everything that may block
        duplicate = await asyncio.to_thread(duplicate_flags, children, state["known"], ctx.duplicate_similarity)
        children = [c.model_copy(update={"pruned_by": "duplicate"}) if d else c for c, d in zip(children, duplicate)]
    to_verify = [c for c in children if not c.pruned_by] if ctx.prune else []
    evidence = await asyncio.to_thread(best_evidence, to_verify, state["root_pool"], ctx)
    options = ctx.llm_options()

    async def verify(pair: tuple[Clarification, Passage]) -> Reply[bool]:
        child, passage = pair
        return await aask(
            "toc_verify",
            options,
            parse=parse_true_false,
            schema=TrueFalse,
            fallback=True,  # pruning removes only what the verifier rejects
            max_tokens=24,
            passage=passage_text(passage),
            question=state["root_question"],
            answer=child.answer,
        )

    replies = await gather_concurrently(verify, list(zip(to_verify, evidence)), ctx.max_concurrency)
    rejected = {id(c) for c, r in zip(to_verify, replies) if not r.value}
    children = [c.model_copy(update={"pruned_by": "verification"}) if id(c) in rejected else c for c in children]
    return {"children": children, "finished": [_expansion(state, children)]}


def _expansion(state: ExpandState, children: list[Clarification]) -> Expansion:
    return Expansion(node_id=state["node"].id, passage_ids=[p.id for p in state["node_passages"]], children=children)


def duplicate_flags(
    candidates: Sequence[Disambiguation], known: Sequence[Disambiguation], similarity: float
) -> list[bool]:
    """Near-identical DQs: the same answer (one contains the other) and question embeddings at least this similar."""
    if not candidates:
        return []
    everyone = [*known, *candidates]
    vectors = embed([d.question for d in everyone])
    kept, flags = list(range(len(known))), []
    for i in range(len(known), len(everyone)):
        flag = any(
            _same_answer(everyone[i].answer, everyone[j].answer) and float(vectors[i] @ vectors[j]) >= similarity
            for j in kept
        )
        flags.append(flag)
        if not flag:
            kept.append(i)
    return flags


def _same_answer(a: str, b: str) -> bool:
    a, b = f" {normalize_answer(a)} ", f" {normalize_answer(b)} "
    return bool(a.strip() and b.strip()) and (a in b or b in a)


def best_evidence(children: Sequence[Disambiguation], pool: list[Passage], ctx: TocContext) -> list[Passage]:
    """App. A.3: the pool passage most similar to each DQ among those containing its answer (any, if none does)."""
    if not children:
        return []
    store = ctx.store()
    scores = store.embed([c.question for c in children]) @ store.embeddings(pool).T
    evidence = []
    for child, row in zip(children, scores):
        holders = set(supporting_ids(child.answer, pool))
        mask = np.array([p.id in holders for p in pool]) if holders else np.ones(len(pool), dtype=bool)
        evidence.append(pool[int(np.argmax(np.where(mask, row, -np.inf)))])
    return evidence


def after_clarify(state: ExpandState, runtime: Runtime[TocContext]) -> Literal["prune", "__end__"]:
    ctx = context_of(runtime, TocContext)
    return "prune" if (ctx.deduplicate or ctx.prune) and state["children"] else "__end__"  # END


expand_builder = StateGraph(ExpandState, input_schema=ExpandInput, context_schema=TocContext)
expand_builder.add_node("rerank", rerank)
expand_builder.add_node("clarify", llm_node(clarify))
expand_builder.add_node("prune", llm_node(prune))
expand_builder.add_edge(START, "rerank")
expand_builder.add_edge("rerank", "clarify")
expand_builder.add_conditional_edges("clarify", after_clarify, ["prune", END])
expand_builder.add_edge("prune", END)
expand_graph = expand_builder.compile(name="toc_expand")


# --- the tree (the parent graph) ---


def retrieve(state: TocState, runtime: Runtime[TocContext]) -> dict:
    """Sec. 3.1: one candidate pool for the AQ; the root node holds the AQ."""
    ctx = context_of(runtime, TocContext)
    root = TreeNode(id=0, question=state["question"], answer="")
    pool = ctx.pool(state["question"], ctx.pool_size, ctx.first_stage)
    return {
        "pool": pool,
        "tree": [root],
        "queue": [0],
        "frontier": [0],
        "expansions": 0,
        "restarts": 0,
        "failed_streak": 0,
        "stop_reason": "",
    }


def grow(state: TocState, runtime: Runtime[TocContext]) -> dict:
    """Add the round's children in BFS order, stopping where sequential BFS would; choose the next frontier."""
    ctx = context_of(runtime, TocContext)
    tree = list(state["tree"])
    results = {e.node_id: e for e in state["finished"]}
    frontier = state["frontier"]
    duplicates = _duplicates_across(results, frontier, ctx.duplicate_similarity) if ctx.deduplicate else set()
    streak, stop, added = state.get("failed_streak", 0), "", []
    for node_id in frontier:
        result, parent = results[node_id], tree[node_id]
        tree[node_id] = parent.model_copy(
            update={"expanded": parent.expanded + 1, "read_ids": [*parent.read_ids, *result.passage_ids]}
        )
        if stop:  # ran concurrently, but sequential BFS would have stopped before this expansion
            continue
        children = []
        for i, child in enumerate(result.children):
            pruned_by = "duplicate" if (node_id, i) in duplicates else child.pruned_by
            fields = {**child.model_dump(), "pruned_by": pruned_by, "pruned": bool(pruned_by)}
            children.append(TreeNode(**fields, id=len(tree) + i, parent=node_id, depth=parent.depth + 1))
        tree += children
        valid = [c for c in children if not c.pruned]
        added += valid
        streak = 0 if valid else streak + 1
        if counted(tree, ctx) >= ctx.max_nodes:
            stop = f"{ctx.max_nodes} nodes"
        elif streak >= ctx.max_failures:
            stop = f"{ctx.max_failures} failed expansions in a row"
    count = state.get("expansions", 0) + len(frontier)
    restarts = state.get("restarts", 0)
    queue = [i for i in state["queue"] if i not in results] + [n.id for n in added if n.depth < ctx.max_depth]
    if not stop and not queue:  # max depth reached or every expansion failed: restart from the root (official code)
        restarts += 1
        if restarts > ctx.max_restarts:
            stop = f"{ctx.max_restarts} restarts"
        queue = [n.id for n in tree if not n.pruned and n.depth < ctx.max_depth]  # re-read on unread passages
    if not stop and count >= ctx.max_expansions:
        stop = f"{ctx.max_expansions} expansions"
    batch = min(round_size(tree, count, ctx), ctx.max_expansions - count)
    return {
        "tree": tree,
        "queue": [] if stop else queue,
        "frontier": [] if stop else queue[:batch],
        "finished": None,
        "expansions": count,
        "restarts": restarts,
        "failed_streak": streak,
        "stop_reason": stop,
    }


def counted(tree: list[TreeNode], ctx: TocContext) -> int:
    """The nodes that count toward ``max_nodes``: the valid ones, and with ``count_duplicates`` the near-duplicates
    too (the official code, without verification, adds and counts every child)."""
    return sum(not n.pruned or (ctx.count_duplicates and n.pruned_by == "duplicate") for n in tree[1:])


def round_size(tree: list[TreeNode], expansions: int, ctx: TocContext) -> int:
    """How many queued nodes the next round expands together: as many as should reach ``max_nodes`` at the children
    per expansion seen so far. Sequential BFS would stop as soon as the tree is full; a round sized so makes the calls
    that BFS would make, concurrently, and few that it would not."""
    have = counted(tree, ctx)
    per_expansion = max(1.0, have / max(expansions, 1))
    return max(1, math.ceil((ctx.max_nodes - have) / per_expansion))


def _duplicates_across(results: dict[int, Expansion], frontier: list[int], similarity: float) -> set[tuple[int, int]]:
    """(node id, child index) of children that repeat a sibling from an earlier expansion of the same round."""
    kept = [(node_id, i, c) for node_id in frontier for i, c in enumerate(results[node_id].children) if not c.pruned_by]
    flags = duplicate_flags([c for _, _, c in kept], [], similarity)
    return {(node_id, i) for (node_id, i, _), flag in zip(kept, flags) if flag}


def explore(state: TocState) -> list[Send] | Literal["generate"]:
    """BFS: one ``expand`` per frontier node, all in one superstep (concurrent); an empty frontier ends the tree."""
    if not state["frontier"]:
        return "generate"
    known = state["tree"][1:]
    return [
        Send(
            "expand",
            {
                "node": state["tree"][i],
                "root_question": state["question"],
                "root_pool": state["pool"],
                "known": known,
                "window_cut": state.get("window_cut", 0),
            },
        )
        for i in state["frontier"]
    ]


async def generate(state: TocState, runtime: Runtime[TocContext]) -> dict:
    """Answer generation (Sec. 3.2, App. A.3), its first draft: up to ``answer_pairs`` valid pairs in BFS order,
    ``answer_passages`` passages, answer-containing first; the answer step checks it."""
    ctx = context_of(runtime, TocContext)
    tree = undo_pruning(state["tree"], ctx.min_nodes)
    restored = sum(not n.pruned and n.pruned_by == "verification" for n in tree)
    nodes = [n for n in tree[1:] if not n.pruned][: ctx.answer_pairs]
    pairs = [Disambiguation(question=n.question, answer=n.answer, passage_ids=n.passage_ids) for n in nodes]
    passages = answer_passages(nodes, state["pool"], ctx.answer_passages)
    book = await ctx.acasebook(state["question"])
    reply = await rac.draft(state["question"], pairs, passages, ctx.llm_options(), book)
    return {
        "tree": tree,
        "restored": restored,
        "disambiguations": pairs,
        "passages": passages,
        "retrieved": answer_passages(nodes, state["pool"], max(ctx.answer_passages, RETRIEVED)),
        **drafted(reply, foreign_figures(book, rac.grounds(state["question"], pairs, passages))),
    }


def undo_pruning(tree: list[TreeNode], min_nodes: int) -> list[TreeNode]:
    """Sec. 3.2: with too few valid nodes, restore verification-pruned nodes closest to the root (BFS order)."""
    missing = min_nodes - sum(not n.pruned for n in tree[1:])
    restored = []
    for node in tree:
        if missing > 0 and node.pruned and node.pruned_by == "verification":
            node, missing = node.model_copy(update={"pruned": False}), missing - 1
        restored.append(node)
    return restored


def answer_passages(nodes: list[TreeNode], pool: list[Passage], k: int) -> list[Passage]:
    """One passage holding each answer, in BFS order; then the pool's best for the AQ fills the rest."""
    chosen: list[str] = []
    for node in nodes:
        if len(chosen) == k:
            break
        fresh = [i for i in [*node.passage_ids, *supporting_ids(node.answer, pool)] if i not in chosen]
        chosen += fresh[:1]
    chosen += [p.id for p in pool if p.id not in chosen][: k - len(chosen)]
    by_id = {p.id: p for p in pool}
    return [by_id[i] for i in chosen]


builder = StateGraph(TocState, input_schema=QuestionInput, output_schema=TocOutput, context_schema=TocContext)
builder.add_node("retrieve", retrieve)
builder.add_node("expand", expand_graph)
builder.add_node("grow", grow)
builder.add_node("generate", llm_node(generate))
add_chat_io(builder, "retrieve")
builder.add_conditional_edges("retrieve", explore, ["expand", "generate"])
builder.add_edge("expand", "grow")
builder.add_conditional_edges("grow", explore, ["expand", "generate"])
add_answer_step(builder, "generate")
graph = builder.compile(name="toc")
