"""Idempotency claims: a crashed owner's claim, and scopes that never collide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from callgate import ErrorKind, Gate, Principal, Status
from callgate.runtime.call import hash_json
from callgate.runtime.changes import apply_arguments
from callgate.runtime.idempotency import scope_for
from callgate.store import IdempotencyRecord, MemoryStore

from .change_tools import Bank
from .change_tools import build as build_bank
from .conftest import GateFactory
from .tools import Counters, build

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"bank:write"})


async def test_a_resent_apply_after_a_crash_answers_after_one_timeout() -> None:
    """A process claimed the apply 60 s ago and died. The apply runs once and is
    never retried, so its claim is stale after one timeout (30 s) plus a margin,
    not after max_attempts timeouts and backoffs (101 s)."""
    bank = Bank()
    store = MemoryStore()
    async with Gate([build_bank(bank)], store=store) as gate:
        preview = await gate.call(
            "bank.limit_change_preview", {"account": "A-1", "new_limit": 150}, principal=ALICE
        )
        preview_id = preview.payload["preview_id"]
        record = await store.get_preview(preview_id)
        assert record is not None
        crashed_at = datetime.now(UTC) - timedelta(seconds=60)
        await store.claim_idempotency(
            IdempotencyRecord(
                scope=scope_for("acme", "bank.limit_change_apply", preview_id),
                args_hash=hash_json(apply_arguments(record)),
                call_id="call_of_the_crashed_process",
                state="pending",
                created_at=crashed_at,
                expires_at=crashed_at + timedelta(hours=24),
            )
        )
        with anyio.fail_after(10):
            again = await gate.call(
                "bank.limit_change_apply", {"preview_id": preview_id}, principal=ALICE
            )
    assert again.error is not None and again.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert "bank.limit_change_status" in again.error.next_step or "state" in (again.error.next_step)
    assert bank.applied == []  # never run a second time


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((None, "k"), ("-", "k")),  # no tenant, and the tenant "-"
        (("-", "k"), (None, "k")),
        (("a/t.transfer", "k"), ("a", "t.transfer/k")),  # separators inside the parts
    ],
)
async def test_keys_of_different_tenants_never_share_a_scope(
    make_gate: GateFactory, first: tuple[str | None, str], second: tuple[str | None, str]
) -> None:
    counters = Counters()
    (tenant_a, key_a), (tenant_b, key_b) = first, second
    async with make_gate([build(counters)]) as gate:
        a = await gate.call(
            "t.transfer",
            {"amount": 1, "to": "x"},
            principal=Principal(user="u1", tenant=tenant_a, scopes={"w"}),
            idempotency_key=key_a,
        )
        b = await gate.call(
            "t.transfer",
            {"amount": 1, "to": "x"},
            principal=Principal(user="u2", tenant=tenant_b, scopes={"w"}),
            idempotency_key=key_b,
        )
    assert a.status is Status.OK and b.status is Status.OK
    assert not b.replayed and b.call_id != a.call_id  # the second caller's own run
    assert counters.runs["transfer"] == 2


def test_scopes_are_unambiguous() -> None:
    assert scope_for(None, "t.x", "k") != scope_for("-", "t.x", "k")
    assert scope_for("a/t.x", "t.y", "k") != scope_for("a", "t.x", "t.y/k")
    assert scope_for("acme", "t.x", "k") == '["acme","t.x","k"]'
