"""Rate limits on every backend: what a caller over a limit is told, and what runs."""

from __future__ import annotations

import pytest

from callgate import ErrorKind, Principal, Status

from .conftest import ALICE, BOB, GateFactory, Shared, ops

pytestmark = pytest.mark.anyio


async def test_a_principal_over_its_limit_is_refused_before_the_tool_runs(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, ran = ops()
    gate = make_gate([box], shared.limits(per_principal="3/minute"))
    answers = [
        await gate.call(tool, {"deploy_id": "D-1"}, principal=ALICE)
        for tool in ("ops.deploy_status", "ops.deploy_log", "ops.deploy_status", "ops.deploy_log")
    ]

    assert [a.status for a in answers[:3]] == [Status.OK] * 3
    refused = answers[3]
    assert refused.error is not None
    assert refused.error.kind is ErrorKind.TRANSIENT and refused.error.retryable
    assert "your limit of 3/minute calls in all" in refused.error.message_for_model
    assert "20 seconds" in refused.error.message_for_model  # one call every 20 s
    assert "20 seconds" in (refused.error.next_step or "")
    assert ran == {"deploy_status": 2, "deploy_log": 1, "deploy_rollback": 0}
    # Another principal has a budget of its own.
    assert (await gate.call("ops.deploy_log", {"deploy_id": "D-1"}, principal=BOB)).error is None


async def test_a_tool_limit_is_per_principal_and_the_others_still_run(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, ran = ops()
    gate = make_gate([box], shared.limits(per_tool={"ops.deploy_rollback": "2/hour"}))
    for _ in range(2):
        env = await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE)
        assert env.error is None
    env = await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE)

    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert "the limit of 2/hour calls of ops.deploy_rollback" in env.error.message_for_model
    assert "30 minutes" in env.error.message_for_model
    assert (
        await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
    ).error is None
    assert (
        await gate.call("ops.deploy_rollback", {"deploy_id": "D-2"}, principal=BOB)
    ).error is None
    assert ran == {"deploy_status": 1, "deploy_log": 0, "deploy_rollback": 3}


async def test_a_pattern_s_budget_is_shared_by_the_tools_it_matches(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, ran = ops()
    gate = make_gate(
        [box], shared.limits(per_tool={"ops.deploy_s*": "1/minute", "ops.*": "3/minute"})
    )
    first = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
    second = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
    third = await gate.call("ops.deploy_log", {"deploy_id": "D-1"}, principal=ALICE)
    fourth = await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE)
    fifth = await gate.call("ops.deploy_log", {"deploy_id": "D-1"}, principal=ALICE)

    assert second.error is not None
    assert "matching 'ops.deploy_s*'" in second.error.message_for_model
    # The refused call used none of ops.*: three calls of it ran, the fifth is over.
    assert [e.error is None for e in (first, third, fourth)] == [True, True, True]
    assert fifth.error is not None and "'ops.*'" in fifth.error.message_for_model
    assert ran == {"deploy_status": 1, "deploy_log": 1, "deploy_rollback": 1}


async def test_the_budget_comes_back_as_time_passes(shared: Shared, make_gate: GateFactory) -> None:
    box, ran = ops()
    gate = make_gate([box], shared.limits(per_principal="2/minute"))

    async def status() -> bool:
        env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
        return env.error is None

    assert [await status() for _ in range(3)] == [True, True, False]
    shared.clock.advance(seconds=29)
    assert not await status()  # one call every 30 s: not yet
    shared.clock.advance(seconds=1)
    assert [await status(), await status()] == [True, False]
    shared.clock.advance(minutes=5)  # a long pause refills the bucket, no more
    assert [await status() for _ in range(3)] == [True, True, False]
    assert ran["deploy_status"] == 5


async def test_scope_and_validation_come_first_and_last_around_the_limit(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, _ = ops()
    gate = make_gate([box], shared.limits(per_principal="1/hour"))
    reader = Principal("carol", "acme", scopes={"deploy:read"})
    # No scope: a permission error, whatever the limit (and it counts for nothing).
    denied = await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=reader)
    assert denied.error is not None and denied.error.kind is ErrorKind.PERMISSION
    # A call with bad arguments is counted: the limit is checked before validation.
    bad = await gate.call("ops.deploy_status", {"deploy": "D-1"}, principal=reader)
    assert bad.error is not None and bad.error.kind is ErrorKind.CONSTRUCTION
    over = await gate.call("ops.deploy_status", {"deploy": "D-1"}, principal=reader)
    assert over.error is not None and over.error.kind is ErrorKind.TRANSIENT
    assert "deploy_id" not in over.error.message_for_model


async def test_a_refused_call_is_audited_with_the_limit_that_refused_it(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, _ = ops()
    gate = make_gate([box], shared.limits(per_tool={"ops.deploy_rollback": "1/day"}))
    await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE)
    env = await gate.call("ops.deploy_rollback", {"deploy_id": "D-2"}, principal=ALICE)
    records = [r for r in await gate.audit() if r.phase == "final"]

    assert [(r.decision, r.outcome) for r in records] == [
        ("allow", "ok"),
        ("refused:rate_limit", "transient"),
    ]
    refused = records[1]
    assert refused.call_id == env.call_id and refused.user == "alice"
    assert refused.detail["rate_limit"] == {
        "limit": "per_tool",
        "retry_after": 86400.0,
        "rate": "1/day",
        "rule": "ops.deploy_rollback",
    }
    assert "1/day" in (refused.decision_reason or "")


async def test_tools_served_under_other_names_are_named_the_caller_s_way(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, _ = ops()
    gate = make_gate([box], shared.limits(per_tool={"ops.deploy_rollback": "1/hour"}))
    names = _Underscored()
    await gate.call("ops__deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE, names=names)
    env = await gate.call(
        "ops__deploy_rollback", {"deploy_id": "D-1"}, principal=ALICE, names=names
    )

    assert env.error is not None
    assert "ops__deploy_rollback" in env.error.message_for_model
    assert "ops.deploy_rollback" not in env.error.message_for_model


class _Underscored:
    """How an MCP host names the tools: ``ops__deploy_rollback``."""

    def shown(self, name: str) -> str:
        return name.replace(".", "__")

    def full(self, name: str) -> str | None:
        return name.replace("__", ".")
