"""Previews, on every store kind."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest

from callgate.store import PreviewRecord, Store

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio


def preview(preview_id: str = "pv-1", **fields: Any) -> PreviewRecord:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": preview_id,
        "change": "crm_update_address",
        "arguments": {"customer_id": "C-1", "address": {"city": "Zürich"}, "tenant_id": "acme"},
        "args_hash": "h-1",
        "user": "u1",
        "tenant": "acme",
        "impact": {"before": {"city": "Bern"}, "after": {"city": "Zürich"}},
        "created_at": now,
        "expires_at": now + timedelta(minutes=15),
    }
    values.update(fields)
    return PreviewRecord(**values)


async def test_create_then_get_round_trips(store: Store) -> None:
    tokyo = timezone(timedelta(hours=9))
    record = preview(created_at=datetime.now(tokyo), tenant=None)
    await store.create_preview(record)
    record.arguments["customer_id"] = "mutated after the fact"

    got = await store.get_preview("pv-1")

    assert got is not None
    assert got.arguments["customer_id"] == "C-1"
    assert replace(got, arguments=record.arguments) == record
    assert got.created_at.tzinfo == UTC and got.expires_at.tzinfo == UTC
    assert got.approval_id is None
    assert await store.get_preview("unknown") is None


@pytest.mark.parametrize("impact", [None, 42, "rename 3 rows", [1, {"a": None}], {}])
async def test_any_json_impact_round_trips(store: Store, impact: Any) -> None:
    await store.create_preview(preview(impact=impact))

    got = await store.get_preview("pv-1")

    assert got is not None and got.impact == impact


async def test_an_id_is_created_once(store: Store) -> None:
    await store.create_preview(preview())

    with pytest.raises(ValueError, match="exists already"):
        await store.create_preview(preview(change="other"))
    got = await store.get_preview("pv-1")
    assert got is not None and got.change == "crm_update_address"


async def test_an_expired_preview_is_still_returned(store: Store) -> None:
    record = preview(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    await store.create_preview(record)

    assert await store.get_preview("pv-1") == record


async def test_set_preview_approval_links_the_approval(store: Store) -> None:
    await store.create_preview(preview())
    await store.create_preview(preview("pv-2"))

    await store.set_preview_approval("pv-1", "ap-1")

    first, second = await store.get_preview("pv-1"), await store.get_preview("pv-2")
    assert first is not None and first.approval_id == "ap-1"
    assert second is not None and second.approval_id is None


async def test_linking_an_unknown_preview_raises(store: Store) -> None:
    with pytest.raises(KeyError, match="no preview"):
        await store.set_preview_approval("nope", "ap-1")


async def test_a_preview_survives_a_restart(database: Database) -> None:
    record = preview()
    async with database.store() as store:
        await store.create_preview(record)

    async with database.store() as store:
        assert await store.get_preview("pv-1") == record
        await store.set_preview_approval("pv-1", "ap-1")
        linked = await store.get_preview("pv-1")
    assert linked == replace(record, approval_id="ap-1")
