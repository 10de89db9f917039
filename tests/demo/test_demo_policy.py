"""The demo policy through the gate: approvals and denials that users will see."""

from __future__ import annotations

import pytest

from callgate import ErrorKind, Gate, Principal, Status
from callgate.demo._state import DemoState

pytestmark = pytest.mark.anyio


async def test_email_outside_the_domain_needs_approval_and_sends_nothing(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["bob@acme.example", "x@partner.example"], "subject": "hi", "body": "x"},
        principal=alice,
    )
    assert env.status is Status.PENDING_APPROVAL
    assert env.decision is not None
    assert env.decision.rule == "external-email-needs-approval"
    assert "outside your organization" in env.approval.reason
    assert state.outbox == []


async def test_domain_comparison_ignores_the_case_of_the_domain(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["Bob@ACME.Example"], "subject": "hi", "body": "x"},
        principal=alice,
    )
    assert env.status is Status.OK
    assert state.outbox[0].to == ("Bob@acme.example",)


async def test_lookalike_domain_is_outside(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["security-audit@acme-support.example"], "subject": "rota", "body": "x"},
        principal=alice,
    )
    assert env.status is Status.PENDING_APPROVAL


async def test_sender_without_a_domain_needs_approval_for_every_email(
    gate: Gate, state: DemoState
) -> None:
    dave = Principal("dave", tenant="acme", scopes=["email:send"])
    env = await gate.call(
        "ops.send_email", {"to": ["bob@acme.example"], "subject": "hi", "body": "x"}, principal=dave
    )
    assert env.status is Status.PENDING_APPROVAL
    assert state.outbox == []


async def test_budget_increase_over_50pct_needs_approval(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview = await gate.call(
        "ops.budget_change_preview",
        {"campaign_id": "C-101", "new_daily_budget": 1801},
        principal=alice,
    )
    assert preview.payload["impact"]["increase_pct"] == 50.09
    env = await gate.call(
        "ops.budget_change_apply", {"preview_id": preview.payload["preview_id"]}, principal=alice
    )
    assert env.status is Status.PENDING_APPROVAL
    assert env.decision is not None
    assert env.decision.rule == "budget-increase-over-50pct"
    assert "more than 50%" in env.approval.reason
    assert env.approval.approval_id == preview.payload["approval"]["approval_id"]
    assert state.campaigns["C-101"].daily_budget == 1200


async def test_large_absolute_budgets_within_50pct_are_allowed(
    gate: Gate, hiro: Principal, state: DemoState
) -> None:
    preview = await gate.call(
        "ops.budget_change_preview",
        {"campaign_id": "C-202", "new_daily_budget": 180_000},
        principal=hiro,
    )
    env = await gate.call(
        "ops.budget_change_apply", {"preview_id": preview.payload["preview_id"]}, principal=hiro
    )
    assert env.status is Status.OK, env.error
    assert state.campaigns["C-202"].daily_budget == 180_000


async def test_rollback_by_someone_not_on_call_is_denied(
    gate: Gate, bob: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.deploy_rollback",
        {"deploy_id": "D-1", "reason": "checkout errors after 2.4.0"},
        principal=bob,
    )
    assert env.status is Status.ERROR
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "on-call" in env.error.message_for_model
    assert env.decision is not None
    assert env.decision.rule == "rollback-needs-oncall"
    assert state.deployments["D-1"].state == "running"


async def test_reads_are_allowed_by_default(gate: Gate, bob: Principal) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=bob)
    assert env.status is Status.OK
    assert env.decision is not None
    assert env.decision.effect == "allow"
