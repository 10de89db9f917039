"""The soak benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk")
def test_a_short_soak_reports_sizes_memory_and_no_errors() -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "benchmarks" / "soak.py")),
            *("--calls", "300", "--segments", "2", "--warmup", "50", "--concurrency", "4"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| after calls | WAL MB | database MB | server RSS MB |" in done.stdout
    assert "- errors: 0 non-200, 0 isError, 0 socket errors" in done.stdout
