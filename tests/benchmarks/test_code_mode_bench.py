"""The code-mode benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.benchmarks.test_benchmarks_run import run_script

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pydantic_monty") is None,
    reason="code mode needs the pydantic-monty sandbox (pip install 'callgate[code]')",
)


@pytest.mark.slow
def test_the_code_mode_benchmark_runs_each_task_both_ways_and_measures_the_sandbox(
    tmp_path: Path,
) -> None:
    figures = tmp_path / "figures.json"
    done = run_script("code_mode.py", "--quick", "--json", str(figures))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for heading in (
        "### Tasks: 200 campaigns, each task both ways",
        "### Ratios, (a) tools / (b) run_code",
        "### Tool definitions per request, by provider format (tokens)",
        "### Overheads: in-memory store (memory://)",
    ):
        assert heading in done.stdout
    report = json.loads(figures.read_text())

    runs = {(r["task"], r["mode"]): r for r in report["tasks"]}
    assert len(runs) == 10
    # Both ways reach the truth computed from the data, the paused campaigns included.
    assert all(r["same"] for r in runs.values()), [r["difference"] for r in runs.values()]
    paused = runs[("2 filter, act", "code")]["answer"]["paused"]
    assert paused
    assert paused == runs[("2 filter, act", "tools")]["answer"]["paused"]
    for key in {task for task, _ in runs}:
        plain, code = runs[(key, "tools")], runs[(key, "code")]
        assert code["turns"] == 2
        assert plain["turns"] > code["turns"]
        # The program makes the same tool calls the plan makes, and the model reads
        # its result only.
        assert code["calls"] == plain["calls"]
        assert code["results"] < plain["results"]
    assert all(r["same_answers"] for r in report["ratios"])
    assert {row["format"].split(" (")[0] for row in report["definitions"]} >= {
        "Anthropic tools",
        "Gemini function declarations",
    }

    overheads = report["overheads"]
    assert overheads["store"] == "memory://"
    for key in ("run_code_1_us", "per_call_sequential_us", "bare_per_call_sequential_us"):
        assert overheads[key]["p50"] > 0
