"""The installed entry point, in a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_console_script_runs_a_governed_call(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("callgate")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "callgate"]
    env = {**os.environ, "CALLGATE_STORE": f"sqlite:///{tmp_path / 'c.db'}"}

    result = subprocess.run(
        [
            *command,
            "call",
            "ops.campaigns_find",
            "--args",
            '{"query": "Autumn Sale"}',
            *("--principal", "alice", "--tenant", "acme", "--scopes", "campaigns:read", "--json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"
    assert result.stderr == ""
