"""ops.deploy_status and ops.deploy_rollback through the gate."""

from __future__ import annotations

from datetime import datetime

import pytest

from callgate import ErrorKind, Gate, Principal, Status
from callgate.demo._state import DemoState

pytestmark = pytest.mark.anyio

REASON = "checkout 5xx above 6% since 14:05 after 2.4.0"


async def test_status_of_a_running_deployment(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=alice)
    assert env.status is Status.OK
    assert env.payload["service"] == "checkout-api"
    assert env.payload["state"] == "running"
    assert (env.payload["version"], env.payload["previous_version"]) == ("2.4.0", "2.3.2")
    assert env.payload["started_at"].startswith("2025-11-03T14:02:00")


async def test_status_of_a_rolled_back_deployment_says_who_and_why(
    gate: Gate, alice: Principal
) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": "D-3"}, principal=alice)
    assert env.payload["state"] == "rolled_back"
    assert env.payload["rolled_back_by"] == "bob@acme.example"
    assert "invoice totals" in env.payload["rollback_reason"]


async def test_seeded_deployments_cover_both_tenants_and_every_state(
    gate: Gate, alice: Principal, hiro: Principal
) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for number in range(1, 7):
        deploy_id = f"D-{number}"
        for principal in (alice, hiro):
            env = await gate.call(
                "ops.deploy_status", {"deploy_id": deploy_id}, principal=principal
            )
            if env.ok:
                seen[deploy_id] = (principal.tenant or "", env.payload["state"])
    assert len(seen) == 6
    assert {tenant for tenant, _ in seen.values()} == {"acme", "globex"}
    assert {state for _, state in seen.values()} == {"running", "failed", "rolled_back"}


async def test_status_of_another_tenants_deployment_is_denied(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": "D-4"}, principal=alice)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "belongs to another tenant" in env.error.message_for_model
    assert "inventory-sync" not in env.error.message_for_model


@pytest.mark.parametrize("deploy_id", ["D-99", "deploy-1", "checkout-api"])
async def test_status_of_an_unknown_id_explains_the_format(
    gate: Gate, alice: Principal, deploy_id: str
) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": deploy_id}, principal=alice)
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert deploy_id in env.error.message_for_model
    assert '"D-" and a number' in env.error.message_for_model


async def test_status_accepts_a_lower_case_id(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": " d-1 "}, principal=alice)
    assert env.payload["id"] == "D-1"


async def test_rollback_returns_to_the_previous_version(
    gate: Gate, alice: Principal, state: DemoState, now: datetime
) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-1", "reason": REASON}, principal=alice
    )
    assert env.status is Status.OK
    assert env.payload["from_version"] == "2.4.0"
    assert env.payload["to_version"] == "2.3.2"
    assert env.payload["state"] == "rolled_back"
    assert env.payload["rolled_back_by"] == "alice@acme.example"
    assert env.payload["rolled_back_at"].startswith("2025-11-03T14:20:00")
    record = state.deployments["D-1"]
    assert (record.state, record.rollback_reason, record.rolled_back_at) == (
        "rolled_back",
        REASON,
        now,
    )

    status = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=alice)
    assert status.payload["state"] == "rolled_back"
    assert status.payload["rolled_back_by"] == "alice@acme.example"


async def test_rollback_of_a_failed_rollout_is_allowed(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.deploy_rollback",
        {"deploy_id": "D-2", "reason": "index mapping missing"},
        principal=alice,
    )
    assert env.status is Status.OK
    assert env.payload["to_version"] == "1.7.5"


async def test_second_rollback_is_a_business_state_error(gate: Gate, alice: Principal) -> None:
    args = {"deploy_id": "D-1", "reason": REASON}
    first = await gate.call("ops.deploy_rollback", args, principal=alice)
    assert first.ok
    second = await gate.call("ops.deploy_rollback", args, principal=alice)
    assert second.error is not None
    assert second.error.kind is ErrorKind.BUSINESS_STATE
    assert "already rolled back" in second.error.message_for_model
    assert "alice@acme.example" in second.error.message_for_model
    assert second.error.retryable is False


async def test_rollback_of_a_seeded_rolled_back_deployment(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-3", "reason": REASON}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert "bob@acme.example" in env.error.message_for_model


async def test_rollback_without_a_previous_version_is_a_business_state_error(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-6", "reason": REASON}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert "no previous version" in env.error.message_for_model
    assert state.deployments["D-6"].state == "running"


async def test_rollback_of_another_tenants_deployment_is_denied(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-4", "reason": REASON}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "another tenant" in env.error.message_for_model
    assert state.deployments["D-4"].state == "running"


async def test_rollback_needs_a_reason_of_some_length(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-1", "reason": "bad"}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "reason" in env.error.message_for_model


async def test_rollback_ignores_a_user_id_sent_by_the_model(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.deploy_rollback",
        {"deploy_id": "D-1", "reason": REASON, "user_id": "mallory@acme.example"},
        principal=alice,
    )
    assert env.ok
    assert state.deployments["D-1"].rolled_back_by == "alice@acme.example"


async def test_rollback_needs_the_rollback_scope(
    gate: Gate, carol: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.deploy_rollback", {"deploy_id": "D-1", "reason": REASON}, principal=carol
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "deploy:rollback" in env.error.message_for_model
    assert state.deployments["D-1"].state == "running"


async def test_status_needs_the_read_scope(gate: Gate, carol: Principal) -> None:
    env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=carol)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "deploy:read" in env.error.message_for_model
