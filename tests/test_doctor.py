"""`ambigqa doctor` as a user runs it, and the embedded server's crash reports (the real model's checks: test_local_llm)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from agent.doctor import server_facts


def doctor(*args: str, home, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "AMBIGQA_HOME": str(home), "PYTHONPATH": os.getcwd(), **env}
    environment.pop("AMBIGQA_OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "agent", "doctor", *args], capture_output=True, text=True, env=environment, timeout=300
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_doctor_checks_the_llm_the_embeddings_and_the_store_in_order(served_home):
    home, collection = served_home, "tiny"  # the subprocesses' store, not the one this process has open
    proc = doctor("--llm", "fake", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and [c["name"] for c in report["checks"]] == ["LLM", "embeddings", "store"]
    llm, encoder, store = report["checks"]
    assert llm["details"]["completion_tokens"] > 0
    assert encoder["details"]["batch"] == 32 and encoder["details"]["dim"] == 384 and encoder["details"]["rate"] > 0
    assert store["details"]["collections"][collection] == 6
    assert all(c["seconds"] >= 0 for c in report["checks"])

    shown = doctor("--llm", "fake", home=home)  # for a person: one line per check on stderr
    assert shown.returncode == 0 and shown.stdout == ""
    lines = shown.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.lstrip().startswith("✓") for line in lines), shown.stderr
    assert "passages/s" in shown.stderr and f"{collection} (6)" in shown.stderr


def test_doctor_stops_at_the_first_failure_with_one_line_and_exit_code_1(tmp_path):
    home = tmp_path
    down = f"http://127.0.0.1:{_free_port()}"
    proc = doctor("--llm", "fake", home=home, AMBIGQA_CHROMA_URL=down)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "✗ store" in lines[-1] and "cannot reach the Chroma server" in lines[-1], proc.stderr
    assert sum("✗" in line for line in lines) == 1

    proc = doctor("--llm", "openai", "--json", home=home)  # no key: the LLM check fails and nothing after it runs
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    assert [c["name"] for c in report["checks"]] == ["LLM"]
    assert "AMBIGQA_OPENAI_API_KEY" in report["checks"][0]["summary"]


def test_server_facts_reads_what_llama_cpp_logged():
    log = [
        "load_tensors:   CPU_Mapped model buffer size =  1059.89 MiB",
        "load_tensors:   CPU_REPACK model buffer size =   596.53 MiB",
        "CPU : SSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 0 | REPACK = 1 | ",
    ]
    facts = server_facts(log)
    assert facts["buffers_mib"] == {"CPU_Mapped": 1059.89, "CPU_REPACK": 596.53}
    assert facts["cpu_features"] == ["SSE3", "AVX", "AVX_VNNI", "AVX2", "AVX512", "REPACK"]


def test_a_server_that_dies_while_starting_names_its_exit_code_and_log(tmp_path):
    pytest.importorskip("llama_cpp")
    from agent.errors import LLMCrashError
    from agent.llm.server_launcher import LocalServer, Repacking
    from agent.settings import Settings

    settings = Settings(home=tmp_path, local_startup_timeout=120)
    with pytest.raises(LLMCrashError, match=r"exited with code 1 while starting; log: .* \(full log: .*\.log\)"):
        LocalServer(tmp_path / "missing.gguf", settings, Repacking(True, "test"))


def test_repacking_is_off_on_amx_cpus_and_when_asked():
    from agent.llm.server_launcher import repacking
    from agent.settings import Settings

    sapphire_rapids, epyc = {"avx2", "avx512f", "avx512_vnni", "amx_int8", "amx_tile"}, {"avx2", "fma", "avx512_vnni"}
    assert not repacking(Settings(), sapphire_rapids).on and "AMX" in repacking(Settings(), sapphire_rapids).reason
    assert repacking(Settings(local_repack="on"), sapphire_rapids).on
    assert repacking(Settings(), epyc).on and not repacking(Settings(local_repack="off"), epyc).on


@pytest.mark.parametrize(
    ("code", "text"), [(-11, "died by SIGSEGV"), (-6, "died by SIGABRT"), (1, "exited with code 1")]
)
def test_exit_status_names_the_signal(code, text):
    from agent.llm.server_launcher import exit_status

    assert exit_status(code) == text
