"""Preview / apply: exactly once, bound to the previewed inputs and the caller."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from callgate import (
    ErrorKind,
    Gate,
    Limits,
    Policy,
    Principal,
    Rule,
    Status,
    Toolbox,
    TransientError,
    Trusted,
)
from callgate.clock import ManualClock
from callgate.store import MemoryStore, SQLStore
from tests.pg import POSTGRES_URL, drop_schema

from .change_tools import Bank, build
from .conftest import GateFactory, durable_stores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"bank:write"})
PREVIEW = "bank.limit_change_preview"
APPLY = "bank.limit_change_apply"
STATUS = "bank.limit_change_status"


async def preview(gate: Gate, new_limit: int = 150, who: Principal = ALICE) -> str:
    env = await gate.call(PREVIEW, {"account": "A-1", "new_limit": new_limit}, principal=who)
    assert env.ok, env.error
    return str(env.payload["preview_id"])


def test_three_tools_with_the_ttl_in_their_descriptions() -> None:
    box = build(Bank(), ttl=300)
    names = [s.name for s in box]
    assert names == [APPLY, PREVIEW, STATUS, "bank.pay"]
    apply = box.get(APPLY)
    assert apply is not None
    assert set(apply.input_schema["properties"]) == {"preview_id"}
    assert "5 minutes" in apply.description and STATUS in apply.description
    assert apply.annotations.to_mcp()["idempotentHint"] is True
    assert not apply.retry_safe  # never retried inside a call
    prev = box.get(PREVIEW)
    assert prev is not None and prev.risk.value == "read" and "5 minutes" in prev.description
    assert "tenant_id" not in prev.input_schema["properties"]


async def test_preview_changes_nothing_and_apply_does_it_once(make_gate: GateFactory) -> None:
    bank = Bank()
    async with make_gate([build(bank)]) as gate:
        pid = await preview(gate)
        assert bank.balances["acme:A-1"] == 100
        first = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
        second = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
        status = await gate.call(STATUS, {"preview_id": pid}, principal=ALICE)
    assert first.ok and first.payload == {"before": 100, "after": 150}
    assert second.replayed and second.call_id == first.call_id and second.payload == first.payload
    assert bank.applied == [("acme:A-1", 150)]
    assert status.payload["state"] == "applied" and status.payload["result"]["after"] == 150


async def test_fifty_concurrent_applies_apply_once(make_gate: GateFactory) -> None:
    bank = Bank(apply_delay=0.05)
    results = []
    async with make_gate([build(bank)]) as gate:
        pid = await preview(gate)

        async def one() -> None:
            results.append(await gate.call(APPLY, {"preview_id": pid}, principal=ALICE))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one)
    assert len(bank.applied) == 1
    assert {r.status for r in results} == {Status.OK}
    assert len({r.call_id for r in results}) == 1


async def test_apply_after_expiry_is_refused(make_gate: GateFactory) -> None:
    bank = Bank()
    clock = ManualClock()
    async with make_gate([build(bank, ttl=600)], clock=clock) as gate:
        pid = await preview(gate)
        clock.advance(seconds=599)
        assert (await gate.call(STATUS, {"preview_id": pid}, principal=ALICE)).payload[
            "preview_valid"
        ] is True
        clock.advance(seconds=2)
        env = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
        status = await gate.call(STATUS, {"preview_id": pid}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "expired" in env.error.message_for_model
    assert PREVIEW in (env.error.next_step or "")
    assert bank.applied == []
    assert status.payload["state"] == "not_applied" and status.payload["preview_valid"] is False


async def test_forged_or_altered_ids_are_refused(make_gate: GateFactory) -> None:
    bank = Bank()
    async with make_gate([build(bank)]) as gate:
        pid = await preview(gate)
        altered = pid[:-1] + ("A" if pid[-1] != "A" else "B")
        answers = [
            await gate.call(APPLY, {"preview_id": p}, principal=ALICE)
            for p in (altered, "pv_forged", "")
        ]
    for env in answers:
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert "preview" in (env.error.next_step or "")
    assert bank.applied == []


async def test_another_user_or_tenant_cannot_apply(make_gate: GateFactory) -> None:
    bank = Bank()
    bob = Principal(user="bob", tenant="acme", scopes={"bank:write"})
    eve = Principal(user="alice", tenant="globex", scopes={"bank:write"})
    async with make_gate([build(bank)]) as gate:
        pid = await preview(gate)
        answers = [await gate.call(APPLY, {"preview_id": pid}, principal=p) for p in (bob, eve)]
        mine = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
    for env in answers:
        assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert mine.ok and len(bank.applied) == 1


async def test_a_timed_out_apply_is_unknown_and_status_reconciles(make_gate: GateFactory) -> None:
    bank = Bank(apply_delay=0.3)
    async with make_gate([build(bank, timeout=0.1)]) as gate:
        pid = await preview(gate)
        env = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
        again = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
        await anyio.sleep(0.4)  # the abandoned worker thread finishes the change
        status = await gate.call(STATUS, {"preview_id": pid}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert STATUS in (env.error.next_step or "") and "Do not retry" in (env.error.next_step or "")
    assert again.replayed and again.error == env.error  # never re-run
    assert len(bank.applied) == 1
    assert status.payload["state"] == "applied"
    assert "live system" in status.payload["verified"]


async def test_policy_sees_the_impact_and_files_the_approval_at_preview(
    make_gate: GateFactory,
) -> None:
    bank = Bank()
    policy = Policy(
        [
            Rule(
                "require_approval",
                tools=[APPLY],
                when="impact.increase_pct > 50",
                reason="more than +50% needs the owner's approval",
            )
        ]
    )
    async with make_gate([build(bank)], policy=policy) as gate:
        small = await preview(gate, 120)
        big = await gate.call(PREVIEW, {"account": "A-1", "new_limit": 180}, principal=ALICE)
        approval_id = big.payload["approval"]["approval_id"]
        assert "approval" in big.payload["next_step"] and approval_id in big.payload["next_step"]
        parked = await gate.call(APPLY, {"preview_id": big.payload["preview_id"]}, principal=ALICE)
        approvals = await gate.approvals()
        record = await approvals.get(approval_id)
        assert record is not None
        await approvals.approve(approval_id, by=Principal("bob", "acme"))
        applied = await gate.call(APPLY, {"preview_id": big.payload["preview_id"]}, principal=ALICE)
        small_applied = await gate.call(APPLY, {"preview_id": small}, principal=ALICE)
        used = await approvals.get(approval_id)
        status = await gate.call(STATUS, {"preview_id": big.payload["preview_id"]}, principal=ALICE)
    assert parked.status is Status.PENDING_APPROVAL
    assert parked.approval.approval_id == approval_id
    assert parked.error is not None and approval_id in parked.error.message_for_model
    # the approval shows the exact inputs, trusted fields included, and the impact
    assert record.arguments == {
        "account": "A-1",
        "new_limit": 180,
        "tenant_id": "acme",
        "preview_id": big.payload["preview_id"],
    }
    assert record.impact == {"before": 100, "after": 180, "increase_pct": 80.0}
    assert applied.ok and applied.decision is not None and applied.decision.effect == "approved"
    # The small preview was computed against 100; the limit is 180 now.
    assert small_applied.error is not None
    assert small_applied.error.kind is ErrorKind.BUSINESS_STATE
    assert "changed since the preview" in small_applied.error.message_for_model
    assert bank.applied == [("acme:A-1", 180)]
    assert used is not None and used.state == "used" and used.result is not None
    assert used.result["payload"] == {"before": 100, "after": 180}
    assert status.payload["approval"]["state"] == "used"


async def test_apply_refuses_when_the_world_changed_since_the_preview(
    make_gate: GateFactory,
) -> None:
    bank = Bank()
    async with make_gate([build(bank)]) as gate:
        pid = await preview(gate, 125)  # +25% of 100
        bank.balances["acme:A-1"] = 40  # meanwhile: applying 125 now is +212%
        env = await gate.call(APPLY, {"preview_id": pid}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.BUSINESS_STATE
    assert PREVIEW in (env.error.next_step or "")
    assert bank.applied == []


@durable_stores
async def test_preview_approve_restart_apply_with_a_new_process(
    store_kind: str, tmp_path: Path
) -> None:
    """Every step in a fresh Gate on the same database, as separate processes would."""
    bank = Bank()
    policy = Policy([Rule("require_approval", tools=[APPLY], when="impact.increase_pct > 50")])
    schema = f"test_pa_{uuid.uuid4().hex[:12]}"

    def gate() -> Gate:
        url = POSTGRES_URL if store_kind == "postgres" else f"sqlite:///{tmp_path / 'pa.db'}"
        store = SQLStore(url, schema=schema if store_kind == "postgres" else None)
        return Gate([build(bank)], store=store, policy=policy)

    try:
        async with gate() as first:
            env = await first.call(PREVIEW, {"account": "A-1", "new_limit": 190}, principal=ALICE)
        pid, approval_id = env.payload["preview_id"], env.payload["approval"]["approval_id"]
        async with gate() as second:
            await (await second.approvals()).approve(approval_id, by=Principal("bob", "acme"))
        async with gate() as third, gate() as replica:
            results = []

            async def apply(g: Gate) -> None:
                results.append(await g.call(APPLY, {"preview_id": pid}, principal=ALICE))

            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(apply, third if i % 2 else replica)
    finally:
        if store_kind == "postgres":
            await drop_schema(schema)
    assert bank.applied == [("acme:A-1", 190)]
    assert {r.status for r in results} == {Status.OK}
    assert len({r.call_id for r in results}) == 1


async def test_a_transient_failure_after_approval_gives_the_approval_back() -> None:
    tries: list[int] = []
    box = Toolbox("t")
    change = box.change("move", ttl=60)

    @change.preview
    def preview_move(n: int, tenant_id: Trusted[str]) -> dict[str, int]:
        """Preview."""
        return {"n": n}

    @change.apply
    def apply_move(n: int, tenant_id: Trusted[str]) -> dict[str, int]:
        """Apply."""
        tries.append(n)
        if len(tries) == 1:
            raise TransientError("upstream busy")
        return {"n": n}

    policy = Policy([Rule("require_approval", tools=["t.move_apply"])])
    async with Gate([box], store=MemoryStore(), policy=policy) as gate:
        env = await gate.call("t.move_preview", {"n": 3}, principal=ALICE)
        pid, approval_id = env.payload["preview_id"], env.payload["approval"]["approval_id"]
        await (await gate.approvals()).approve(approval_id, by=Principal("bob", "acme"))
        first = await gate.call("t.move_apply", {"preview_id": pid}, principal=ALICE)
        second = await gate.call("t.move_apply", {"preview_id": pid}, principal=ALICE)
        record = await (await gate.approvals()).get(approval_id)
    assert first.error is not None and first.error.kind is ErrorKind.TRANSIENT
    assert second.ok and not second.replayed  # the approval was given back, used once
    assert tries == [3, 3]
    assert record is not None and record.state == "used" and record.used_by_call == second.call_id


async def test_previewing_again_is_never_a_duplicate() -> None:
    bank = Bank()
    async with Gate(
        [build(bank)], store=MemoryStore(), limits=Limits(duplicate_call_limit=1)
    ) as gate:
        answers = [
            await gate.call(
                PREVIEW, {"account": "A-1", "new_limit": 150}, principal=ALICE, session_id="s"
            )
            for _ in range(3)
        ]
    assert all(a.ok for a in answers)
