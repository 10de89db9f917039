"""What the Gate offers other packages: its tools, toolboxes, scopes, tasks and runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from callgate import Gate, Principal, Toolbox, ToolContext
from callgate.contract import LogLevel
from callgate.store import MemoryStore
from callgate.store.base import RunRecord, TaskRecord

pytestmark = pytest.mark.anyio


def _boxes() -> list[Toolbox]:
    box = Toolbox("ops")

    @box.tool(scopes={"deploy:read"}, read_only=True, open_world=False)
    def status(deploy_id: str) -> str:
        """Show a deployment."""
        return deploy_id

    @box.resource("ops://notes", scopes={"notes:read"})
    def notes() -> str:
        """The notes."""
        return "notes"

    @box.prompt(scopes={"prompts:use"})
    def summary() -> str:
        """Summarize."""
        return "Summarize."

    return [box]


def test_tools_are_found_by_full_name_and_toolboxes_in_name_order() -> None:
    gate = Gate(_boxes(), store=MemoryStore())

    spec = gate.tool("ops.status")
    assert spec is not None and spec.scopes == {"deploy:read"}
    assert gate.tool("ops.nothing") is None
    assert [box.name for box in gate.toolboxes] == ["callgate", "ops"]


def test_required_scopes_cover_tools_resources_and_prompts() -> None:
    gate = Gate(_boxes(), store=MemoryStore())

    assert gate.required_scopes() == {"deploy:read", "notes:read", "prompts:use"}


async def test_tasks_and_runs_are_kept_in_the_gates_store() -> None:
    store = MemoryStore()
    async with Gate(_boxes(), store=store) as gate:
        at = datetime.now(UTC)
        tasks = await gate.tasks()
        await tasks.create_task(
            TaskRecord(
                id="t1",
                tool="ops.status",
                user="alice",
                tenant="acme",
                owner="me",
                created_at=at,
                updated_at=at,
                expires_at=at + timedelta(hours=1),
            )
        )
        runs = await gate.runs()
        await runs.save_run(
            RunRecord(
                id="run_1",
                user="alice",
                tenant="acme",
                status="completed",
                created_at=at,
                updated_at=at,
                state={},
            )
        )

        task = await store.get_task("t1")
        run = await store.get_run("run_1")
        assert task is not None and task.tool == "ops.status"
        assert run is not None and run.status == "completed"
        assert gate.store_url == store.url


class _Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(("progress", f"{progress:g}/{total:g}"))

    async def log(self, level: LogLevel, message: str, data: object) -> None:
        self.seen.append((level, message))


def test_call_sync_delivers_progress_and_logs_to_the_sink() -> None:
    box = Toolbox("work")

    @box.tool(read_only=True, open_world=False)
    async def crunch(ctx: ToolContext) -> str:
        """Crunch numbers."""
        await ctx.report_progress(1, 2)
        await ctx.log("info", "halfway")
        return "done"

    sink = _Sink()
    with Gate([box], store=MemoryStore()) as gate:
        envelope = gate.call_sync("work.crunch", {}, principal=Principal("alice"), sink=sink)

    assert envelope.payload == "done"
    assert sink.seen == [("progress", "1/2"), ("info", "halfway")]


def test_a_toolbox_served_in_turn_keeps_no_registry_alive_and_each_sees_new_tools() -> None:
    """A module-level toolbox served by one gate after another (a gate a request,
    an eval's gate a run) held every registry it was ever in: the registry listens
    for the toolbox's changes, and a bound method kept it alive."""
    import weakref

    from callgate.runtime.registry import Registry

    box = Toolbox("shared")

    @box.tool(read_only=True, open_world=False)
    def first() -> str:
        """The first tool."""
        return "1"

    live = Registry([box])
    gone = weakref.ref(Registry([box]))  # freed at once: nothing cyclic holds it

    @box.tool(read_only=True, open_world=False)
    def second() -> str:
        """Added while served."""
        return "2"

    assert gone() is None
    assert live.get("shared.second") is not None
