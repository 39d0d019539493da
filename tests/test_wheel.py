"""The wheel carries everything a method needs: built, installed outside the checkout, run from another directory."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import PASSAGES

pytestmark = pytest.mark.heavy  # builds the wheel and a virtualenv

ROOT = Path(__file__).resolve().parents[1]


PIP = [sys.executable, "-m", "pip", "--quiet"]
QUESTION = "When did the Harry Potter film come out?"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)], check=True, cwd=out)
    return next(out.glob("ambigqa-*.whl"))


def test_the_wheel_holds_every_prompt_the_data_and_the_type_marker(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    prompts = {f"agent/prompts/{p.name}" for p in (ROOT / "prompts").glob("*.txt")}
    assert prompts and prompts <= names
    assert {"agent/data/demo/corpus.jsonl", "agent/data/fewshot/ambiguity.jsonl", "agent/py.typed"} <= names
    assert "graphs/diva.py" in names and not any(n.startswith(("tests/", "notebooks/")) for n in names)


def test_a_method_runs_from_the_installed_wheel_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([*PIP, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    work = tmp_path / "elsewhere"  # not the repository: nothing may be read relative to it
    work.mkdir()
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    env = {**os.environ, "PYTHONPATH": str(site), "AMBIGQA_HOME": str(tmp_path / "home")}

    def python(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    where = python("-c", "import agent, graphs; print(agent.__file__, graphs.__file__)")
    assert all(path.startswith(str(site)) for path in where.split())
    python("-m", "agent", "ingest", str(corpus), "--collection", "tiny")
    result = json.loads(
        python("-m", "agent", "ask", QUESTION, "-m", "diva", "--llm", "fake", "-c", "tiny", "--json", "-q")
    )
    assert result["answer"] and result["extra"]["interpretations"]  # the prompts and few-shot demos came from the wheel
    assert result["usage"]["total"]["calls"] >= 4


def test_a_second_checkout_reads_its_own_prompts_and_data(tmp_path):
    """Code run from a checkout other than the installed one (a worktree) must not mix in the installed prompts."""
    copy = tmp_path / "worktree"
    for folder in ("agent", "graphs", "prompts", "data"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy)
    prompt = copy / "prompts" / "closed_book.txt"
    prompt.write_text(prompt.read_text() + "\nthis checkout's edit\n")
    code = "from agent.resources import data_file, prompt_file; print(prompt_file('closed_book').read_text()); "
    code += "print(data_file('fewshot', 'asqa_pool.jsonl'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "this checkout's edit" in done.stdout
    assert str(copy / "data" / "fewshot" / "asqa_pool.jsonl") in done.stdout
