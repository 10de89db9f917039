"""Approvals, on every store kind: binding, expiry, once-only decisions and use."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from callgate.store import ApprovalRecord, Store

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)


def approval(approval_id: str = "ap-1", **fields: Any) -> ApprovalRecord:
    values: dict[str, Any] = {
        "id": approval_id,
        "tool": "billing_refund",
        "arguments": {"order_id": "O-7", "amount": 12.5, "tenant_id": "acme"},
        "model_arguments": {"order_id": "O-7", "amount": 12.5},
        "args_hash": "h-1",
        "user": "u1",
        "tenant": "acme",
        "session_id": "s1",
        "call_id": "call-1",
        "reason": "refunds over 10 need a human",
        "rule": "refund-limit",
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
    }
    values.update(fields)
    return ApprovalRecord(**values)


async def approved(store: Store, record: ApprovalRecord) -> ApprovalRecord:
    await store.create_approval(record)
    decided = await store.decide_approval(
        record.id, state="approved", decided_by="admin", note=None, at=NOW
    )
    assert decided is not None
    return decided


async def test_create_then_get_round_trips_every_field(store: Store) -> None:
    paris = timezone(timedelta(hours=1))
    record = approval(
        arguments={"order_id": "O-7", "lines": [{"sku": "é", "qty": 2}], "note": None},
        impact={"before": {"balance": 100}, "after": {"balance": 87.5}},
        preview_id="pv-1",
        created_at=NOW.astimezone(paris),
        expires_at=(NOW + timedelta(hours=1)).astimezone(paris),
    )
    await store.create_approval(record)
    record.arguments["order_id"] = "mutated after the fact"

    got = await store.get_approval("ap-1")

    assert got is not None
    assert got.arguments == {
        "order_id": "O-7",
        "lines": [{"sku": "é", "qty": 2}],
        "note": None,
    }
    assert replace(got, arguments=record.arguments) == record
    assert got.created_at.tzinfo == UTC and got.expires_at.tzinfo == UTC
    assert (got.state, got.decided_at, got.result) == ("pending", None, None)
    assert await store.get_approval("unknown") is None


async def test_an_id_is_created_once(store: Store) -> None:
    await store.create_approval(approval())

    with pytest.raises(ValueError, match="exists already"):
        await store.create_approval(approval(tool="other"))
    got = await store.get_approval("ap-1")
    assert got is not None and got.tool == "billing_refund"


async def test_a_naive_datetime_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        await store.create_approval(approval(created_at=datetime(2026, 12, 1)))
    assert await store.get_approval("ap-1") is None


async def test_decide_records_the_decision_once(store: Store) -> None:
    await store.create_approval(approval())
    at = NOW + timedelta(minutes=5)

    decided = await store.decide_approval(
        "ap-1", state="approved", decided_by="admin", note="ok for VIP", at=at
    )
    again = await store.decide_approval(
        "ap-1", state="denied", decided_by="other", note="no", at=at
    )

    assert decided is not None
    assert (decided.state, decided.decided_by, decided.note) == ("approved", "admin", "ok for VIP")
    assert decided.decided_at == at and decided.decided_at.tzinfo == UTC
    assert again is None
    assert await store.get_approval("ap-1") == decided


async def test_a_denial_is_final_and_cannot_be_consumed(store: Store) -> None:
    await store.create_approval(approval())

    denied = await store.decide_approval(
        "ap-1", state="denied", decided_by="admin", note="too much", at=NOW
    )

    assert denied is not None and denied.state == "denied" and denied.note == "too much"
    assert await store.consume_approval("ap-1", call_id="call-2", at=NOW) is False
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "denied" and got.used_by_call is None


async def test_deciding_an_unknown_approval_returns_none(store: Store) -> None:
    assert (
        await store.decide_approval("nope", state="approved", decided_by="a", note=None, at=NOW)
        is None
    )


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1)])
async def test_a_pending_approval_past_expiry_cannot_be_decided(
    store: Store, late: timedelta
) -> None:
    record = approval()
    await store.create_approval(record)

    decided = await store.decide_approval(
        "ap-1", state="approved", decided_by="admin", note=None, at=record.expires_at + late
    )

    assert decided is None
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "pending" and got.decided_by is None


async def test_consume_uses_an_approval_once(store: Store) -> None:
    await approved(store, approval())

    first = await store.consume_approval("ap-1", call_id="call-2", at=NOW)
    second = await store.consume_approval("ap-1", call_id="call-3", at=NOW)

    assert (first, second) == (True, False)
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "used" and got.used_by_call == "call-2"


async def test_only_the_call_that_used_an_approval_gives_it_back(store: Store) -> None:
    await approved(store, approval())
    await store.consume_approval("ap-1", call_id="call-2", at=NOW)

    by_another = await store.release_approval("ap-1", call_id="call-3")
    still_used = await store.get_approval("ap-1")
    by_its_call = await store.release_approval("ap-1", call_id="call-2")
    again = await store.release_approval("ap-1", call_id="call-2")

    assert (by_another, by_its_call, again) == (False, True, False)
    assert still_used is not None and still_used.state == "used"
    assert still_used.used_by_call == "call-2"
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "approved" and got.used_by_call is None


async def test_pending_and_unknown_approvals_cannot_be_consumed(store: Store) -> None:
    await store.create_approval(approval())

    assert await store.consume_approval("ap-1", call_id="call-2", at=NOW) is False
    assert await store.consume_approval("nope", call_id="call-2", at=NOW) is False
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "pending"


@pytest.mark.parametrize("late", [timedelta(0), timedelta(hours=2)])
async def test_an_approved_approval_past_expiry_cannot_be_consumed(
    store: Store, late: timedelta
) -> None:
    record = await approved(store, approval())

    used = await store.consume_approval("ap-1", call_id="call-2", at=record.expires_at + late)

    assert used is False
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "approved" and got.used_by_call is None


async def test_fifty_concurrent_decisions_have_exactly_one_winner(store: Store) -> None:
    await store.create_approval(approval())
    outcomes: dict[str, ApprovalRecord | None] = {}

    async def decide(i: int) -> None:
        outcomes[f"admin-{i}"] = await store.decide_approval(
            "ap-1",
            state="approved" if i % 2 else "denied",
            decided_by=f"admin-{i}",
            note=None,
            at=NOW,
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(decide, i)

    winners = [r for r in outcomes.values() if r is not None]
    assert len(outcomes) == 50 and len(winners) == 1
    assert await store.get_approval("ap-1") == winners[0]


async def test_fifty_concurrent_consumes_have_exactly_one_winner(store: Store) -> None:
    await approved(store, approval())
    outcomes: dict[str, bool] = {}

    async def consume(call_id: str) -> None:
        outcomes[call_id] = await store.consume_approval("ap-1", call_id=call_id, at=NOW)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(consume, f"call-{i}")

    winners = [call_id for call_id, used in outcomes.items() if used]
    assert len(outcomes) == 50 and len(winners) == 1
    got = await store.get_approval("ap-1")
    assert got is not None and got.state == "used" and got.used_by_call == winners[0]


async def test_two_replicas_consume_an_approval_once(database: Database) -> None:
    replicas = [database.store(), database.store()]
    outcomes: dict[str, bool] = {}

    async def consume(replica: Store, call_id: str) -> None:
        outcomes[call_id] = await replica.consume_approval("ap-1", call_id=call_id, at=NOW)

    try:
        for replica in replicas:
            await replica.open()
        await approved(replicas[0], approval())
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(consume, replicas[i % 2], f"call-{i}")
        got = await replicas[1].get_approval("ap-1")
    finally:
        for replica in replicas:
            await replica.close()

    winners = [call_id for call_id, used in outcomes.items() if used]
    assert len(outcomes) == 50 and len(winners) == 1
    assert got is not None and got.state == "used" and got.used_by_call == winners[0]


async def test_set_result_keeps_the_envelope(store: Store) -> None:
    await approved(store, approval())
    envelope = {"status": "ok", "payload": {"refund_id": "R-9", "amount": 12.5}}

    await store.set_approval_result("ap-1", envelope)
    envelope["status"] = "mutated after the fact"

    got = await store.get_approval("ap-1")
    assert got is not None
    assert got.result == {"status": "ok", "payload": {"refund_id": "R-9", "amount": 12.5}}
    assert got.state == "approved"


async def test_set_result_of_an_unknown_approval_raises(store: Store) -> None:
    with pytest.raises(KeyError, match="no approval"):
        await store.set_approval_result("nope", {"status": "ok"})


async def test_list_is_newest_first_and_filters(store: Store) -> None:
    minute = timedelta(minutes=1)
    await store.create_approval(approval("a", created_at=NOW))
    await store.create_approval(approval("b", created_at=NOW + minute, tenant="globex"))
    await store.create_approval(approval("c", created_at=NOW + 2 * minute))
    # Same created_at as "c": the id breaks the tie.
    await store.create_approval(approval("d", created_at=NOW + 2 * minute, tenant=None))
    await store.decide_approval("c", state="approved", decided_by="x", note=None, at=NOW)

    async def ids(**filters: Any) -> list[str]:
        return [r.id for r in await store.list_approvals(**filters)]

    assert await ids() == ["d", "c", "b", "a"]
    assert await ids(limit=2) == ["d", "c"]
    assert await ids(state="pending") == ["d", "b", "a"]
    assert await ids(state="approved") == ["c"]
    assert await ids(state="used") == []
    assert await ids(tenant="acme") == ["c", "a"]
    assert await ids(tenant="acme", state="pending") == ["a"]
    assert await ids(tenant="globex", limit=5) == ["b"]
    # The inbox's read: the one waiting longest first.
    assert await ids(state="pending", oldest_first=True) == ["a", "b", "d"]
    assert await ids(oldest_first=True, limit=3) == ["a", "b", "c"]


async def test_list_can_leave_out_the_expired_before_the_limit(store: Store) -> None:
    # Old requests nobody decided stay pending past their time; a page of live ones
    # must not be filled, then emptied, by them.
    minute = timedelta(minutes=1)
    for n in range(3):
        created = NOW + n * minute
        await store.create_approval(
            approval(f"stale-{n}", created_at=created, expires_at=created + minute)
        )
    await store.create_approval(
        approval("live", created_at=NOW + 5 * minute, expires_at=NOW + timedelta(hours=1))
    )
    at = NOW + 10 * minute

    live = await store.list_approvals(state="pending", live_at=at, oldest_first=True, limit=1)
    every = await store.list_approvals(state="pending", oldest_first=True, limit=1)

    assert [r.id for r in live] == ["live"]
    assert [r.id for r in every] == ["stale-0"]


async def test_list_finds_the_expired_and_the_settled_whatever_waits_before_them(
    store: Store,
) -> None:
    # Many live pending requests newer than the settled ones: a read of the newest
    # rows, filtered afterwards, would find none of them.
    minute = timedelta(minutes=1)
    hour_later = NOW + timedelta(hours=1)
    await store.create_approval(approval("old-pending", created_at=NOW, expires_at=NOW + minute))
    await store.create_approval(approval("denied", created_at=NOW + minute, expires_at=hour_later))
    await store.decide_approval("denied", state="denied", decided_by="x", note=None, at=NOW)
    await store.create_approval(
        approval("old-approved", created_at=NOW + 2 * minute, expires_at=NOW + 3 * minute)
    )
    await store.decide_approval("old-approved", state="approved", decided_by="x", note=None, at=NOW)
    for n in range(20):
        await store.create_approval(
            approval(f"live-{n}", created_at=NOW + (10 + n) * minute, expires_at=hour_later)
        )
    at = NOW + 30 * minute

    async def ids(**filters: Any) -> list[str]:
        return [r.id for r in await store.list_approvals(limit=5, **filters)]

    assert await ids(expired_at=at) == ["old-approved", "old-pending"]
    assert await ids(settled_at=at) == ["old-approved", "denied", "old-pending"]
    assert await ids(settled_at=at, oldest_first=True) == ["old-pending", "denied", "old-approved"]
    assert await ids(settled_at=NOW) == ["old-approved", "denied"]
    assert await ids(expired_at=NOW) == []


async def test_find_returns_the_newest_approval_bound_to_the_call(store: Store) -> None:
    await store.create_approval(approval("old", created_at=NOW))
    await store.create_approval(approval("new", created_at=NOW + timedelta(minutes=1)))
    await store.create_approval(
        approval("other-user", created_at=NOW + timedelta(hours=1), user="u2")
    )
    await store.decide_approval("new", state="denied", decided_by="x", note=None, at=NOW)

    found = await store.find_approval(
        tool="billing_refund", args_hash="h-1", user="u1", tenant="acme"
    )

    assert found is not None and found.id == "new" and found.state == "denied"
    for mismatch in (
        {"tool": "billing_charge"},
        {"args_hash": "h-2"},
        {"user": "u3"},
        {"tenant": "globex"},
        {"tenant": None},
    ):
        call = {"tool": "billing_refund", "args_hash": "h-1", "user": "u1", "tenant": "acme"}
        assert await store.find_approval(**{**call, **mismatch}) is None


async def test_find_matches_a_tenantless_call(store: Store) -> None:
    await store.create_approval(approval("with-tenant"))
    await store.create_approval(approval("no-tenant", tenant=None))

    found = await store.find_approval(
        tool="billing_refund", args_hash="h-1", user="u1", tenant=None
    )

    assert found is not None and found.id == "no-tenant"


async def test_a_pending_approval_survives_a_restart(database: Database) -> None:
    record = approval(impact={"amount": 12.5})
    async with database.store() as store:
        await store.create_approval(record)

    async with database.store() as store:
        assert await store.get_approval("ap-1") == record
        decided = await store.decide_approval(
            "ap-1", state="approved", decided_by="admin", note=None, at=NOW
        )
        assert decided is not None
        assert await store.consume_approval("ap-1", call_id="call-2", at=NOW) is True
