"""The benchmark command keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def run_script(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/<script> <args>`` as a reader runs it, from benchmarks/."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT / "benchmarks",
        check=False,
    )


@pytest.mark.slow
def test_benchmarks_quick_run_prints_both_tables() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "run.sh"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "gate.call, SQLite WAL file" in done.stdout
    assert "jsonschema-rs: is_valid" in done.stdout
    assert "agent loop, scripted model" in done.stdout
    assert "| 100 BFCL | Gemini function declarations | 100 |" in done.stdout
    assert "| 1,000 KB | this checkout |" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk (Debian package) is not installed")
def test_the_http_serving_benchmark_loads_callgate_serve_and_the_bare_server() -> None:
    args = (
        "--seconds",
        "1",
        "--rounds",
        "1",
        "--concurrency",
        "2",
        "--servers",
        "callgate",
        "bare",
    )
    done = run_script("serve_http.py", *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| 2026-07-28 | 2 | callgate serve |" in done.stdout
    assert "| 2025-11-25 | 2 | bare SDK MCPServer |" in done.stdout
    assert "callgate / bare throughput" in done.stdout


@pytest.mark.slow
def test_the_registration_benchmark_times_every_way_of_registering() -> None:
    done = run_script("registration.py", "--tools", "40", "--rounds", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    for row in ("| toolbox |", "| + Gate |", "| + build_server |", "| into a served toolbox |"):
        assert row in done.stdout


@pytest.mark.slow
def test_the_startup_benchmark_times_help_and_the_first_answer() -> None:
    done = run_script("startup.py", "--rounds", "1", "--no-fastmcp")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| callgate --help |" in done.stdout
    assert "| serve: callgate serve |" in done.stdout
    assert "| serve: bare SDK MCPServer |" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_instruction_count_benchmark_counts_a_call_of_each_checkout() -> None:
    # The same tree twice, with few calls: only the table and a plausible count are
    # checked (20 calls are too few for the first calls' warm-up to wash out).
    done = run_script(
        "instructions.py", "--calls", "5,25", "--against", str(ROOT / "src"), timeout=400
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")]
    per_call = {row[1].strip(): float(row[2].replace(",", "")) for row in rows[1:]}
    assert set(per_call) == {"--against", "this checkout"}
    # The second tree only: in a fresh checkout with the suite running beside it,
    # the first tree's first counted process still compiled modules the others wrote
    # to __pycache__ meanwhile (hundreds of millions of instructions, 20 calls apart).
    assert 50_000 < per_call["this checkout"] < 5_000_000, per_call


def test_the_instruction_count_benchmark_refuses_bad_options() -> None:
    for bad, says in (
        (["--calls", "30,10"], "0 <= N1 < N2"),
        (["--calls", "x"], "0 <= N1 < N2"),
        (["--against", str(ROOT)], "has no callgate package"),
    ):
        done = run_script("instructions.py", *bad)
        assert done.returncode != 0
        assert says in done.stderr
