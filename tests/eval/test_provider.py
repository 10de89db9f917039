"""``callgate eval run --model PROVIDER:MODEL``: a suite run against a model behind
an OpenAI-compatible HTTP server (a local fake answering as a model would), not
the task's script."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

import anyio
import pytest

from tests.cli.test_run import fake_openai, text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # spawns callgate

SUITE = """
[suite]
name = "provider"

[[tasks]]
id = "status"
prompt = "How is deployment D-1?"
script = [{ reply = "never used: the model answers" }]
[tasks.expect]
calls = [{ tool = "ops.deploy_status", args = { deploy_id = "D-1" } }]
answer_contains = ["running"]
"""


async def eval_run(suite: Path, model: str, url: str, *extra: str) -> CompletedProcess[bytes]:
    """``callgate eval run SUITE --json`` against the model server at ``url``."""
    command = [sys.executable, "-m", "callgate", "eval", "run", str(suite), "--json"]
    command += ["--model", model, "--base-url", url, *extra]
    env = {**os.environ, "OPENAI_API_KEY": "", "COLUMNS": "200"}
    with anyio.fail_after(60):
        return await anyio.run_process(command, env=env, check=False, stdin=subprocess.DEVNULL)


async def test_a_suite_runs_against_a_model_server_and_is_judged_on_its_calls(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    turns = [tool_call("deploy_status", {"deploy_id": "D-1"}), text("D-1 is running fine.")]
    async with fake_openai(turns) as (url, fake):
        done = await eval_run(suite, "openai-compatible:fake-model", url)

    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["model"] == "openai-compatible:fake-model"
    assert result["overall"]["success_rate"] == 1.0
    assert len(fake.requests) == 2  # the tool call, then the answer


async def test_each_run_is_bounded_by_the_limits_given_and_reports_its_progress(
    tmp_path: Path,
) -> None:
    # A slow local model that rambles must not hold a suite for 4,096 tokens a turn
    # and 20 turns a run: the run options of `callgate run` bound each run.
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    turns = [tool_call("deploy_status", {"deploy_id": "D-1"}), text("D-1 is running fine.")]
    async with fake_openai(turns) as (url, fake):
        done = await eval_run(
            suite, "openai-compatible:m", url, "--max-output-tokens", "256", "--max-turns", "1"
        )

    assert [r["max_tokens"] for r in fake.requests] == [256]  # one turn, 256 tokens
    [run] = json.loads(done.stdout)["runs"]
    assert run["status"] == "stopped" and "turn limit (1)" in run["failures"][0]
    # Not a terminal: one line a run on stderr, so a long suite shows it is moving.
    assert "callgate: [1/1] status #1: fail (stopped), 1 calls" in done.stderr.decode()


async def test_a_run_the_model_could_not_answer_says_why_it_failed(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = await eval_run(suite, "openai-compatible:m", f"http://127.0.0.1:{port}/v1")

    [run] = json.loads(done.stdout)["runs"]
    assert run["failures"][0].startswith("ended failed (the model request failed: could not reach")
