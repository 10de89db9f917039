"""Tasks in the store: created once, ended once, abandoned when their process died."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from callgate.store import Store
from callgate.store.base import TaskRecord

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def make_task(**fields: Any) -> TaskRecord:
    values: dict[str, Any] = {
        "id": "task-1",
        "tool": "ops.slow",
        "user": "alice",
        "tenant": "acme",
        "owner": "proc-a",
        "created_at": NOW,
        "updated_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
    }
    values.update(fields)
    return TaskRecord(**values)


async def test_a_task_is_kept_and_read_back(store: Store) -> None:
    await store.create_task(make_task())

    got = await store.get_task("task-1")

    assert got == make_task()
    assert await store.get_task("task-2") is None


async def test_a_task_id_is_taken_once(store: Store) -> None:
    await store.create_task(make_task())
    with pytest.raises(ValueError, match="exists already"):
        await store.create_task(make_task(tool="ops.other"))


async def test_a_task_ends_once_with_its_result(store: Store) -> None:
    await store.create_task(make_task())
    result = {"content": [{"type": "text", "text": "done"}], "isError": False}
    later = NOW + timedelta(seconds=5)

    assert await store.finish_task(
        "task-1", status="completed", at=later, call_id="call-1", result=result
    )
    assert not await store.finish_task("task-1", status="cancelled", at=later)
    assert not await store.finish_task("no-such-task", status="cancelled", at=later)

    got = await store.get_task("task-1")
    assert got is not None
    assert (got.status, got.result, got.call_id, got.updated_at) == (
        "completed",
        result,
        "call-1",
        later,
    )


async def test_concurrent_endings_have_one_winner(store: Store) -> None:
    await store.create_task(make_task())
    wins: list[str] = []

    async def end(status: Any) -> None:
        if await store.finish_task("task-1", status=status, at=NOW):
            wins.append(status)

    async with anyio.create_task_group() as group:
        for status in ("completed", "cancelled", "failed", "cancelled"):
            group.start_soon(end, status)

    assert len(wins) == 1
    got = await store.get_task("task-1")
    assert got is not None and got.status == wins[0]


async def test_active_tasks_of_other_owners_are_abandoned(store: Store) -> None:
    await store.create_task(make_task(id="mine", owner="proc-b"))
    await store.create_task(make_task(id="dead", owner="proc-a"))
    await store.create_task(make_task(id="asking", owner="proc-a", status="input_required"))
    await store.create_task(make_task(id="done", owner="proc-a"))
    await store.finish_task("done", status="completed", at=NOW, result={"content": []})

    count = await store.abandon_tasks(owner_not="proc-b", at=NOW, message="outcome unknown")

    assert count == 2
    statuses = {}
    for task_id in ("mine", "dead", "asking", "done"):
        got = await store.get_task(task_id)
        assert got is not None
        statuses[task_id] = got.status
    assert statuses == {
        "mine": "working",
        "dead": "failed",
        "asking": "failed",
        "done": "completed",
    }
    dead = await store.get_task("dead")
    assert dead is not None
    assert dead.message == "outcome unknown"
    assert dead.error == {"code": -32603, "message": "outcome unknown"}
