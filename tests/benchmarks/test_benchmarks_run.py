"""The benchmark command keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


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
    argv = [sys.executable, str(ROOT / "benchmarks" / "serve_http.py")]
    argv += [
        "--seconds",
        "1",
        "--rounds",
        "1",
        "--concurrency",
        "2",
        "--servers",
        "callgate",
        "bare",
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=ROOT / "benchmarks", check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| 2026-07-28 | 2 | callgate serve |" in done.stdout
    assert "| 2025-11-25 | 2 | bare SDK MCPServer |" in done.stdout
    assert "callgate / bare throughput" in done.stdout


@pytest.mark.slow
def test_the_registration_benchmark_times_every_way_of_registering() -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "registration.py")]
    done = subprocess.run(
        [*argv, "--tools", "40", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT / "benchmarks",
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for row in ("| toolbox |", "| + Gate |", "| + build_server |", "| into a served toolbox |"):
        assert row in done.stdout


@pytest.mark.slow
def test_the_startup_benchmark_times_help_and_the_first_answer() -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "startup.py")]
    done = subprocess.run(
        [*argv, "--rounds", "1", "--no-fastmcp"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT / "benchmarks",
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| callgate --help |" in done.stdout
    assert "| serve: callgate serve |" in done.stdout
    assert "| serve: bare SDK MCPServer |" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_instruction_count_benchmark_counts_a_call_of_each_checkout(tmp_path: Path) -> None:
    # The same tree twice, with few calls: only the table and a plausible count are
    # checked (20 calls are too few for the first calls' warm-up to wash out).
    argv = [sys.executable, str(ROOT / "benchmarks" / "instructions.py")]
    done = subprocess.run(
        [*argv, "--calls", "5,25", "--against", str(ROOT / "src")],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT / "benchmarks",
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")]
    per_call = {row[1].strip(): float(row[2].replace(",", "")) for row in rows[1:]}
    assert set(per_call) == {"--against", "this checkout"}
    assert all(50_000 < count < 5_000_000 for count in per_call.values()), per_call


def test_the_instruction_count_benchmark_refuses_bad_options() -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "instructions.py")]
    for bad, says in (
        (["--calls", "30,10"], "0 <= N1 < N2"),
        (["--against", str(ROOT)], "has no callgate package"),
    ):
        done = subprocess.run(
            [*argv, *bad], capture_output=True, text=True, cwd=ROOT / "benchmarks", check=False
        )
        assert done.returncode != 0
        assert says in done.stderr
