"""``callgate eval run`` and ``callgate eval compare`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from callgate.cli.app import app

from .test_reports import DEMO_SUITE

TINY = """
[suite]
name = "tiny"

[[tasks]]
id = "status"
prompt = "Is D-1 up?"
script = [{ call = "ops.deploy_status", args = { deploy_id = "D-1" } }, { reply = "D-1 is running." }]
[tasks.expect]
calls = [{ tool = "ops.deploy_status" }]
answer_contains = ["running"]

[[tasks]]
id = "held"
split = "heldout"
prompt = "Is D-2 up?"
script = [{ call = "ops.deploy_status", args = { deploy_id = "D-2" } }, { reply = "D-2 is running." }]
[tasks.expect]
answer_contains = ["failed"]
"""


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def test_run_prints_json_of_a_documented_shape_and_meets_its_bar(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")

    result = _cli(
        "eval", "run", str(suite), "--split", "dev", "--repeat", "2", "--json", "--min-success", "1"
    )

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {
        "format",
        "suite",
        "model",
        "split",
        "repeat",
        "seconds",
        "overall",
        "tasks",
        "runs",
        "interrupted",
    }
    assert data["interrupted"] is False
    assert [t["id"] for t in data["tasks"]] == ["status"]
    assert data["overall"]["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert set(data["overall"]["tokens"]) == {"definitions", "results", "input", "output", "total"}
    assert len(data["runs"]) == 2


def test_run_below_the_bar_exits_1_and_names_the_failed_check(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")

    result = _cli("eval", "run", str(suite), "--min-success", "0.9")

    assert result.exit_code == 1
    assert "held #1: the answer does not contain 'failed'" in result.stdout
    assert "success rate 50% is below --min-success 90%" in result.stderr


def test_a_bad_task_exits_2_with_one_line_naming_the_task_and_the_field(tmp_path: Path) -> None:
    suite = tmp_path / "bad.toml"
    suite.write_text(TINY.replace('split = "heldout"', 'split = "later"'), encoding="utf-8")

    result = _cli("eval", "run", str(suite))

    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "task 'held'" in lines[0] and "split" in lines[0]


def test_the_demo_suite_writes_json_and_html_and_compares_with_itself(tmp_path: Path) -> None:
    out, page = tmp_path / "r.json", tmp_path / "r.html"

    result = _cli(
        "eval", "run", str(DEMO_SUITE), "--split", "heldout", "--out", str(out), "--html", str(page)
    )

    assert result.exit_code == 0, result.output
    assert "success 100%" in result.stdout
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    same = _cli("eval", "compare", str(out), str(out), "--json", "--fail-on-worse")
    assert same.exit_code == 0
    assert {t["verdict"] for t in json.loads(same.stdout)["tasks"]} == {"same"}


def test_compare_fails_on_a_worse_task_and_refuses_a_file_that_is_no_result(tmp_path: Path) -> None:
    before = tmp_path / "before.json"
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")
    _cli("eval", "run", str(suite), "--split", "dev", "--out", str(before))
    data = json.loads(before.read_text(encoding="utf-8"))
    data["runs"][0]["success"] = False
    after = tmp_path / "after.json"
    after.write_text(json.dumps(data), encoding="utf-8")

    worse = _cli("eval", "compare", str(before), str(after), "--fail-on-worse")
    assert worse.exit_code == 1
    assert "worse" in worse.stdout

    bogus = tmp_path / "bogus.json"
    bogus.write_text("{}", encoding="utf-8")
    refused = _cli("eval", "compare", str(bogus), str(after))
    assert refused.exit_code == 2
    assert "not a callgate eval result" in refused.stderr


def test_an_output_that_cannot_be_written_stops_the_command_before_any_run(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")

    for option, path in (("--html", tmp_path / "no" / "r.html"), ("--out", tmp_path)):
        result = _cli("eval", "run", str(suite), option, str(path))

        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"callgate: error: cannot write {path}: "
            + ("it is a directory" if path == tmp_path else f"no directory {path.parent}")
        ]
        assert result.stdout == ""  # nothing ran


def test_a_result_that_cannot_be_written_after_the_runs_is_still_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The directory goes away while the suite runs (stood in for by skipping the
    # check made before it): the runs' result is not lost with the file.
    monkeypatch.setattr("callgate.cli.eval._check_writable", lambda path: None)
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")
    gone = tmp_path / "gone" / "r.json"

    result = _cli("eval", "run", str(suite), "--out", str(gone))

    assert result.exit_code == 2
    assert "success 50% (1/2 runs)" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        f"callgate: error: cannot write {gone} (No such file or directory)"
    )


SLOW_TOOLS = '''
import asyncio

from callgate import Toolbox

box = Toolbox("pace")


@box.tool(read_only=True, open_world=False, timeout=120)
async def wait(seconds: float) -> str:
    """Wait a while.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return "waited"
'''


def _paced_task(name: str, seconds: float) -> str:
    return f"""
[[tasks]]
id = "{name}"
prompt = "Wait."
script = [{{ call = "pace.wait", args = {{ seconds = {seconds} }} }}, {{ reply = "Waited." }}]
[tasks.expect]
answer_contains = ["Waited"]
"""


@pytest.mark.slow
def test_ctrl_c_keeps_the_runs_that_ended(tmp_path: Path) -> None:
    """Hours of a real model's runs must not go with the ones still running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "pace_tools.py").write_text(SLOW_TOOLS, encoding="utf-8")
    (tmp_path / "pace.toml").write_text('toolboxes = ["./pace_tools.py:box"]\n', encoding="utf-8")
    suite = tmp_path / "paced.toml"
    suite.write_text(
        '[suite]\nname = "paced"\nconfig = "pace.toml"\n'
        + _paced_task("quick-1", 0)
        + _paced_task("quick-2", 0)
        + _paced_task("stuck", 60),
        encoding="utf-8",
    )
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    command = [sys.executable, "-m", "callgate", "eval", "run", str(suite), "--concurrency", "1"]
    process = subprocess.Popen(
        [*command, "--out", str(out), "--html", str(page)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        # A child of a non-interactive shell may inherit SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until both quick runs have ended
        lines.append(process.stderr.readline())
        if "[2/3]" in lines[-1]:
            break
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)

    assert process.returncode == 130, stdout + stderr
    assert "callgate: interrupted: 2 of 3 runs ended; the result covers those" in stderr
    assert "interrupted: 2 of 3 runs" in stdout
    assert "success 100% (2/2 runs)" in stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["interrupted"] is True
    assert sorted(r["task"] for r in data["runs"]) == ["quick-1", "quick-2"]
    assert "Interrupted: 2 of 3 runs ended" in page.read_text(encoding="utf-8")
