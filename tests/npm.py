"""Installing the npm-based checks (the conformance suite, the MCP Inspector) once per run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 900  # seconds: a cold npm install of Node 22 and the package


def install(script: Path, what: str) -> None:
    """Run ``script install`` (it locks against concurrent installs); fail the test
    with the script's output if it cannot."""
    try:
        done = subprocess.run(
            ["bash", str(script), "install"],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"installing {what} took over {INSTALL_TIMEOUT} s")
    if done.returncode != 0:
        pytest.fail(f"installing {what} failed:\n{done.stdout}\n{done.stderr}")
