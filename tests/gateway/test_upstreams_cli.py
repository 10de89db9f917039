"""``callgate upstreams`` and the upstreams in ``callgate serve``'s start-up summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from typer.testing import CliRunner

from callgate.cli.app import app
from tests.mcp.serving import serve_http

STUB = Path(__file__).with_name("stub_server.py")


def config(tmp_path: Path, *, broken: bool = False) -> Path:
    text = (
        f'[[upstreams]]\nname = "stub"\ncommand = "{sys.executable}"\n'
        f'args = ["{STUB}", "{tmp_path / "log"}"]\nstartup_wait = 20\n'
        '[upstreams.tools.echo]\nrename = "say"\nrisk = "read"\n'
    )
    if broken:
        text += (
            f'[[upstreams]]\nname = "gone"\ncommand = "{tmp_path / "nothing"}"\nstartup_wait = 1\n'
        )
    path = tmp_path / "gw.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_upstreams_shows_state_protocol_and_tools(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'probe.db'}"
    result = CliRunner().invoke(
        app, ["upstreams", "-c", str(config(tmp_path)), "--json", "--store", store]
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert report["name"] == "stub" and report["state"] == "ready"
    assert report["transport"] == "stdio" and report["trust"] == "untrusted"
    assert report["protocol"] in ("2025-11-25", "2026-07-28")
    assert "stub.say" in report["tools"] and "stub.echo" not in report["tools"]
    assert report["last_error"] is None


def test_a_down_upstream_is_shown_with_its_error_and_exits_1(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'probe.db'}"
    result = CliRunner().invoke(
        app,
        ["upstreams", "-c", str(config(tmp_path, broken=True)), "--store", store],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 1, result.output
    assert "gone" in result.stdout and "down" in result.stdout
    assert "No such file" in result.stdout or "FileNotFoundError" in result.stdout
    assert "stub" in result.stdout and "ready" in result.stdout


def test_a_config_without_upstreams_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("")
    result = CliRunner().invoke(app, ["upstreams", "-c", str(path)])
    assert result.exit_code == 2
    assert "has no [[upstreams]]" in result.output


@pytest.mark.slow
@pytest.mark.anyio
async def test_serve_lists_upstreams_and_serves_their_tools(tmp_path: Path) -> None:
    args = ("-c", str(config(tmp_path)), "--store", f"sqlite:///{tmp_path / 's.db'}")
    async with serve_http(*args) as (url, _process):
        for mode in ("legacy", "auto"):
            async with Client(url, mode=mode) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert "stub__say" in tools
                result = await client.call_tool("stub__say", {"text": "hi"})
                assert not result.is_error
                assert result.structured_content == {"result": "hi"}


@pytest.mark.anyio
async def test_upstreams_counts_the_calls_and_failures_the_audit_holds(tmp_path: Path) -> None:
    from callgate import Principal
    from callgate.config import load_config

    store = f"sqlite:///{tmp_path / 'gw.db'}"
    path = config(tmp_path)
    alice = Principal("alice", tenant="acme")
    async with load_config(path).build_gate(store) as gate:
        for text in ("a", "b"):
            assert (await gate.call("stub.say", {"text": text}, principal=alice)).ok
        failed = await gate.call("stub.fail", {"reason": "no"}, principal=alice)
        assert failed.error is not None
    result = await anyio.to_thread.run_sync(
        lambda: CliRunner().invoke(app, ["upstreams", "-c", str(path), "--store", store, "--json"])
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert (report["calls"], report["failures"]) == (3, 1)
