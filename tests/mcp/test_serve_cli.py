"""``callgate serve`` options: who the calls are made for, and failures to start."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
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
            denied = await client.call_tool("ops__campaigns_find", {"query": "autumn"})
    assert "ops__notes_search" in names
    assert "ops__campaigns_find" not in names
    assert denied.is_error
    async with Gate([], store=store) as gate:
        (record,) = await gate.audit()
    assert (record.user, record.tenant, record.outcome) == ("bob", "globex", "permission")


_TOOLS = '''
from callgate import Toolbox

long_box = Toolbox("warehouse_inventory")


@long_box.tool(read_only=True)
def reconcile_every_bin_in_every_aisle_of_the_warehouse() -> str:
    """Reconcile."""
    return "ok"


a_b = Toolbox("a_b")


@a_b.tool(read_only=True)
def c() -> str:
    """C."""
    return "c"


a = Toolbox("a")


@a.tool(read_only=True)
def b_c() -> str:
    """B C."""
    return "bc"


shop = Toolbox("shop")


@shop.tool(read_only=True)
def order_get(order_id: str) -> str:
    """Get an order."""
    return order_id
'''


def _config(tmp_path: Path, toolboxes: str, mcp: str = "") -> Path:
    (tmp_path / "tools.py").write_text(_TOOLS)
    config = tmp_path / "callgate.toml"
    config.write_text(f'store = "memory://"\ntoolboxes = [{toolboxes}]\n{mcp}')
    return config


def test_a_name_too_long_for_hosts_stops_serve_at_start(tmp_path: Path) -> None:
    config = _config(tmp_path, '"./tools.py:long_box"')
    result = CliRunner().invoke(app, ["serve", "--config", str(config), "--stdio"])
    assert result.exit_code == 2
    assert "would be served as 'warehouse_inventory__reconcile_every" in result.output
    assert "hosts accept at most 64" in result.output


@pytest.mark.parametrize(
    ("mcp", "option"),
    [("", ["--tool-separator", "_"]), ('[mcp]\ntool_separator = "_"\n', [])],
)
def test_an_ambiguous_separator_stops_serve_at_start(
    tmp_path: Path, mcp: str, option: list[str]
) -> None:
    config = _config(tmp_path, '"./tools.py:a_b", "./tools.py:a"', mcp)
    result = CliRunner().invoke(app, ["serve", "--config", str(config), "--stdio", *option])
    assert result.exit_code == 2
    assert "would both be served as 'a_b_c'" in result.output


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_config_chooses_the_separator(tmp_path: Path) -> None:
    config = _config(tmp_path, '"./tools.py:shop"', '[mcp]\ntool_separator = "."\n')
    args = ["-m", "callgate", "serve", "--stdio", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=args)
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("shop.order_get", {"order_id": "O-1"})
    assert names == {"shop.order_get", "callgate.read_more", "callgate.approval_status"}
    assert not result.is_error


@pytest.mark.anyio
async def test_accepted_connections_send_without_waiting_for_acks() -> None:
    """Nagle's algorithm is off on every connection ``callgate serve`` accepts:
    with it on, each kept-alive response (headers and body written apart) waits
    for the client's delayed ACK, about 40 ms, and throughput falls to ~20/s."""
    from callgate.cli.serve import listen, serving

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = serving(app)
    with sock, anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            # Already listening: a connection waits in the backlog until uvicorn accepts.
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            async with httpx.AsyncClient() as http:
                for _ in range(2):  # kept alive: the same connection answers twice
                    assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ok"
                flags = [
                    conn.transport.get_extra_info("socket").getsockopt(
                        socket.IPPROTO_TCP, socket.TCP_NODELAY
                    )
                    for conn in server.server_state.connections
                ]
            server.should_exit = True
    assert flags and all(flags), flags


def test_server_logs_go_to_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-line handler is installed once per process; a stream it was made
    with and that is closed since (a test runner's) must not break later logs."""
    import io
    import logging

    from callgate.cli import serve as serve_cli

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    serve_cli._one_line_logs()
    first.close()
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)
    logging.getLogger("callgate.test").warning("the loop stalled")
    assert "the loop stalled" in later.getvalue()
    assert "Logging error" not in later.getvalue()
