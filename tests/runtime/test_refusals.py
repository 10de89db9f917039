"""Refusals: scopes before anything about the arguments, and the audit says who refused."""

from __future__ import annotations

import pytest

from callgate import ErrorKind, Gate, Policy, Principal, Rule, Toolbox
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

READER = Principal("alice", "acme", scopes={"deploy:read"})


def _ops() -> Toolbox:
    box = Toolbox("ops")

    @box.tool(scopes={"deploy:rollback"}, destructive=True)
    def deploy_rollback(deploy_id: str, reason: str) -> str:
        """Roll a deployment back.

        Args:
            deploy_id: Like D-1.
            reason: Why, for the change log.
        """
        return f"{deploy_id} rolled back"

    @box.tool(scopes={"deploy:read"}, read_only=True)
    def deploy_status(deploy_id: str) -> str:
        """Show a deployment.

        Args:
            deploy_id: Like D-1.
        """
        return "running"

    return box


async def test_a_caller_without_the_scope_learns_nothing_about_the_parameters() -> None:
    async with Gate([_ops()], store=MemoryStore()) as gate:
        for arguments in ({}, {"deploy": "D-1"}, "not json", {"deploy_id": "D-1", "reason": "x"}):
            env = await gate.call("ops.deploy_rollback", arguments, principal=READER)
            assert env.error is not None
            assert env.error.kind is ErrorKind.PERMISSION, env.error
            text = f"{env.error.message_for_model} {env.error.next_step}"
            assert "deploy:rollback" in text
            assert "reason" not in text and "Example" not in text


async def test_the_audit_says_which_stage_refused_or_what_policy_decided() -> None:
    policy = Policy([Rule("deny", tools=["ops.deploy_status"], when='args.deploy_id == "D-9"')])
    async with Gate([_ops()], store=MemoryStore(), policy=policy) as gate:
        await gate.call("ops.deploy_statuss", {"deploy_id": "D-1"}, principal=READER)
        await gate.call("ops.deploy_rollback", {"deploy_id": "D-1"}, principal=READER)
        await gate.call("ops.deploy_status", {"deploy": "D-1"}, principal=READER)
        await gate.call("ops.deploy_status", {"deploy_id": "D-9"}, principal=READER)
        await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=READER)
        records = [r for r in await gate.audit() if r.phase == "final"]
    assert [(r.decision, r.outcome) for r in records] == [
        ("refused:resolve", "construction"),
        ("refused:authorize", "permission"),
        ("refused:validate", "construction"),
        ("deny", "permission"),
        ("allow", "ok"),
    ]
    assert "Unknown tool 'ops.deploy_statuss'" in (records[0].decision_reason or "")
    assert "deploy:rollback" in (records[1].decision_reason or "")
