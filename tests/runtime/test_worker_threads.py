"""Sync tools in the runner's worker threads: what any AnyIO worker thread offers
holds in them, call after call, and a caller who gives up still stops what the
tool started on the loop."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

from callgate import ErrorKind, Gate, Limits, Toolbox
from callgate.store import MemoryStore

from .conftest import ALICE

pytestmark = pytest.mark.anyio

REQUEST = contextvars.ContextVar("request", default="none")


def gate_for(box: Toolbox) -> Gate:
    return Gate([box], store=MemoryStore(), limits=Limits(max_attempts=1))


async def late_records(gate: Gate, tool: str) -> list[dict[str, object]]:
    with anyio.fail_after(5):
        await gate.runner.wait_released(tool)
    return [r.detail["late"] for r in await gate.store.list_audit() if r.phase == "late"]


async def test_what_a_sync_tool_started_on_the_loop_is_cancelled_when_its_caller_gives_up() -> None:
    box = Toolbox("t")

    @box.tool(read_only=True, timeout=0.2)
    def waits_on_the_loop() -> None:
        """Waits for an event on the loop that never comes."""
        anyio.from_thread.run(anyio.sleep_forever)

    async with gate_for(box) as gate:
        with anyio.fail_after(5):
            env = await gate.call("t.waits_on_the_loop", {}, principal=ALICE)
        late = await late_records(gate, "t.waits_on_the_loop")
        after = await gate.call("t.waits_on_the_loop", {}, principal=ALICE, timeout=0.1)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    # Its thread did not hang on: the wait was cancelled and the tool ended.
    assert [entry["ended"] for entry in late] == ["raised"]
    assert after.error is not None and after.error.kind is ErrorKind.TRANSIENT


async def test_a_sync_tool_can_see_that_its_caller_gave_up() -> None:
    box = Toolbox("t")
    checks: list[int] = []

    @box.tool(read_only=True, timeout=0.2)
    def polite() -> None:
        """Works in small steps and stops once nobody waits."""
        while True:
            anyio.from_thread.check_cancelled()
            checks.append(1)
            time.sleep(0.01)

    async with gate_for(box) as gate:
        with anyio.fail_after(5):
            env = await gate.call("t.polite", {}, principal=ALICE)
        late = await late_records(gate, "t.polite")
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert [entry["ended"] for entry in late] == ["raised"] and checks


async def test_each_call_runs_in_its_own_callers_context() -> None:
    box = Toolbox("t")

    @box.tool(read_only=True)
    def whose() -> str:
        """Names the request it runs for, then spoils the variable for later calls."""
        seen = REQUEST.get()
        REQUEST.set("spoiled")
        return seen

    async def call_as(request: str, gate: Gate) -> str:
        REQUEST.set(request)
        env = await gate.call("t.whose", {}, principal=ALICE)
        assert env.ok
        return str(env.payload)

    async with gate_for(box) as gate:
        first = await call_as("first", gate)
        second = await call_as("second", gate)  # the same worker thread, another caller
        together: list[str] = []

        async def one(request: str) -> None:
            together.append(await call_as(request, gate))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for name in ("a", "b", "c"):
                    tg.start_soon(one, name)
    assert (first, second) == ("first", "second")
    assert sorted(together) == ["a", "b", "c"]
    assert REQUEST.get() == "second"  # the tool's own change stayed in its copy


async def test_sync_tools_run_again_once_a_closed_gate_is_opened_again() -> None:
    box = Toolbox("t")

    @box.tool(read_only=True)
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    gate = gate_for(box)
    async with gate:
        first = await gate.call("t.double", {"n": 1}, principal=ALICE)
    async with gate:
        with anyio.fail_after(5):
            again = await gate.call("t.double", {"n": 2}, principal=ALICE)
    assert first.payload == 2 and again.payload == 4


async def test_closing_the_last_gate_of_a_loop_lets_its_workers_go() -> None:
    # A loop closed right after its gates must find no worker task still pending
    # ("Task was destroyed but it is pending!").
    box = Toolbox("t")

    @box.tool(read_only=True)
    def ping() -> str:
        """Answers pong."""
        return "pong"

    def hosts() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "callgate worker thread"]

    first, second = gate_for(box), gate_for(box)
    async with first:
        async with second:
            await second.call("t.ping", {}, principal=ALICE)
        # The loop's workers outlive one gate: the other still uses them.
        assert len(hosts()) == 1
        await first.call("t.ping", {}, principal=ALICE)
    assert hosts() == []


EXITS = """
import asyncio
from callgate import Gate, Principal, Toolbox
from callgate.runtime import workers
from callgate.store import MemoryStore

workers.IDLE = 3600.0  # an idle worker would otherwise wait an hour for its next call
box = Toolbox("ops")


@box.tool(read_only=True, open_world=False)
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"


async def main() -> None:
    gate = Gate([box], store=MemoryStore())
    print((await gate.call("ops.ping", {}, principal=Principal("a", tenant="t"))).payload)


# The loop is neither closed nor are its tasks cancelled: its workers stay idle.
asyncio.new_event_loop().run_until_complete(main())
"""


@pytest.mark.slow
def test_an_idle_worker_does_not_hold_the_interpreter_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(EXITS)
    # A hang is the failure this guards against: the bound only ends the test.
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pong"]
