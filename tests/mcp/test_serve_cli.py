"""``callgate serve`` options: who the calls are made for, and failures to start."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from typer.testing import CliRunner

from callgate import Gate
from callgate.cli.app import app


def test_port_in_use_is_a_cli_error(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app, ["serve", "--port", str(port), "--store", f"sqlite:///{tmp_path / 'x.db'}"]
        )
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output


@pytest.mark.anyio
@pytest.mark.slow
async def test_principal_options_decide_tools_and_audit(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    args = ["-m", "callgate", "serve", "--stdio", "--store", store]
    args += ["--principal", "bob", "--tenant", "globex", "--scopes", "notes:read"]
    params = StdioServerParameters(command=sys.executable, args=args)
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            denied = await client.call_tool("ops.campaigns_find", {"query": "autumn"})
    assert "ops.notes_search" in names
    assert "ops.campaigns_find" not in names
    assert denied.is_error
    async with Gate([], store=store) as gate:
        (record,) = await gate.audit()
    assert (record.user, record.tenant, record.outcome) == ("bob", "globex", "permission")
