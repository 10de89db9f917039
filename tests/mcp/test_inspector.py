"""Interoperability: the MCP Inspector CLI against ``callgate serve``, over stdio and HTTP.

``scripts/inspector.sh`` runs ``@modelcontextprotocol/inspector`` (pinned there) on
Node 22, both installed on first use into ``.cache/``. Each test runs
``inspector --cli --format json <target> --method ...`` against the demo tools and
checks the JSON it prints, in both protocol eras the Inspector speaks (``legacy``:
the 2025-11-25 initialize handshake; ``modern``: 2026-07-28, stateless).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.npm import install

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "inspector.sh"
SERVE = [sys.executable, "-m", "callgate", "serve"]
ERAS = ("legacy", "modern")
CALL_TIMEOUT = 90  # seconds for one Inspector run (it connects within 15 s or fails)
DEMO_TOOLS = {"ops__campaigns_find", "ops__budget_change_preview", "ops__notes_read"}
AUTUMN = {"C-101", "C-102", "C-103"}


@pytest.fixture(scope="session")
def inspector_installed() -> None:
    """Node 22 and the Inspector, installed once (the script locks against other installs)."""
    install(SCRIPT, "the MCP Inspector")


@pytest.fixture
def inspector(inspector_installed: None, tmp_path: Path) -> Any:
    """Run the Inspector CLI; its state (catalog, storage) stays under tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "MCP_STORAGE_DIR": str(home / "storage"),
        "MCP_CATALOG_PATH": str(home / "mcp.json"),
        "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), "--cli", "--format", "json", *args],
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    return run


def _result(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, f"inspector exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    output = json.loads(run.stdout)
    assert isinstance(output, dict) and "result" in output, run.stdout
    result: dict[str, Any] = output["result"]
    return result


def _assert_campaigns(result: dict[str, Any]) -> None:
    assert result.get("isError") is False, result
    rows = result["structuredContent"]["result"]
    assert {row["id"] for row in rows} == AUTUMN
    assert all("autumn" in row["name"].lower() for row in rows)
    # The same JSON as a text block, for clients that ignore structuredContent.
    (text,) = (block["text"] for block in result["content"] if block["type"] == "text")
    assert json.loads(text) == rows


def _stdio_target(tmp_path: Path) -> list[str]:
    return [*SERVE, "--stdio", "--store", f"sqlite:///{tmp_path / 'stdio.db'}"]


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """``callgate serve`` (the demo) on a free loopback port; stopped after the test."""
    log = tmp_path / "serve.stderr"
    store = f"sqlite:///{tmp_path / 'http.db'}"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [*SERVE, "--port", "0", "--store", store],
            stdin=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            text = log.read_text(errors="replace")
            match = re.search(r"serving MCP at (\S+)\n", text)
            if match:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"callgate serve did not start ({process.returncode}):\n{text}")
            time.sleep(0.05)
        yield match.group(1)
        assert process.poll() is None, f"callgate serve died:\n{log.read_text()}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.parametrize("era", ERAS)
def test_stdio_tools_list(inspector: Any, tmp_path: Path, era: str) -> None:
    result = _result(
        inspector(*_stdio_target(tmp_path), "--protocol-era", era, "--method", "tools/list")
    )
    tools = result["tools"]
    names = [tool["name"] for tool in tools]
    assert names == sorted(names)
    assert set(names) >= DEMO_TOOLS
    find = next(tool for tool in tools if tool["name"] == "ops__campaigns_find")
    assert "query" in find["inputSchema"]["properties"]
    assert find["annotations"]["readOnlyHint"] is True


@pytest.mark.parametrize("era", ERAS)
def test_stdio_tools_call(inspector: Any, tmp_path: Path, era: str) -> None:
    args = ["--protocol-era", era, "--method", "tools/call"]
    args += ["--tool-name", "ops__campaigns_find", "--tool-arg", "query=autumn"]
    _assert_campaigns(_result(inspector(*_stdio_target(tmp_path), *args)))


@pytest.mark.parametrize("era", ERAS)
def test_http_tools_list_and_call(inspector: Any, http_url: str, era: str) -> None:
    target = ["--transport", "http", "--server-url", http_url, "--protocol-era", era]
    listed = _result(inspector(*target, "--method", "tools/list"))
    assert {t["name"] for t in listed["tools"]} >= DEMO_TOOLS
    args = ["--method", "tools/call", "--tool-name", "ops__campaigns_find"]
    _assert_campaigns(_result(inspector(*target, *args, "--tool-arg", "query=autumn")))
    # A tool execution error is a result with isError (the CLI then exits 5).
    bad = inspector(*target, *args, "--tool-arg", "nope=1")
    assert bad.returncode == 5, bad.stderr
    error = json.loads(bad.stdout)["result"]
    assert error["isError"] is True
    assert "Unknown argument 'nope'" in error["content"][0]["text"]


def test_http_unknown_tool(inspector: Any, http_url: str) -> None:
    run = inspector("--server-url", http_url, "--method", "tools/call", "--tool-name", "ops__nope")
    assert run.returncode != 0
    assert "tool_not_found" in run.stderr, run.stderr


def test_strict_schema_portability(inspector: Any, tmp_path: Path) -> None:
    """``--strict`` reports tool-schema portability problems; exit 6 means an error.

    Warnings (stderr) are allowed: the report is part of the test output (-rP).
    """
    run = inspector(*_stdio_target(tmp_path), "--strict", "--method", "tools/list")
    print(run.stderr)
    assert run.returncode == 0, f"--strict found schema errors:\n{run.stderr}"
    assert re.search(r"\b0 errors\b", run.stderr), run.stderr
