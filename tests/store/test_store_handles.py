"""Handles in the store: kept for their owner, updated by version, gone once expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from callgate.store import HandleRecord, Store

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio


def make_handle(**fields: Any) -> HandleRecord:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": "run_1",
        "kind": "runbook_run",
        "user": "alice",
        "tenant": "acme",
        "data": {"steps": [{"text": "find the deployment", "done": False}]},
        "created_at": now,
        "updated_at": now,
        "expires_at": now + timedelta(hours=1),
    }
    values.update(fields)
    return HandleRecord(**values)


async def test_a_handle_is_kept_and_read_back(store: Store) -> None:
    record = make_handle()
    await store.create_handle(record)

    assert await store.get_handle("run_1") == record
    assert await store.get_handle("run_2") is None


async def test_a_handle_id_is_taken_once(store: Store) -> None:
    await store.create_handle(make_handle())
    with pytest.raises(ValueError, match="exists already"):
        await store.create_handle(make_handle(user="bob"))
    got = await store.get_handle("run_1")
    assert got is not None and got.user == "alice"


async def test_an_update_bumps_the_version_and_renews_the_expiry(store: Store) -> None:
    await store.create_handle(make_handle())
    later = datetime.now(UTC) + timedelta(minutes=5)

    updated = await store.update_handle(
        "run_1", version=1, data={"steps": []}, at=later, expires_at=later + timedelta(hours=1)
    )

    assert updated is not None
    assert (updated.version, updated.data, updated.updated_at) == (2, {"steps": []}, later)
    assert await store.get_handle("run_1") == updated


async def test_of_two_updates_from_the_same_version_only_the_first_lands(store: Store) -> None:
    await store.create_handle(make_handle())
    now = datetime.now(UTC)
    landed: list[str] = []

    async def update(note: str) -> None:
        result = await store.update_handle(
            "run_1", version=1, data={"note": note}, at=now, expires_at=now + timedelta(hours=1)
        )
        if result is not None:
            landed.append(note)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for note in ("first", "second", "third"):
                tg.start_soon(update, note)

    assert len(landed) == 1
    got = await store.get_handle("run_1")
    assert got is not None and got.data == {"note": landed[0]} and got.version == 2


async def test_an_expired_handle_is_absent_for_every_operation(store: Store) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    await store.create_handle(make_handle(expires_at=past))
    now = datetime.now(UTC)

    assert await store.get_handle("run_1") is None
    assert (
        await store.update_handle(
            "run_1", version=1, data={}, at=now, expires_at=now + timedelta(hours=1)
        )
        is None
    )
    assert not await store.delete_handle("run_1")


async def test_creating_purges_expired_handles_so_their_ids_are_free(store: Store) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    await store.create_handle(make_handle(expires_at=past))

    # The expired row is gone, not merely hidden: its id can be created again.
    await store.create_handle(make_handle(user="bob"))

    got = await store.get_handle("run_1")
    assert got is not None and got.user == "bob"


async def test_a_delete_is_conditional_on_the_version(store: Store) -> None:
    await store.create_handle(make_handle())

    assert not await store.delete_handle("run_1", version=2)
    assert await store.get_handle("run_1") is not None
    assert await store.delete_handle("run_1", version=1)
    assert await store.get_handle("run_1") is None
    assert not await store.delete_handle("run_1")


async def test_a_tenantless_handle_round_trips(store: Store) -> None:
    record = make_handle(tenant=None, data={"nested": {"a": [1, 2.5, None, "x"]}})
    await store.create_handle(record)

    assert await store.get_handle("run_1") == record


async def test_a_second_replica_sees_and_updates_the_same_handle(database: Database) -> None:
    async with database.store() as first, database.store() as second:
        await first.create_handle(make_handle())
        seen = await second.get_handle("run_1")
        now = datetime.now(UTC)
        updated = await second.update_handle(
            "run_1", version=1, data={"steps": []}, at=now, expires_at=now + timedelta(hours=1)
        )
        # The first replica's update, based on version 1, loses.
        stale = await first.update_handle(
            "run_1", version=1, data={"lost": True}, at=now, expires_at=now + timedelta(hours=1)
        )
        got = await first.get_handle("run_1")

    assert seen is not None and seen.user == "alice" and seen.version == 1
    assert updated is not None and stale is None
    assert got is not None and (got.version, got.data) == (2, {"steps": []})
