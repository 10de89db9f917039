"""create_pending_approval: at most one live pending approval per request, in the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from callgate.store import ApprovalRecord, Store

from .test_store_approvals import approval as _approval

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

NOW = datetime.now(UTC)


def approval(approval_id: str, **fields: Any) -> ApprovalRecord:
    """A pending approval filed now, live for an hour."""
    times = {"created_at": NOW, "expires_at": NOW + timedelta(hours=1)}
    return _approval(approval_id, **{**times, **fields})


async def test_a_second_identical_request_gets_the_first_approval(store: Store) -> None:
    first = await store.create_pending_approval(approval("ap-1"))
    second = await store.create_pending_approval(approval("ap-2", call_id="call-2"))
    assert first.id == second.id == "ap-1"
    assert [r.id for r in await store.list_approvals(state="pending")] == ["ap-1"]


async def test_other_requests_and_decided_or_expired_ones_do_not_count(store: Store) -> None:
    await store.create_approval(approval("old", expires_at=NOW - timedelta(seconds=1)))
    await store.create_approval(approval("denied"))
    await store.decide_approval("denied", state="denied", decided_by="b", note="no", at=NOW)
    filed = [
        await store.create_pending_approval(record)
        for record in (
            approval("ap-1"),
            approval("ap-other-args", args_hash="h-2"),
            approval("ap-no-tenant", tenant=None),
            approval("ap-other-user", user="u2"),
            approval("ap-other-tool", tool="billing_void"),
        )
    ]
    assert [r.id for r in filed] == [
        "ap-1",
        "ap-other-args",
        "ap-no-tenant",
        "ap-other-user",
        "ap-other-tool",
    ]
    # A tenantless request meets its own pending approval, not tenant acme's.
    again = await store.create_pending_approval(approval("ap-again", tenant=None))
    assert again.id == "ap-no-tenant"


async def test_two_stores_on_one_database_file_one(database: Database) -> None:
    """Two store objects stand for two replicas sharing the database."""
    filed: list[ApprovalRecord] = []
    async with database.store() as one, database.store() as two:

        async def file(store: Store, n: int) -> None:
            filed.append(await store.create_pending_approval(approval(f"ap-{n}")))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for n in range(20):
                    tg.start_soon(file, one if n % 2 else two, n)
        pending = await one.list_approvals(state="pending")
    assert len({r.id for r in filed}) == 1
    assert [r.id for r in pending] == [filed[0].id]
