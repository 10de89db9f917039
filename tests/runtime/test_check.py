"""Gate.check: how the chain would take a call now, with no side effect at all."""

from __future__ import annotations

import pytest

from callgate import Gate, Policy, Principal, Rule, Toolbox
from callgate.ratelimit import Rate, RateLimits
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"ops:read", "ops:write"})
READER = Principal("rita", tenant="acme", scopes={"ops:read"})


def _gate(ran: list[str]) -> Gate:
    box = Toolbox("ops")

    @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
    def status(deploy_id: str) -> str:
        """Show a deployment's state.

        Args:
            deploy_id: The deployment, like D-1.
        """
        ran.append(f"status {deploy_id}")
        return "running"

    @box.tool(scopes={"ops:write"}, destructive=True, open_world=False)
    def rollback(deploy_id: str) -> str:
        """Roll a deployment back.

        Args:
            deploy_id: The deployment, like D-1.
        """
        ran.append(f"rollback {deploy_id}")
        return "rolled back"

    policy = Policy([Rule("require_approval", tools=["ops.rollback"], reason="a person decides")])
    once = RateLimits(per_principal=Rate.parse("1/hour"), backend="memory")
    return Gate([box], store=MemoryStore(), policy=policy, rate_limits=once)


async def test_check_says_what_the_chain_would_decide_and_runs_nothing() -> None:
    ran: list[str] = []
    async with _gate(ran) as gate:
        allowed = await gate.check("ops.status", {"deploy_id": "D-1"}, principal=ALICE)
        parked = await gate.check("ops.rollback", {"deploy_id": "D-1"}, principal=ALICE)
        unknown = await gate.check("ops.restart", {}, principal=ALICE)
        bad = await gate.check("ops.status", {"deploy": "D-1"}, principal=ALICE)
        forbidden = await gate.check("ops.rollback", {"deploy_id": "D-1"}, principal=READER)
        wrapped = await gate.check(
            "callgate.call_tool",
            {"name": "ops.rollback", "arguments": {"deploy_id": "D-2"}},
            principal=ALICE,
        )

        assert (allowed.outcome, allowed.runs) == ("allow", True)
        assert allowed.contract_hash == gate.tool("ops.status").contract_hash  # type: ignore[union-attr]
        assert (parked.outcome, parked.reason, parked.runs) == (
            "require_approval",
            "a person decides",
            False,
        )
        assert unknown.outcome == "missing"
        assert bad.outcome == "refused:validate" and "deploy_id" in (bad.reason or "")
        assert forbidden.outcome == "refused:authorize"
        assert (wrapped.tool, wrapped.outcome) == ("ops.rollback", "require_approval")

        # Nothing ran, nothing was parked or audited, and the quota is unspent.
        assert ran == []
        assert await gate.audit() == []
        assert await (await gate.approvals()).list() == []
        first = await gate.call("ops.status", {"deploy_id": "D-1"}, principal=ALICE)
        assert first.status == "ok" and ran == ["status D-1"]
