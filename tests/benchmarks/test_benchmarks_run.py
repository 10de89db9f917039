"""The benchmark command keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import subprocess
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
