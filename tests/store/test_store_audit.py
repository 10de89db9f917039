"""The audit trail, on every store kind."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from callgate.store import AuditRecord, Store

pytestmark = pytest.mark.anyio

Audit = Callable[..., AuditRecord]


async def test_append_assigns_seq_in_order_and_round_trips_every_field(
    store: Store, audit: Audit
) -> None:
    full = audit(
        call_id="c1",
        phase="final",
        trace_id="t1",
        tool="budget_change_apply",
        user="u1",
        tenant="acme",
        session_id="s1",
        tool_version="2",
        contract_hash="ch",
        args_hash="ah",
        risk="write_high_risk",
        decision="allow",
        decision_reason="policy p7",
        status="ok",
        outcome="ok",
        duration_ms=12.5,
        attempts=2,
        idempotency_key="k1",
        dropped_fields=("tenant_id", "user_id"),
        detail={"raw_ref": "r1", "nested": {"n": [1, 2.5, None, True]}},
    )
    await store.append_audit([audit(call_id="c0", phase="intent"), full])
    await store.append_audit([audit(call_id="c2")])

    records = await store.list_audit()

    assert [r.call_id for r in records] == ["c0", "c1", "c2"]
    seqs = [r.seq for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3 and seqs[0] > 0
    assert records[1] == AuditRecord(**{**full.__dict__, "seq": records[1].seq})


async def test_tail_keeps_the_newest_and_call_id_filters(store: Store, audit: Audit) -> None:
    await store.append_audit([audit(call_id=f"c{i % 2}", trace_id=f"t{i}") for i in range(6)])

    assert [r.trace_id for r in await store.list_audit(tail=2)] == ["t4", "t5"]
    assert [r.trace_id for r in await store.list_audit(call_id="c1")] == ["t1", "t3", "t5"]
    assert [r.trace_id for r in await store.list_audit(call_id="c0", tail=2)] == ["t2", "t4"]
    assert await store.list_audit(tail=0) == []
    assert len(await store.list_audit(tail=100)) == 6
    assert await store.list_audit(call_id="nope") == []
    with pytest.raises(ValueError, match="tail"):
        await store.list_audit(tail=-1)


async def test_append_nothing_is_a_no_op(store: Store) -> None:
    await store.append_audit([])

    assert await store.list_audit() == []


async def test_count_session_calls_counts_successful_finals_only(
    store: Store, audit: Audit
) -> None:
    same = {"session_id": "s1", "tool": "search", "args_hash": "h1"}
    await store.append_audit(
        [
            audit(**same, phase="intent"),
            audit(**same, status="ok"),
            audit(**same, status="ok"),
            audit(**same, status="error"),
            audit(**{**same, "session_id": "s2"}, status="ok"),
            audit(**{**same, "tool": "other"}, status="ok"),
            audit(**{**same, "args_hash": "h2"}, status="ok"),
        ]
    )

    assert await store.count_session_calls("s1", "search", "h1") == 2
    assert await store.count_session_calls("s1", "search", "h2") == 1
    assert await store.count_session_calls("s9", "search", "h1") == 0


async def test_session_retries_sums_extra_attempts_of_finals(store: Store, audit: Audit) -> None:
    await store.append_audit(
        [
            audit(session_id="s1", attempts=3),
            audit(session_id="s1", attempts=1),
            # Denied before running: no attempt, and no negative retries.
            audit(session_id="s1", attempts=0),
            audit(session_id="s1", attempts=5, phase="intent"),
            audit(session_id="s2", attempts=4),
        ]
    )

    assert await store.session_retries("s1") == 2
    assert await store.session_retries("s2") == 3
    assert await store.session_retries("unknown") == 0


async def test_datetimes_come_back_aware_utc_and_equal(store: Store, audit: Audit) -> None:
    beijing = timezone(timedelta(hours=8))
    at = datetime(2026, 3, 1, 8, 30, 15, 123456, tzinfo=beijing)
    await store.append_audit([audit(at=at)])

    (record,) = await store.list_audit()

    assert record.at == at
    assert record.at.tzinfo is UTC
    assert record.at.hour == 0


async def test_naive_datetime_is_refused_and_nothing_is_written(store: Store, audit: Audit) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        await store.append_audit([audit(), audit(at=datetime(2026, 1, 1))])

    assert await store.list_audit() == []
