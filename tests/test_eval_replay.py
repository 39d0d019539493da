"""Eval checkpoints and replays: stored runs go on from one node with new code or options, the steps before it not
run again; the scripted model stands at the LLM boundary, the store and the checkpoint file are real."""

import json
import re
import sqlite3

import pytest

from agent.errors import ConfigError
from agent.eval.harness import EvalConfig, evaluate
from tests.test_eval_harness import ROWS as HARNESS_ROWS

ROWS = HARNESS_ROWS[:2]  # a film with two readings, and Mount Etna
EXTRACT = "DQ 1: When was the world premiere?\nDA 1: 4 November 2001"
FIRST = "Answer: It premiered on 4 November 2001 [1]."
SECOND = "Answer: It premiered on 4 November 2001 [1] and opened in the US on 16 November 2001 [2]."


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def rows_of(out):
    return {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def checkpoint_count(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


def quiet(config):
    return evaluate(config, progress=False, log=lambda _: None)


@pytest.fixture
def stored(dataset, collection, scripted, tmp_path):
    """rag on both questions, two at once, every run's states kept."""
    name, _ = scripted({"rag_extract": EXTRACT, "rag_generate": FIRST})
    out = tmp_path / "stored"
    config = EvalConfig(
        dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, checkpoints=True, concurrency=2
    )
    quiet(config)
    assert not (out / "checkpoints.sqlite-wal").exists()  # closed: the file holds every state
    return out


def test_a_replay_runs_the_stored_runs_again_from_the_node_on_and_leaves_the_source_as_it_was(
    dataset, collection, scripted, stored, tmp_path
):
    before = rows_of(stored)
    assert all(r["checkpoint_thread"].startswith(f"rag/{q}/") for q, r in before.items())
    assert all(r["answer"].startswith("It premiered on 4 November 2001") for r in before.values())
    stored_checkpoints = checkpoint_count(stored / "checkpoints.sqlite")

    name, model = scripted(
        {"rag_extract": "DQ 1: A question the replay must not ask?\nDA 1: 1999", "rag_generate": SECOND}
    )
    out = tmp_path / "replayed"
    config = EvalConfig(
        dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, replay=stored, replay_at="rag_generate"
    )  # fmt: skip
    summary = quiet(config)
    after = rows_of(out)

    assert model.prompts() == ["rag_generate", "rag_generate"]  # retrieval and extraction were not run again
    for q in ("q1", "q2"):
        assert after[q]["disambiguations"] == before[q]["disambiguations"]  # the stored pairs, not the new script's
        assert after[q]["passage_ids"] == before[q]["passage_ids"]
        assert "16 November 2001" in after[q]["answer"] and "16 November 2001" not in before[q]["answer"]
        assert after[q]["cost"]["llm_calls"] == before[q]["cost"]["llm_calls"] == 2  # the stored extract counts
        assert after[q]["replayed"] == {"at": "rag_generate", "source_commit": before[q]["provenance"]["commit"]}
        assert after[q]["checkpoint_thread"] == before[q]["checkpoint_thread"]
        assert after[q]["provenance"]["replay"] == {"source": str(stored.resolve()), "at": "rag_generate"}
    assert after["q1"]["metrics"]["str_em"] == 1.0 > before["q1"]["metrics"]["str_em"]
    assert summary["rag"]["questions"] == 2
    assert (
        f"- replayed from node rag_generate on: the stored runs of {stored.resolve()}"
        in (out / "summary.md").read_text()
    )
    assert checkpoint_count(stored / "checkpoints.sqlite") == stored_checkpoints  # forks go to the replay's copy
    assert checkpoint_count(out / "checkpoints.sqlite") > stored_checkpoints

    quiet(config)  # resumed: every replay is done
    assert model.prompts() == ["rag_generate", "rag_generate"]


def test_a_stored_run_that_never_reached_the_node_is_an_error_row_not_the_end_of_the_replay(
    dataset, collection, scripted, stored, tmp_path
):
    name, model = scripted({"rag_short": "So the answer is: 2001"})
    out = tmp_path / "replayed"
    config = EvalConfig(
        dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, replay=stored, replay_at="short_answer"
    )  # fmt: skip
    quiet(config)
    rows = rows_of(out)
    assert set(rows) == {"q1", "q2"} and not model.calls
    assert all("never reached node 'short_answer'" in r["error"] for r in rows.values())


def test_only_questions_with_a_stored_run_are_replayed(dataset, collection, scripted, stored, tmp_path):
    lines = (stored / "results.jsonl").read_text().splitlines()
    (stored / "results.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["id"] == "q2"))
    name, model = scripted({"rag_generate": SECOND})
    out = tmp_path / "replayed"
    messages = []
    config = EvalConfig(
        dataset=dataset, methods=["rag"], out=out, collection=collection, llm=name, replay=stored, replay_at="rag_generate"
    )  # fmt: skip
    evaluate(config, progress=False, log=messages.append)
    assert set(rows_of(out)) == {"q2"} and len(model.calls) == 1
    assert any("1 runs skipped" in m for m in messages)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"replay_at": "rag_generate"}, "needs a run to replay"),
        ({"replay": "STORED"}, "name the node a replay starts at"),
        ({"replay": "STORED", "replay_at": "answer"}, "rag has no node 'answer': choose one of retrieve, rag_extract"),
        ({"replay": "STORED", "replay_at": "rag_generate", "out": "STORED"}, "its own folder"),
        ({"replay": "EMPTY", "replay_at": "rag_generate"}, "holds no results.jsonl"),
    ],
)
def test_a_bad_replay_fails_before_any_run(dataset, collection, scripted, stored, tmp_path, changes, message):
    name, model = scripted({})
    folders = {"STORED": stored, "EMPTY": tmp_path}
    values = {"out": tmp_path / "replayed"} | {k: folders.get(v, v) for k, v in changes.items()}
    with pytest.raises(ConfigError, match=message):
        quiet(EvalConfig(dataset=dataset, methods=["rag"], collection=collection, llm=name, **values))
    assert not model.calls


def test_a_replay_from_a_run_without_checkpoints_says_how_to_make_them(dataset, collection, scripted, stored, tmp_path):
    (stored / "checkpoints.sqlite").unlink()
    name, _ = scripted({})
    config = EvalConfig(
        dataset=dataset, methods=["rag"], out=tmp_path / "replayed", collection=collection, llm=name, replay=stored,
        replay_at="rag_generate",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="replay a run made with --checkpoints"):
        quiet(config)


def test_a_replay_before_the_conflict_step_turns_it_off_or_changes_its_rule_over_the_same_readings(scripted, tmp_path):
    """One VerDICt run with the step; replays from ``settle`` without it, and with it again: the readings are the
    stored ones, so the step's effect is measured alone (issue 93's protocol)."""
    from tests.test_eval_ramdocs import ROWS as RAMDOCS

    dataset = tmp_path / "ramdocs.jsonl"
    dataset.write_text(json.dumps(RAMDOCS[0]) + "\n")  # Michael Jordan: two namesakes and a wrong year
    years = {"basketball player, was born in 1963": "1963", "scientist": "1956", "born in 1998": "1998"}

    def execute(call):
        year = next((y for phrase, y in years.items() if phrase in call.user), None)
        return f"Interpretation: When was he born?\nAnswer: {year}" if year else "Answer: unknown"

    def judge(call):
        return "Keep: " + re.search(r"Answer (\d): 1963", call.user)[1]

    def dropped(row):
        return [i for c in row["records"].get("conflicts", []) for i in c["dropped_ids"]]

    script = {"verdict_execute": execute, "conflict_judge": judge}
    name, model = scripted(script, default="Yes")
    stored = tmp_path / "stored"
    on = {"verdict": {"settle_conflicts": True}}
    base = EvalConfig(
        dataset=dataset, methods=["verdict"], out=stored, collection="nothing", llm=name, checkpoints=True,
        method_options=on,
    )  # fmt: skip
    quiet(base)
    assert model.prompts().count("conflict_judge") == 1
    assert dropped(rows_of(stored)["r1"]) == ["r1-d2"]

    def replay(folder, options):
        name, model = scripted(script, default="Yes")
        config = EvalConfig(
            dataset=dataset, methods=["verdict"], out=tmp_path / folder, collection="nothing", llm=name,
            replay=stored, replay_at="settle", method_options={"verdict": options},
        )  # fmt: skip
        quiet(config)
        return rows_of(tmp_path / folder)["r1"], model.prompts()

    off, prompts = replay("off", {"settle_conflicts": False})
    assert "verdict_execute" not in prompts and "conflict_judge" not in prompts  # the stored readings, unjudged
    assert dropped(off) == [] and off["metrics"]["misinfo_stated"] == 1.0  # the wrong year reaches the answer
    again, prompts = replay("again", {"settle_conflicts": True, "subject_rule": "shared_facts"})
    assert "verdict_execute" not in prompts and prompts.count("conflict_judge") == 1
    assert dropped(again) == ["r1-d2"] and again["metrics"]["misinfo_stated"] == 0.0
