"""Lifecycle of served tools over MCP: list changes, cancellation, timeouts.

The official SDK client drives the server in memory, at both protocol versions.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.server.session import ServerSession

from callgate import Gate, Limits, Principal, Toolbox, ToolContext
from callgate.mcp import build_server
from tests.mcp.serving import audit_of, serve_http
from tests.mcp.tools import ALICE, build_gate

pytestmark = pytest.mark.anyio


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with build_gate() as gate:
        yield gate


def _shop(gate: Gate) -> Toolbox:
    (box,) = [box for box in gate.registry.toolboxes if box.name == "shop"]
    return box


def _add_ping(box: Toolbox) -> None:
    @box.tool(scopes={"orders:read"}, read_only=True, open_world=False)
    def ping() -> str:
        """Answer pong."""
        return "pong"


# -- notifications/tools/list_changed -------------------------------------------------


async def test_legacy_client_is_told_when_a_tool_is_added(gate: Gate) -> None:
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            tools = client.server_capabilities.tools
            assert tools is not None and tools.list_changed is True
            before = {t.name for t in (await client.list_tools()).tools}
            assert "shop__ping" not in before
            _add_ping(_shop(gate))
            await changed.wait()
            after = {t.name for t in (await client.list_tools()).tools}
            assert after == before | {"shop__ping"}
            result = await client.call_tool("shop__ping", {})
            assert not result.is_error


async def test_modern_client_hears_it_on_its_listen_stream(gate: Gate) -> None:
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        # "auto" discovers the server (server/discover) and picks 2026-07-28.
        async with Client(server, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            discovered = client.server_capabilities.tools
            assert discovered is not None and discovered.list_changed is True
            async with client.listen(tools_list_changed=True) as subscription:
                _add_ping(_shop(gate))
                event = await subscription.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
            names = {t.name for t in (await client.list_tools()).tools}
            assert "shop__ping" in names


async def test_a_removed_tool_is_announced_and_gone(gate: Gate) -> None:
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            assert "shop__order_count" in {t.name for t in (await client.list_tools()).tools}
            _shop(gate).remove("order_count")
            await changed.wait()
            names = {t.name for t in (await client.list_tools()).tools}
    assert "shop__order_count" not in names


def _add_many(box: Toolbox, n: int) -> None:
    for i in range(n):

        def fn() -> str:
            """A generated tool."""
            return "x"

        fn.__name__ = f"gen_{i}"
        box.add(fn)


async def test_a_burst_of_changes_is_one_notification(gate: Gate) -> None:
    seen: list[str] = []
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen.append(message.method)
            changed.set()

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            await client.list_tools()  # the handshake is complete
            _add_many(_shop(gate), 5)
            await changed.wait()
            await client.list_tools()  # anything still queued has arrived by now
    assert seen == ["notifications/tools/list_changed"]


async def test_a_change_made_in_another_thread_is_announced(gate: Gate) -> None:
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            await client.list_tools()
            await anyio.to_thread.run_sync(_add_many, _shop(gate), 1)
            await changed.wait()
            assert "shop__gen_0" in {t.name for t in (await client.list_tools()).tools}


async def test_closed_connections_are_forgotten(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    notified: list[ServerSession] = []
    send = ServerSession.send_tool_list_changed

    async def spy(session: ServerSession) -> None:
        notified.append(session)
        await send(session)

    monkeypatch.setattr(ServerSession, "send_tool_list_changed", spy)
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as gone:
            await gone.list_tools()
        async with Client(server, mode="legacy", message_handler=on_message) as staying:
            await staying.list_tools()
            _add_ping(_shop(gate))
            # Connections are told in the order they came: once the one still
            # open has heard, the closed one would have been tried already.
            await changed.wait()
    # After a client left, a change is sent to the clients still connected only.
    assert len(notified) == 1


# -- cancellation ---------------------------------------------------------------------

MODES = ["legacy", "2026-07-28"]


class Slow:
    """Slow async tools that say when they started and whether they were cancelled."""

    def __init__(self, box: Toolbox) -> None:
        self.started = {"slow_read": anyio.Event(), "slow_write": anyio.Event()}
        self.cancelled = anyio.Event()

        @box.tool(scopes={"orders:read"}, read_only=True, open_world=False, timeout=60)
        async def slow_read(seconds: float) -> str:
            """Wait, then answer.

            Args:
                seconds: How long to wait.
            """
            return await self._wait("slow_read", seconds)

        @box.tool(scopes={"orders:write"}, idempotent=False, open_world=False, timeout=60)
        async def slow_write(seconds: float) -> str:
            """Wait, then answer (a side effect).

            Args:
                seconds: How long to wait.
            """
            return await self._wait("slow_write", seconds)

    async def _wait(self, name: str, seconds: float) -> str:
        self.started[name].set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return "done"


async def _cancel_midway(client: Client, slow: Slow, tool: str) -> None:
    """Call ``tool`` and cancel the request once the tool is running."""
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await client.call_tool(tool.replace(".", "__"), {"seconds": 30})

        tg.start_soon(call)
        await slow.started[tool.removeprefix("shop.")].wait()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "outcome"),
    [("shop.slow_read", "transient"), ("shop.slow_write", "unknown_outcome")],
)
async def test_a_cancelled_request_stops_the_tool_and_is_audited(
    gate: Gate, mode: str, tool: str, outcome: str
) -> None:
    slow = Slow(_shop(gate))
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(10):
        async with Client(server, mode=mode) as client:
            await _cancel_midway(client, slow, tool)
            # The SDK cancels the handler (notifications/cancelled at 2025-11-25,
            # the dropped request at 2026-07-28): the tool itself stops.
            await slow.cancelled.wait()
            # The server goes on serving the same client.
            result = await client.call_tool("shop__order_count", {"status": "open"})
            assert result.structured_content == {"result": 7}
        # The record is written before the cancellation goes on.
        records = [r for r in await gate.audit() if r.tool == tool and r.phase == "final"]
    (record,) = records
    assert record.outcome == outcome
    assert record.detail.get("cancelled") is True


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_one_request_leaves_the_others_running(gate: Gate, mode: str) -> None:
    slow = Slow(_shop(gate))
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(10):
        async with Client(server, mode=mode) as client:
            results: list[types.CallToolResult] = []
            async with anyio.create_task_group() as tg:

                async def quick() -> None:
                    results.append(await client.call_tool("shop__slow_read", {"seconds": 0.3}))

                tg.start_soon(quick)
                await _cancel_midway(client, slow, "shop.slow_write")
            (result,) = results
            assert not result.is_error and result.structured_content == {"result": "done"}


# -- timeouts extended by progress ----------------------------------------------------


def _pacing_box() -> Toolbox:
    box = Toolbox("pace")

    @box.tool(read_only=True, open_world=False, timeout=0.6)
    async def steady(steps: int, ctx: ToolContext) -> str:
        """Work in 0.1 s steps, reporting progress after each.

        Args:
            steps: How many steps.
        """
        for step in range(steps):
            await asyncio.sleep(0.1)
            await ctx.report_progress(step + 1, steps)
        return "done"

    @box.tool(read_only=True, open_world=False, timeout=0.6)
    async def silent(seconds: float) -> str:
        """Work without reporting progress.

        Args:
            seconds: How long.
        """
        await asyncio.sleep(seconds)
        return "done"

    @box.tool(read_only=True, open_world=False, timeout=0.6)
    def steady_sync(steps: int, ctx: ToolContext) -> str:
        """Like steady, in a worker thread.

        Args:
            steps: How many steps.
        """
        for step in range(steps):
            time.sleep(0.1)
            ctx.report_progress_sync(step + 1, steps)
        return "done"

    return box


@pytest.fixture
async def paced() -> AsyncIterator[Gate]:
    gate = Gate([_pacing_box()], store="memory://", limits=Limits(max_timeout=1.5))
    async with gate:
        yield gate


PACE = Principal("pat", tenant="acme")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["pace.steady", "pace.steady_sync"])
async def test_progress_extends_the_deadline(mode: str, tool: str) -> None:
    """Eight 0.1 s steps take 0.8 s, more than the 0.6 s timeout, but each
    progress report moves the deadline (0.5 s of slack per step for a loaded CI).
    The hard maximum is far off here, so a stalled loop on a busy machine cannot
    cap the last extensions (the cap has its own test below)."""
    async with Gate([_pacing_box()], store="memory://", limits=Limits(max_timeout=5)) as paced:
        await _progress_extends(paced, mode, tool)


async def _progress_extends(paced: Gate, mode: str, tool: str) -> None:
    server = build_server(paced, principal=PACE)
    reports: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(progress)

    with anyio.fail_after(10):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool(
                tool.replace(".", "__"), {"steps": 8}, progress_callback=on_progress
            )
    assert not result.is_error, result.content
    assert reports == [1, 2, 3, 4, 5, 6, 7, 8]
    (record,) = await paced.audit()
    assert record.outcome == "ok"
    assert record.detail["deadline_extended"] == 8


async def test_without_progress_the_timeout_holds(paced: Gate) -> None:
    server = build_server(paced, principal=PACE)
    with anyio.fail_after(10):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("pace__silent", {"seconds": 1.2})
    assert result.is_error
    assert "0.6 seconds" in "".join(
        block.text for block in result.content if isinstance(block, types.TextContent)
    )


async def test_progress_never_extends_past_the_hard_maximum(paced: Gate) -> None:
    server = build_server(paced, principal=PACE)
    started = anyio.current_time()
    with anyio.fail_after(10):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("pace__steady", {"steps": 100})
    elapsed = anyio.current_time() - started
    assert result.is_error
    # Cut at the 1.5 s hard maximum (not 10 s of steps), and not retried past it.
    assert 1.4 <= elapsed < 3.0
    text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
    assert "1.5 at most" in text
    records = [r for r in await paced.audit() if r.phase == "final"]
    assert records[-1].outcome == "transient"


# -- cancellation over Streamable HTTP, against a real `callgate serve` -----------------

_SLOW_TOOLS = '''
import asyncio

from callgate import Toolbox

box = Toolbox("slow")


@box.tool(idempotent=False, open_world=False, timeout=60)
async def write(seconds: float) -> str:
    """Wait, then answer (a side effect).

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return "done"


@box.tool(read_only=True, open_world=False)
def quick() -> str:
    """Answer at once."""
    return "quick"


@box.tool(open_world=False)
async def grow() -> str:
    """Add a tool to this toolbox."""

    def grown() -> str:
        """A tool added at run time."""
        return "grown"

    box.add(grown)
    return "added"
'''


async def _final_record_within(store: str, seconds: float) -> None:
    for _ in range(int(seconds * 10)):
        if any(r.phase == "final" for r in await audit_of(store)):
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"no final audit record within {seconds:g} seconds")


async def _cancel_once_running(client: Client, store: str) -> None:
    """Call ``slow.write`` and cancel it once its intent record shows it running
    (a fixed delay would cancel it before it starts on a loaded machine)."""
    async with anyio.create_task_group() as group:

        async def call() -> None:
            await client.call_tool("slow__write", {"seconds": 20})

        group.start_soon(call)
        for _ in range(200):
            if any(r.phase == "intent" for r in await audit_of(store)):
                break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("slow.write never started")
        group.cancel_scope.cancel()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_http_cancel_stops_the_call_and_is_audited(tmp_path: Path, mode: str) -> None:
    (tmp_path / "tools.py").write_text(_SLOW_TOOLS)
    config = tmp_path / "callgate.toml"
    config.write_text('toolboxes = ["./tools.py:box"]\n')
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    async with serve_http("--store", store, "--config", str(config)) as (url, process):
        with anyio.fail_after(30):
            async with Client(url, mode=mode) as client:
                # Cancelled at 2025-11-25 with notifications/cancelled, at
                # 2026-07-28 by closing the request's response stream.
                await _cancel_once_running(client, store)
                # The server records the cancelled call promptly, and goes on serving.
                await _final_record_within(store, 10)
                result = await client.call_tool("slow__quick", {})
                assert result.structured_content == {"result": "quick"}
    assert process.returncode == 0
    writes = [r for r in await audit_of(store) if r.tool == "slow.write"]
    assert [r.phase for r in writes] == ["intent", "final"]
    assert writes[1].outcome == "unknown_outcome"
    assert writes[1].detail.get("cancelled") is True


async def test_only_tool_list_changes_are_advertised(gate: Gate) -> None:
    @_shop(gate).resource("note://x")
    def note() -> str:
        """A note (so that resources are served)."""
        return "x"

    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="auto") as client:
            capabilities = client.server_capabilities
    assert capabilities.tools is not None and capabilities.tools.list_changed is True
    assert capabilities.resources is not None
    assert not capabilities.resources.list_changed and not capabilities.resources.subscribe


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_http_clients_are_told_of_list_changes(tmp_path: Path, mode: str) -> None:
    (tmp_path / "tools.py").write_text(_SLOW_TOOLS)
    config = tmp_path / "callgate.toml"
    config.write_text('toolboxes = ["./tools.py:box"]\n')
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with serve_http("--store", store, "--config", str(config)) as (url, _):
        with anyio.fail_after(30):
            connect = "legacy" if mode == "legacy" else "auto"
            async with Client(url, mode=connect, message_handler=on_message) as client:
                assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
                tools = client.server_capabilities.tools
                assert tools is not None and tools.list_changed is True
                if mode == "legacy":
                    await client.list_tools()  # the session is initialized
                    await client.call_tool("slow__grow", {})
                    await changed.wait()
                else:
                    async with client.listen(tools_list_changed=True) as subscription:
                        await client.call_tool("slow__grow", {})
                        event = await subscription.__anext__()
                        assert type(event).__name__ == "ToolsListChanged"
                names = {t.name for t in (await client.list_tools()).tools}
    assert "slow__grown" in names


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_stdio_cancel_stops_the_call_and_is_audited(tmp_path: Path, mode: str) -> None:
    (tmp_path / "tools.py").write_text(_SLOW_TOOLS)
    config = tmp_path / "callgate.toml"
    config.write_text('toolboxes = ["./tools.py:box"]\n')
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    args = ["-m", "callgate", "serve", "--stdio", "--store", store, "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=args)
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            await _cancel_once_running(client, store)
            await _final_record_within(store, 10)
            result = await client.call_tool("slow__quick", {})
            assert result.structured_content == {"result": "quick"}
    writes = [r for r in await audit_of(store) if r.tool == "slow.write"]
    assert [r.phase for r in writes] == ["intent", "final"]
    assert writes[1].outcome == "unknown_outcome"
    assert writes[1].detail.get("cancelled") is True
