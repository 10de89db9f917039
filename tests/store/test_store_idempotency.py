"""Idempotency records, on every store kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from callgate.store import IdempotencyRecord, Store

pytestmark = pytest.mark.anyio


def claim(
    call_id: str, *, scope: str = "acme/refund/k1", ttl: timedelta = timedelta(hours=1)
) -> IdempotencyRecord:
    now = datetime.now(UTC)
    return IdempotencyRecord(
        scope=scope,
        args_hash=f"args-of-{call_id}",
        call_id=call_id,
        state="pending",
        created_at=now,
        expires_at=now + ttl,
    )


async def test_first_claim_wins_and_later_ones_see_it(store: Store) -> None:
    first = claim("call-1")

    assert await store.claim_idempotency(first) is None
    existing = await store.claim_idempotency(claim("call-2"))

    assert existing == first
    assert await store.get_idempotency(first.scope) == first
    assert await store.claim_idempotency(claim("call-3", scope="acme/refund/k2")) is None


async def test_fifty_concurrent_claims_have_exactly_one_winner(store: Store) -> None:
    outcomes: dict[str, IdempotencyRecord | None] = {}

    async def try_claim(call_id: str) -> None:
        outcomes[call_id] = await store.claim_idempotency(claim(call_id))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(try_claim, f"call-{i}")

    winners = [call_id for call_id, existing in outcomes.items() if existing is None]
    assert len(winners) == 1
    assert {existing.call_id for existing in outcomes.values() if existing} == set(winners)
    record = await store.get_idempotency("acme/refund/k1")
    assert record is not None and record.call_id == winners[0]


async def test_expired_record_is_absent_and_replaced_by_a_claim(store: Store) -> None:
    await store.claim_idempotency(claim("old", ttl=timedelta(seconds=-1)))

    assert await store.get_idempotency("acme/refund/k1") is None
    assert await store.claim_idempotency(claim("new")) is None
    record = await store.get_idempotency("acme/refund/k1")
    assert record is not None and record.call_id == "new" and record.state == "pending"


async def test_complete_stores_the_envelope_for_every_later_caller(store: Store) -> None:
    await store.claim_idempotency(claim("call-1"))
    envelope = {"status": "ok", "payload": {"refund_id": "R-9", "amount": 12.5}}

    await store.complete_idempotency("acme/refund/k1", envelope)
    envelope["status"] = "mutated after the fact"

    record = await store.get_idempotency("acme/refund/k1")
    assert record is not None
    assert record.state == "done"
    assert record.envelope == {"status": "ok", "payload": {"refund_id": "R-9", "amount": 12.5}}
    assert await store.claim_idempotency(claim("call-2")) == record


async def test_complete_of_an_unclaimed_scope_raises(store: Store) -> None:
    with pytest.raises(KeyError, match="no idempotency record"):
        await store.complete_idempotency("acme/refund/never", {"status": "ok"})


async def test_only_the_claiming_call_releases_a_pending_claim(store: Store) -> None:
    first = claim("call-1")
    await store.claim_idempotency(first)

    await store.release_idempotency(first.scope, call_id="call-2")  # not its claim
    kept = await store.get_idempotency(first.scope)
    await store.release_idempotency(first.scope, call_id="call-1")

    assert kept == first
    assert await store.get_idempotency(first.scope) is None


async def test_a_completed_claim_is_never_released(store: Store) -> None:
    await store.claim_idempotency(claim("call-1"))
    await store.complete_idempotency("acme/refund/k1", {"status": "ok"}, call_id="call-1")

    await store.release_idempotency("acme/refund/k1", call_id="call-1")

    record = await store.get_idempotency("acme/refund/k1")
    assert record is not None and record.state == "done" and record.envelope == {"status": "ok"}
