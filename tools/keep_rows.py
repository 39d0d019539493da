"""Keep an eval folder's rows in the repository, slimmed to what ``tools/pair_runs.py`` reads.

Study runs live under ``runs/`` (ignored by git) and a machine can come up new between sessions, so the rows a study
rests on are copied into ``notes/rows/<study>/<name>/results.jsonl``. Kept per row: the method, id, question, answer,
disambiguations, metrics, records, cost, error, the checkpoint thread, what a replay started from, and the commit
from the provenance. Lines a crash cut short are skipped. A run that is to be resumed needs its rows whole (``eval``
matches them by the provenance's key): copy its ``results.jsonl`` instead.

    python tools/keep_rows.py runs/p93/R-verdict notes/rows/2026-12-ramdocs/R-verdict
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.eval.resume import read_rows  # noqa: E402

KEPT = (
    "method",
    "id",
    "question",
    "answer",
    "disambiguations",
    "metrics",
    "records",
    "cost",
    "error",
    "checkpoint_thread",
    "replayed",
)


def slim(row: dict) -> dict:
    """The fields a pairing needs, with the commit lifted out of the provenance."""
    kept = {key: row[key] for key in KEPT if key in row}
    provenance = row.get("provenance") or {}
    kept["commit"] = provenance.get("commit", row.get("commit"))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an eval folder holding results.jsonl")
    parser.add_argument("dest", type=Path, help="the folder to write results.jsonl into")
    args = parser.parse_args()
    rows = read_rows(args.run / "results.jsonl")
    args.dest.mkdir(parents=True, exist_ok=True)
    with open(args.dest / "results.jsonl", "w") as out:
        for row in rows:
            out.write(json.dumps(slim(row)) + "\n")
    print(f"{len(rows)} rows → {args.dest / 'results.jsonl'}")


if __name__ == "__main__":
    main()
