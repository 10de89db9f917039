"""The runner's limits against tool code that misbehaves: hangs, bursts, ignored
cancellation, a blocked event loop; the same limits for change helpers and reads."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from mcp import Client, MCPError

from callgate import ErrorKind, Gate, Limits, Toolbox, ToolContext
from callgate.cli.audit_view import summarize
from callgate.mcp import build_server
from callgate.runtime.envelope import Envelope
from callgate.store import MemoryStore

from .conftest import ALICE

pytestmark = pytest.mark.anyio

CAP = 8  # the runner's default worker threads per tool
HOLDERS = 40  # as many as the gate's threads in all


class Hung:
    """A sync function's body that blocks until released, counting its runs."""

    def __init__(self, target: int = 0) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started = 0
        self.running = 0
        self.most_at_once = 0
        self.target = target
        self.reached = threading.Event()
        """Set once ``target`` calls have started."""

    def __call__(self) -> None:
        with self.lock:
            self.started += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            if self.started >= self.target:
                self.reached.set()
        try:
            self.release.wait(10)
        finally:
            with self.lock:
                self.running -= 1


async def burst(n: int, call: Callable[[], Awaitable[Envelope]]) -> list[Envelope]:
    answers: list[Envelope] = []

    async def one() -> None:
        answers.append(await call())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
    return answers


def gate_for(box: Toolbox, **limits: float) -> Gate:
    return Gate([box], store=MemoryStore(), limits=Limits(max_attempts=1, **limits))  # type: ignore[arg-type]


async def test_calls_that_time_out_queued_do_not_lock_the_tool_out() -> None:
    hung = Hung(target=CAP)
    box = Toolbox("h")

    @box.tool(read_only=True, timeout=5)
    def slow(n: int) -> int:
        """Waits for the release."""
        hung()
        return n

    async with gate_for(box) as gate:
        holders: list[Envelope] = []

        async def hold() -> None:
            holders.append(await gate.call("h.slow", {"n": 1}, principal=ALICE))

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    # more holders than the gate has threads: the tool's slots are
                    # taken, and so would be a gate-wide pool's
                    for _ in range(HOLDERS):
                        tg.start_soon(hold)
                    await anyio.to_thread.run_sync(hung.reached.wait, 5)
                    # these wait in the queue, and time out there
                    queued = await burst(
                        42, lambda: gate.call("h.slow", {"n": 2}, principal=ALICE, timeout=0.2)
                    )
                    hung.release.set()
        finally:
            hung.release.set()
        with anyio.fail_after(10):
            await gate.runner.wait_released("h.slow")
        after = await gate.call("h.slow", {"n": 7}, principal=ALICE)
    assert hung.started == HOLDERS + 1  # the holders, then the call after the burst
    assert all(h.ok and h.payload == 1 for h in holders)
    for env in queued:
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        assert "nothing was done" in env.error.message_for_model and env.error.retryable
    assert after.ok and after.payload == 7
    assert gate.runner.stuck("h.slow") == 0 and gate.runner.threads("h.slow") == 0


async def test_a_burst_of_hanging_calls_never_holds_more_threads_than_the_cap() -> None:
    hung = Hung()
    box = Toolbox("h")

    @box.tool(timeout=0.2)
    def hang() -> None:
        """Waits for the release."""
        hung()

    async with gate_for(box) as gate:
        try:
            answers = await burst(60, lambda: gate.call("h.hang", {}, principal=ALICE))
            held = gate.runner.threads("h.hang")
            stuck = gate.runner.stuck("h.hang")
            refused = await gate.call("h.hang", {}, principal=ALICE)
        finally:
            hung.release.set()
        with anyio.fail_after(10):
            await gate.runner.wait_released("h.hang")
    assert hung.most_at_once == CAP and hung.started == CAP
    assert held == stuck == CAP
    assert len(answers) == 60
    # the ones that ran may have written: unknown; the others are told nothing happened
    kinds = {a.error.kind for a in answers if a.error is not None}
    assert kinds == {ErrorKind.UNKNOWN_OUTCOME, ErrorKind.TRANSIENT}
    assert refused.error is not None and "not responding" in refused.error.message_for_model
    assert f"{CAP} earlier calls" in refused.error.message_for_model


def stubborn_box(finish: asyncio.Event, effects: list[str], *, timeout: float) -> Toolbox:
    box = Toolbox("s")

    async def ignore_cancellation(name: str) -> str:
        ignored = 0
        while not finish.is_set():
            try:
                await finish.wait()
            except asyncio.CancelledError:
                ignored += 1
                if ignored > 100:  # a caller that cancels again and again: stop spinning
                    raise
                effects.append(f"{name}: cancel ignored")
        effects.append(f"{name}: done")
        return "written"

    @box.tool(idempotent=False, timeout=timeout)
    async def write() -> str:
        """Writes, whatever it is told."""
        return await ignore_cancellation("write")

    @box.tool(read_only=True, timeout=timeout)
    async def read() -> str:
        """Reads, whatever it is told."""
        return await ignore_cancellation("read")

    return box


async def test_an_async_write_that_ignores_cancellation_answers_at_the_hard_maximum() -> None:
    finish = asyncio.Event()
    effects: list[str] = []
    # the tool asks for 5 s; the gate's hard maximum is 0.3 s
    async with gate_for(stubborn_box(finish, effects, timeout=5), max_timeout=0.3) as gate:
        with anyio.fail_after(5):
            env = await gate.call("s.write", {}, principal=ALICE)
        seen_when_answered = list(effects)
        stuck_meanwhile = gate.runner.stuck("s.write")
        finish.set()
        with anyio.fail_after(5):
            await gate.runner.wait_released("s.write")
        records = await gate.audit(call_id=env.call_id)
    assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert seen_when_answered == ["write: cancel ignored"]  # still running, not done
    assert stuck_meanwhile == 1
    assert effects[-1] == "write: done"
    assert [r.phase for r in records] == ["intent", "final", "late"]
    final, late = records[1], records[2]
    assert final.outcome == "unknown_outcome"
    assert late.outcome == "ok" and late.status == "ok"
    assert late.detail["late"]["ran_as"] == "task" and late.detail["late"]["ended"] == "returned"
    assert gate.runner.stuck("s.write") == 0
    # `callgate audit` still shows the call's outcome, not how the stray work ended
    assert [c.outcome for c in summarize(records)] == ["unknown_outcome"]


async def test_an_async_read_that_ignores_cancellation_is_transient_and_counts_as_stuck() -> None:
    finish = asyncio.Event()
    effects: list[str] = []
    async with gate_for(stubborn_box(finish, effects, timeout=0.05)) as gate:
        try:
            with anyio.fail_after(10):
                answers = [await gate.call("s.read", {}, principal=ALICE) for _ in range(CAP + 1)]
            stuck = gate.runner.stuck("s.read")
        finally:
            finish.set()
        with anyio.fail_after(5):
            await gate.runner.wait_released("s.read")
        late = [r for r in await gate.audit() if r.phase == "late"]
    assert all(a.error is not None and a.error.kind is ErrorKind.TRANSIENT for a in answers)
    assert all(a.timing is not None and a.timing.attempts == 1 for a in answers)  # no retry
    assert stuck == CAP
    last = answers[-1].error
    assert last is not None and f"not responding: {CAP} earlier calls" in last.message_for_model
    assert effects.count("read: done") == CAP  # the refused call never started
    assert len(late) == CAP and {r.outcome for r in late} == {"ok"}


async def test_an_async_tool_that_blocks_the_loop_is_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    box = Toolbox("b")

    @box.tool(read_only=True)
    async def blocker() -> str:
        """Blocks the event loop (what a sync tool is for)."""
        time.sleep(0.3)  # noqa: ASYNC251  (the misbehaviour under test)
        return "done"

    @box.tool(read_only=True)
    async def polite() -> str:
        """Awaits."""
        await asyncio.sleep(0)
        return "done"

    caplog.set_level(logging.WARNING, logger="callgate.runtime.loopwatch")
    async with gate_for(box) as gate:
        blocked = await gate.call("b.blocker", {}, principal=ALICE)
        fine = await gate.call("b.polite", {}, principal=ALICE)
        records = {r.call_id: r for r in await gate.audit()}
    assert blocked.ok and fine.ok
    assert records[blocked.call_id].detail["blocked_loop_ms"] >= 200
    assert "blocked_loop_ms" not in records[fine.call_id].detail
    assert gate.runner.watch.blocking == {"b.blocker": 1}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "b.blocker" in warnings[0] and "sync tool" in warnings[0]


async def test_the_watchdog_names_the_async_tools_running_when_the_loop_stalls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    box = Toolbox("b")

    @box.tool(read_only=True)
    async def spawner() -> str:
        """Blocks the loop from a task of its own (not one of the tool's own steps)."""
        await asyncio.get_running_loop().create_task(_block(0.5))
        return "done"

    caplog.set_level(logging.WARNING, logger="callgate.runtime.loopwatch")

    def warned() -> bool:
        warnings = [r.getMessage() for r in caplog.records]
        return any("outside the steps of async tools" in w and "b.spawner" in w for w in warnings)

    async with gate_for(box) as gate:
        with anyio.fail_after(5):
            env = await gate.call("b.spawner", {}, principal=ALICE)
        # The watchdog notices at its next tick, once the loop runs again.
        for _ in range(100):
            if warned():
                break
            await anyio.sleep(0.01)
    assert env.ok
    assert warned()


async def test_gates_on_one_loop_report_its_stall_once_naming_the_tools_of_both(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An eval runs a gate a task on one loop: a stall is the loop's, logged once."""
    first, second = Toolbox("a"), Toolbox("b")
    started = asyncio.Event()

    @first.tool(read_only=True)
    async def spawner() -> str:
        """Blocks the loop from a task of its own, once the other gate's tool runs."""
        await started.wait()
        await asyncio.get_running_loop().create_task(_block(0.5))
        return "done"

    @second.tool(read_only=True)
    async def waiter() -> str:
        """Awaits through the stall."""
        started.set()
        await asyncio.sleep(0.8)
        return "done"

    caplog.set_level(logging.WARNING, logger="callgate.runtime.loopwatch")
    async with gate_for(first) as one, gate_for(second) as two:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: one.call("a.spawner", {}, principal=ALICE))
                tg.start_soon(lambda: two.call("b.waiter", {}, principal=ALICE))
        await anyio.sleep(0.3)  # both watchdogs have ticked since
    stalls = [r.getMessage() for r in caplog.records if "outside the steps" in r.getMessage()]
    assert len(stalls) == 1, stalls
    assert "a.spawner" in stalls[0] and "b.waiter" in stalls[0]


async def _block(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251  (the misbehaviour under test)


def change_box(hung: Hung, seen: list[datetime]) -> Toolbox:
    box = Toolbox("c")
    limit = box.change("limit", ttl=600, destructive=False, timeout=0.2)

    @limit.preview
    def preview(account: str, ctx: ToolContext) -> dict[str, int]:
        """Preview a new limit."""
        seen.append(ctx.deadline)
        return {"after": 1}

    @limit.apply
    def apply(account: str) -> dict[str, int]:
        """Set it (hangs)."""
        hung()
        return {"after": 1}

    @limit.verify
    def verify(account: str) -> bool:
        """Whether it is in effect (hangs)."""
        hung()
        return True

    return box


async def test_change_helpers_run_under_the_tools_deadline_and_cap() -> None:
    hung = Hung()
    seen: list[datetime] = []
    async with gate_for(change_box(hung, seen)) as gate:
        try:
            pv = await gate.call("c.limit_preview", {"account": "A"}, principal=ALICE)
            applying = datetime.now(UTC)
            applied = await gate.call(
                "c.limit_apply", {"preview_id": pv.payload["preview_id"]}, principal=ALICE
            )
            with anyio.fail_after(10):
                statuses = [
                    await gate.call(
                        "c.limit_status",
                        {"preview_id": pv.payload["preview_id"]},
                        principal=ALICE,
                        timeout=0.2,
                    )
                    for _ in range(CAP + 1)
                ]
            verifying = gate.runner.stuck("c.limit_verify")
        finally:
            hung.release.set()
        with anyio.fail_after(10):
            await gate.runner.wait_released("c.limit_verify")
    # the preview run again before applying is told the apply's deadline, not 30 s
    assert len(seen) == 2 and seen[1] - applying < timedelta(seconds=5)
    assert applied.error is not None and applied.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert hung.started == 1 + CAP  # the apply, then the verifier up to its cap
    assert verifying == CAP
    assert all(s.error is not None and s.error.kind is ErrorKind.TRANSIENT for s in statuses)
    assert "not responding" in statuses[-1].error.message_for_model  # type: ignore[union-attr]


async def test_a_hung_resource_read_answers_at_the_gate_timeout_and_is_capped() -> None:
    hung = Hung()
    box = Toolbox("r")

    @box.resource("slow://data")
    def data() -> str:
        """Hangs."""
        hung()
        return "data"

    try:
        async with gate_for(box, default_timeout=0.2) as gate:
            async with Client(build_server(gate, principal=ALICE)) as client:
                errors: list[str] = []
                for _ in range(CAP + 1):
                    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
                        await client.read_resource("slow://data")
                    errors.append(str(caught.value))
            hung.release.set()
            with anyio.fail_after(10):
                await gate.runner.wait_released("resource:slow://data")
            records = await gate.audit()
    finally:
        hung.release.set()
    assert all("took too long" in e for e in errors[:CAP])
    assert "not responding" in errors[CAP]
    assert hung.started == CAP
    late = [r for r in records if r.phase == "late"]
    assert len(late) == CAP and {r.tool for r in late} == {"resource:slow://data"}
    assert {r.outcome for r in late} == {"ok"}


async def test_work_still_running_when_the_gate_closes_is_recorded_as_such() -> None:
    hung = Hung()
    finish = asyncio.Event()
    box = stubborn_box(finish, [], timeout=0.05)

    @box.resource("slow://data")
    def data() -> str:
        """Hangs."""
        hung()
        return "data"

    gate = gate_for(box, default_timeout=0.2)
    try:
        async with gate:
            with anyio.fail_after(5):
                env = await gate.call("s.write", {}, principal=ALICE)
            async with Client(build_server(gate, principal=ALICE)) as client:
                with anyio.fail_after(5), pytest.raises(MCPError):
                    await client.read_resource("slow://data")
        records = await gate.store.list_audit()
    finally:
        hung.release.set()
        finish.set()
    late = {r.tool: r for r in records if r.phase == "late"}
    assert set(late) == {"s.write", "resource:slow://data"}
    assert late["s.write"].call_id == env.call_id and late["s.write"].outcome is None
    for record in late.values():
        assert record.detail["late"]["ended"] == "running at close"


async def test_a_hung_prompt_answers_at_the_gate_timeout() -> None:
    hung = Hung()
    box = Toolbox("p")

    @box.prompt()
    def stuck() -> str:
        """Hangs."""
        hung()
        return "never"

    try:
        async with gate_for(box, default_timeout=0.2) as gate:
            async with Client(build_server(gate, principal=ALICE)) as client:
                with anyio.fail_after(5), pytest.raises(MCPError) as caught:
                    await client.get_prompt("stuck")
            held = gate.runner.stuck("prompt:stuck")
    finally:
        hung.release.set()
    assert "took too long" in str(caught.value)
    assert held == 1


async def test_the_thread_caps_are_limits_of_the_gate() -> None:
    hung = Hung(target=2)
    box = Toolbox("h")

    @box.tool(read_only=True, timeout=5)
    def slow(n: int) -> int:
        """Waits for the release."""
        hung()
        return n

    async with gate_for(box, tool_threads=2, max_threads=3) as gate:
        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    answers: list[Envelope] = []

                    async def one(n: int) -> None:
                        answers.append(await gate.call("h.slow", {"n": n}, principal=ALICE))

                    for n in range(5):
                        tg.start_soon(one, n)
                    await anyio.to_thread.run_sync(hung.reached.wait, 5)
                    held = gate.runner.threads("h.slow")
                    hung.release.set()
        finally:
            hung.release.set()
    assert held == 2 and hung.most_at_once == 2
    assert sorted(a.payload for a in answers) == [0, 1, 2, 3, 4]  # the rest waited, then ran
    with pytest.raises(ValueError, match="tool_threads"):
        Limits(tool_threads=5, max_threads=4)
