"""Which questions of a stored run the conflict step would act on, under each subject rule, without an LLM call.

Reads an eval folder made with ``--checkpoints`` (DIVA or VerDICt), takes each thread's state before ``settle`` and
groups its answers as ``agent.steps.conflict.settle`` would: ``shared_words`` and ``shared_facts`` act where
``conflicting_groups`` forms a group; ``judge`` where that (with ``shared_facts``) or ``namesake_groups`` does. A
rule's replay (``ambigqa eval --replay RUN --at settle --ids …``) then needs only those questions: elsewhere the node
changes nothing and the no-step replay's row stands (``tools/pair_runs.py`` merges them).

    python tools/settle_groups.py runs/C-diva            # one line a rule: the ids, comma-separated

Prints ``RULE COUNT IDS``; questions that never reached ``settle`` are listed as ``unreached``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.errors import ReplayError  # noqa: E402
from agent.eval.checkpoints import FILE, Checkpoints, before  # noqa: E402
from agent.eval.resume import read_rows  # noqa: E402
from agent.registry import load_graph  # noqa: E402
from agent.steps.conflict import answer_keys, conflicting_groups, namesake_groups  # noqa: E402

PAIRS = {"diva": "disambiguations", "verdict": "candidates"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="an eval folder written with --checkpoints")
    args = parser.parse_args()
    rows = read_rows(args.run / "results.jsonl")
    threads = {r["id"]: (r["method"], r["checkpoint_thread"]) for r in rows if "error" not in r}
    checkpoints = Checkpoints(args.run / FILE)
    acts: dict[str, list[str]] = {"shared_words": [], "shared_facts": [], "judge": [], "unreached": []}
    for qid, (method, thread) in threads.items():
        graph = load_graph(method).copy(update={"checkpointer": checkpoints.saver})
        try:
            config = before(graph, {"configurable": {"thread_id": thread}}, "settle")
        except ReplayError:
            acts["unreached"].append(qid)
            continue
        state = graph.get_state(config).values
        pairs, passages = state[PAIRS[method]], state["passages"]
        keys = answer_keys(pairs)
        formed = {rule: bool(conflicting_groups(pairs, passages, keys, subject_rule=rule))
                  for rule in ("shared_words", "shared_facts")}  # fmt: skip
        formed["judge"] = formed["shared_facts"] or bool(namesake_groups(pairs, passages, keys, "shared_facts"))
        for rule, hit in formed.items():
            if hit:
                acts[rule].append(qid)
    checkpoints.close()
    for rule, ids in acts.items():
        print(rule, len(ids), ",".join(ids))


if __name__ == "__main__":
    main()
