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


async def test_a_task_ends_once_with_its_envelope(store: Store) -> None:
    await store.create_task(make_task())
    envelope = {"tool": "ops.deploy", "call_id": "call-1", "status": "ok", "payload": "done"}
    later = NOW + timedelta(seconds=5)

    assert await store.finish_task(
        "task-1", status="completed", at=later, call_id="call-1", envelope=envelope
    )
    assert not await store.finish_task("task-1", status="cancelled", at=later)
    assert not await store.finish_task("no-such-task", status="cancelled", at=later)

    got = await store.get_task("task-1")
    assert got is not None
    assert (got.status, got.envelope, got.call_id, got.updated_at) == (
        "completed",
        envelope,
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


async def test_working_tasks_whose_lease_ran_out_are_abandoned(store: Store) -> None:
    lease = NOW + timedelta(seconds=30)
    await store.create_task(make_task(id="renewed", lease_until=lease))
    await store.create_task(make_task(id="dead", lease_until=NOW - timedelta(seconds=1)))
    await store.create_task(make_task(id="no-lease"))  # written before leases existed
    await store.create_task(make_task(id="asking", status="input_required"))
    await store.create_task(make_task(id="done", lease_until=NOW - timedelta(seconds=1)))
    await store.finish_task("done", status="completed", at=NOW, envelope={"status": "ok"})

    count = await store.abandon_tasks(at=NOW, message="outcome unknown")

    assert count == 2
    statuses = {}
    for task_id in ("renewed", "dead", "no-lease", "asking", "done"):
        got = await store.get_task(task_id)
        assert got is not None
        statuses[task_id] = got.status
    # A task waiting for input runs nowhere: any server may resume it, none gives it up.
    assert statuses == {
        "renewed": "working",
        "dead": "failed",
        "no-lease": "failed",
        "asking": "input_required",
        "done": "completed",
    }
    dead = await store.get_task("dead")
    assert dead is not None
    assert dead.message == "outcome unknown"
    assert dead.error == {"code": -32603, "message": "outcome unknown"}


async def test_a_lease_is_renewed_only_while_the_task_works(store: Store) -> None:
    await store.create_task(make_task(lease_until=NOW))
    later = NOW + timedelta(minutes=1)

    renewed = await store.renew_task_lease("task-1", owner="proc-b", until=later)
    await store.finish_task("task-1", status="cancelled", at=NOW)
    after_cancel = await store.renew_task_lease("task-1", owner="proc-b", until=later)

    assert renewed and not after_cancel
    got = await store.get_task("task-1")
    assert got is not None and got.owner == "proc-b" and got.lease_until == later


QUESTIONS = {
    "a": {"method": "elicitation/create", "params": {"message": "A?"}},
    "b": {"method": "elicitation/create", "params": {"message": "B?"}},
}


async def test_a_parked_task_collects_answers_then_works_again(store: Store) -> None:
    await store.create_task(make_task(arguments={"x": 1}, lease_until=NOW))
    parked = await store.park_task(
        "task-1", at=NOW, input_requests=QUESTIONS, request_state='{"v":1}', call_id="c-1"
    )
    again = await store.park_task("task-1", at=NOW, input_requests=QUESTIONS, request_state=None)

    first = await store.answer_task("task-1", {"a": {"action": "accept"}}, at=NOW)
    with pytest.raises(ValueError, match="not a pending input request"):
        await store.answer_task("task-1", {"a": {"action": "decline"}}, at=NOW)
    lease = NOW + timedelta(seconds=30)
    last = await store.answer_task("task-1", {"b": {"action": "cancel"}}, at=NOW, lease_until=lease)
    swept = await store.abandon_tasks(at=NOW, message="outcome unknown")
    late = await store.answer_task("task-1", {"b": {"action": "cancel"}}, at=NOW)

    assert parked and not again  # only a working task parks
    assert first is not None and first.status == "input_required"
    assert first.input_requests == {"b": QUESTIONS["b"]}
    assert last is not None and last.status == "working"
    assert last.input_requests == {}
    assert last.responses == {"a": {"action": "accept"}, "b": {"action": "cancel"}}
    assert last.arguments == {"x": 1} and last.request_state == '{"v":1}'
    assert last.lease_until == lease and swept == 0  # working again, never without a lease
    assert late is None  # not waiting any more
    got = await store.get_task("task-1")
    assert got is not None and got.status == "working" and got.call_id == "c-1"


async def test_concurrent_answers_are_all_kept_and_resume_once(store: Store) -> None:
    many = {f"q{i}": {"method": "elicitation/create", "params": {}} for i in range(8)}
    await store.create_task(make_task())
    await store.park_task("task-1", at=NOW, input_requests=many, request_state=None)
    resumed: list[str] = []

    async def answer(key: str) -> None:
        updated = await store.answer_task("task-1", {key: {"action": "accept"}}, at=NOW)
        if updated is not None and updated.status == "working":
            resumed.append(key)

    async with anyio.create_task_group() as group:
        for key in many:
            group.start_soon(answer, key)

    got = await store.get_task("task-1")
    assert got is not None and got.status == "working"
    assert set(got.responses or {}) == set(many)
    assert len(resumed) == 1
