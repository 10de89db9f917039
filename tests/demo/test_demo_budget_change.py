"""The budget change's preview / apply / status through the gate, with the demo policy."""

from __future__ import annotations

import anyio
import pytest

from callgate import Envelope, ErrorKind, Gate, Principal, Status
from callgate.clock import ManualClock
from callgate.demo import demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

PREVIEW = "ops.budget_change_preview"
APPLY = "ops.budget_change_apply"
STATUS = "ops.budget_change_status"


async def _preview(gate: Gate, principal: Principal, campaign_id: str, budget: int) -> Envelope:
    env = await gate.call(
        PREVIEW, {"campaign_id": campaign_id, "new_daily_budget": budget}, principal=principal
    )
    assert env.status is Status.OK, env.error
    return env


async def _apply(gate: Gate, principal: Principal, preview_id: str) -> Envelope:
    return await gate.call(APPLY, {"preview_id": preview_id}, principal=principal)


async def _status(gate: Gate, principal: Principal, preview_id: str) -> Envelope:
    env = await gate.call(STATUS, {"preview_id": preview_id}, principal=principal)
    assert env.status is Status.OK, env.error
    return env


def _same_result(first: Envelope, second: Envelope) -> None:
    assert second.status is first.status
    assert second.payload == first.payload
    assert second.call_id == first.call_id


async def test_apply_twice_changes_once_and_returns_the_same_envelope(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview_id = (await _preview(gate, alice, "C-101", 1500)).payload["preview_id"]
    first = await _apply(gate, alice, preview_id)
    second = await _apply(gate, alice, preview_id)
    assert first.status is Status.OK, first.error
    assert (first.replayed, second.replayed) == (False, True)
    _same_result(first, second)
    assert first.payload["changed"] is True
    assert state.campaigns["C-101"].daily_budget == 1500


async def test_fifty_concurrent_applies_change_the_budget_once(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview_id = (await _preview(gate, alice, "C-101", 1500)).payload["preview_id"]
    results: list[Envelope] = []

    async def apply() -> None:
        results.append(await _apply(gate, alice, preview_id))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(apply)
    assert len(results) == 50
    assert all(env.status is Status.OK for env in results), {env.status for env in results}
    # A second run would have reported before=1500 and changed=false.
    assert {(env.payload["daily_budget_before"], env.payload["changed"]) for env in results} == {
        (1200, True)
    }
    assert len({env.call_id for env in results}) == 1
    assert sum(not env.replayed for env in results) == 1
    assert state.campaigns["C-101"].daily_budget == 1500


async def test_an_increase_over_50pct_files_an_approval_at_preview_time(
    gate: Gate, alice: Principal, bob: Principal, state: DemoState
) -> None:
    preview = await _preview(gate, alice, "C-101", 2160)
    assert preview.payload["impact"]["increase_pct"] == 80.0
    approval = preview.payload["approval"]
    approval_id = approval["approval_id"]
    assert approval["state"] == "pending"
    assert "campaign owner's approval" in approval["reason"]
    assert "approval" in preview.payload["next_step"]
    assert approval_id in preview.payload["next_step"]

    early = await _apply(gate, alice, preview.payload["preview_id"])
    assert early.status is Status.PENDING_APPROVAL
    assert early.approval.approval_id == approval_id
    assert early.decision is not None
    assert early.decision.rule == "budget-increase-over-50pct"
    assert state.campaigns["C-101"].daily_budget == 1200

    approvals = await gate.approvals()
    record = await approvals.get(approval_id)
    assert record is not None
    assert record.arguments["new_daily_budget"] == 2160
    assert record.arguments["tenant_id"] == "acme"
    assert record.impact is not None
    assert record.impact["daily_budget_before"] == 1200
    await approvals.approve(approval_id, by=bob)

    applied = await _apply(gate, alice, preview.payload["preview_id"])
    again = await _apply(gate, alice, preview.payload["preview_id"])
    assert applied.status is Status.OK, applied.error
    assert applied.decision is not None
    assert applied.decision.effect == "approved"
    assert applied.payload["daily_budget_after"] == 2160
    _same_result(applied, again)
    assert again.replayed
    assert state.campaigns["C-101"].daily_budget == 2160


async def test_an_increase_of_exactly_50pct_needs_no_approval(gate: Gate, alice: Principal) -> None:
    preview = await _preview(gate, alice, "C-101", 1800)
    assert preview.payload["impact"]["increase_pct"] == 50.0
    assert "approval" not in preview.payload
    assert (await _apply(gate, alice, preview.payload["preview_id"])).status is Status.OK


async def test_decreases_need_no_approval(gate: Gate, alice: Principal) -> None:
    preview = await _preview(gate, alice, "C-101", 100)
    assert preview.payload["impact"]["increase_pct"] < 0
    assert "approval" not in preview.payload


async def test_a_denied_change_answers_permission_with_the_reason(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview = await _preview(gate, alice, "C-101", 2160)
    approval_id = preview.payload["approval"]["approval_id"]
    await (await gate.approvals()).deny(
        approval_id,
        by=Principal("bob@acme.example", "acme"),
        reason="the autumn plan caps C-101 at 2,000",
    )
    env = await _apply(gate, alice, preview.payload["preview_id"])
    assert env.status is Status.ERROR
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "caps C-101 at 2,000" in env.error.message_for_model
    assert state.campaigns["C-101"].daily_budget == 1200
    status = await _status(gate, alice, preview.payload["preview_id"])
    assert status.payload["approval"]["state"] == "denied"


async def test_status_says_not_applied_then_applied(gate: Gate, alice: Principal) -> None:
    preview_id = (await _preview(gate, alice, "C-101", 1500)).payload["preview_id"]
    before = await _status(gate, alice, preview_id)
    assert before.payload["state"] == "not_applied"
    assert before.payload["preview_valid"] is True
    assert before.payload["impact"]["daily_budget_after"] == 1500
    await _apply(gate, alice, preview_id)
    after = await _status(gate, alice, preview_id)
    assert after.payload["state"] == "applied"
    assert after.payload["result"]["daily_budget_after"] == 1500


async def test_a_forged_preview_id_is_refused_and_the_model_told_to_preview_again(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview_id: str = (await _preview(gate, alice, "C-101", 1500)).payload["preview_id"]
    last = preview_id[-1]
    forged = preview_id[:-1] + ("A" if last != "A" else "B")
    env = await _apply(gate, alice, forged)
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert env.error.next_step is not None
    assert PREVIEW in env.error.next_step
    assert "again" in env.error.next_step
    assert state.campaigns["C-101"].daily_budget == 1200


@pytest.mark.parametrize("other", ["bob", "hiro"])
async def test_only_whoever_previewed_may_apply_or_check_it(
    gate: Gate,
    alice: Principal,
    other: str,
    request: pytest.FixtureRequest,
    state: DemoState,
) -> None:
    intruder: Principal = request.getfixturevalue(other)
    preview_id = (await _preview(gate, alice, "C-101", 1500)).payload["preview_id"]
    for tool in (APPLY, STATUS):
        env = await gate.call(tool, {"preview_id": preview_id}, principal=intruder)
        assert env.error is not None, tool
        assert env.error.kind is ErrorKind.PERMISSION, tool
        assert "another user or tenant" in env.error.message_for_model
    assert state.campaigns["C-101"].daily_budget == 1200
    # The rightful owner can still apply it.
    assert (await _apply(gate, alice, preview_id)).status is Status.OK


async def test_an_expired_preview_is_refused_and_the_model_told_to_preview_again(
    state: DemoState, alice: Principal
) -> None:
    clock = ManualClock()
    short_gate = Gate(
        build_toolboxes(state, budget_ttl=90),
        store=MemoryStore(),
        policy=demo_policy(),
        clock=clock,
    )
    async with short_gate:
        await _expired_preview(short_gate, clock, alice, state)


async def _expired_preview(
    short_gate: Gate, clock: ManualClock, alice: Principal, state: DemoState
) -> None:
    spec = short_gate.tool(PREVIEW)
    assert spec is not None
    assert "valid for 1.5 minutes" in spec.description
    preview = await _preview(short_gate, alice, "C-101", 1500)
    clock.advance(seconds=91)
    env = await _apply(short_gate, alice, preview.payload["preview_id"])
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "expired" in env.error.message_for_model
    assert env.error.next_step is not None
    assert PREVIEW in env.error.next_step
    assert state.campaigns["C-101"].daily_budget == 1200
    status = await _status(short_gate, alice, preview.payload["preview_id"])
    assert status.payload["state"] == "not_applied"
    assert status.payload["preview_valid"] is False
