"""Neighbourhood Aware Retrieval (SUNAR, Algorithm 1): re-rank in batches, alternating between the first-stage
ranking R0 and the frontier of neighbours of already scored passages, until the budget is spent.

An optional ``rescore`` hook returns a divisor for each scored batch (SUNAR's ASU, Algorithm 1 lines 6–8, Eq. 5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from agent.retrieval.rerank import Scorer
from agent.schemas import Passage

Rescore = Callable[[list[Passage]], float]
NeighboursOf = Callable[[list[Passage]], dict[str, list[tuple[Passage, float]]]]  # Store.neighbours with k bound


@dataclass
class Batch:
    source: Literal["R0", "frontier"]
    ids: list[str]
    divisor: float = 1.0


@dataclass
class NARResult:
    ranked: list[Passage]  # R+, best first
    batches: list[Batch] = field(default_factory=list)


def neighbourhood_rerank(
    query: str,
    first_stage: list[Passage],
    neighbours_of: NeighboursOf,
    scorer: Scorer,
    *,
    batch_size: int = 16,
    budget: int = 100,
    rescore: Rescore | None = None,
) -> NARResult:
    """R+ for ``query``: at most ``budget`` passages scored by ``scorer``, re-scored per batch by ``rescore``. The
    graph G is read on demand: ``neighbours_of`` a batch, from the store's dense index."""
    scored: dict[str, Passage] = {}  # R+ (line 1)
    r0 = list(first_stage)  # R (line 2: C ← R)
    frontier: dict[str, tuple[float, float]] = {}  # N (line 3): id → (source score, similarity) priority
    known: dict[str, Passage] = {}  # the frontier's passages
    batches: list[Batch] = []
    from_frontier = False
    while len(scored) < budget:  # line 15
        room = min(batch_size, budget - len(scored))
        r0 = [p for p in r0 if p.id not in scored]  # line 11: R ← R \ B
        if (from_frontier and not frontier) or (not from_frontier and not r0):
            from_frontier = not from_frontier  # the chosen pool is exhausted: take the other one
        if from_frontier:
            best = sorted(frontier, key=lambda pid: frontier[pid], reverse=True)[:room]
            batch = [known[pid] for pid in best]
        else:
            batch = r0[:room]
        if not batch:
            break
        scores = scorer.score(query, batch)  # line 5
        ranked = [(float(s), p) for s, p in sorted(zip(scores, batch), key=lambda x: -x[0])]
        batch = [p.model_copy(update={"score": s}) for s, p in ranked]
        divisor = max(1.0, rescore(batch)) if rescore else 1.0  # lines 6–7: s semantic sets
        ranked = [(round(s / divisor, 6), p) for s, p in ranked]  # line 8, Eq. 5
        batch = [p.model_copy(update={"score": s}) for s, p in ranked]
        batches.append(Batch("frontier" if from_frontier else "R0", [p.id for p in batch], divisor))
        for p in batch:  # line 9: R+ ← R+ ∪ B
            scored[p.id] = p
            frontier.pop(p.id, None)  # line 12: N ← N \ B
        adjacent = neighbours_of(batch)
        for s, p in ranked:  # line 13: N ← N ∪ (Neighbours(B, G) \ R+), prioritised by the source's score
            for neighbour, similarity in adjacent.get(p.id, []):
                if neighbour.id in scored:
                    continue
                known.setdefault(neighbour.id, neighbour)
                frontier[neighbour.id] = max(frontier.get(neighbour.id, (float("-inf"), 0.0)), (s, similarity))
        from_frontier = not from_frontier  # line 14: alternate R and N
    return NARResult(sorted(scored.values(), key=lambda p: -(p.score or 0.0)), batches)
