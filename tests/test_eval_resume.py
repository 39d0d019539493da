"""The one resume format of eval and bench: JSONL rows written as they finish, read back by the settings they carry."""

import numpy as np

from agent.eval.resume import RowLog, made_with, read_rows, save_batch, saved_batches


def test_rows_are_appended_one_a_line_and_a_line_cut_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "deep" / "runs.jsonl"
    log = RowLog(path)
    log.append({"id": "q1", "k": 10})
    log.append({"id": "q2", "k": 5})
    with path.open("a") as f:
        f.write('{"id": "q3", "k"')  # the process died mid-line
    assert read_rows(path) == [{"id": "q1", "k": 10}, {"id": "q2", "k": 5}]
    assert made_with(read_rows(path), {"k": 10}) == [{"id": "q1", "k": 10}]


def test_without_a_file_nothing_is_read_or_written(tmp_path):
    assert read_rows(None) == [] and read_rows(tmp_path / "none.jsonl") == []
    RowLog(None).append({"id": "q1"})
    assert list(tmp_path.iterdir()) == []


def test_saved_batches_come_back_by_start(tmp_path):
    folder = tmp_path / "vectors"
    assert saved_batches(folder) == {}
    save_batch(folder, 128, {"onnx": np.ones((2, 3)), "seconds": np.array([0.5, 1.5])})
    batches = saved_batches(folder)
    assert list(batches) == [128] and np.array_equal(batches[128]["seconds"], [0.5, 1.5])
    assert [p.name for p in folder.iterdir()] == ["batch-128.npz"]  # no temporary file left behind
