"""Two gates on one backend (two replicas) hold one limit together, under a burst."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from callgate import Envelope

from .conftest import ALICE, BOB, GateFactory, Shared, ops

pytestmark = pytest.mark.anyio

SHARED_BACKENDS = pytest.mark.parametrize(
    "shared",
    ["store-sqlite", pytest.param("store-postgres", marks=pytest.mark.postgres), "redis"],
    indirect=True,
)


@SHARED_BACKENDS
async def test_two_replicas_admit_exactly_the_limit_of_a_concurrent_burst(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, ran = ops()
    limits = shared.limits(per_principal="50/minute", per_tool={"ops.deploy_rollback": "7/hour"})
    a, b = make_gate([box], limits), make_gate([box], limits)

    async def rollback(gate_index: int, n: int) -> Envelope:
        gate = (a, b)[gate_index % 2]
        return await gate.call("ops.deploy_rollback", {"deploy_id": f"D-{n}"}, principal=ALICE)

    with anyio.fail_after(30):
        answers = await asyncio.gather(*(rollback(n, n) for n in range(40)))

    admitted = [env for env in answers if env.error is None]
    assert len(admitted) == 7
    assert ran["deploy_rollback"] == 7
    # Each gate's audit is the shared store's (or its own): every refusal is there.
    refused = [env for env in answers if env.error is not None]
    assert all("7/hour" in (env.error.message_for_model if env.error else "") for env in refused)


@SHARED_BACKENDS
async def test_a_principal_s_budget_spent_on_one_replica_is_spent_on_the_other(
    shared: Shared, make_gate: GateFactory
) -> None:
    box, ran = ops()
    limits = shared.limits(per_principal="4/minute")
    a, b = make_gate([box], limits), make_gate([box], limits)
    for gate in (a, b, a, b):
        assert (await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)).ok
    over_a = await a.call("ops.deploy_log", {"deploy_id": "D-1"}, principal=ALICE)
    over_b = await b.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)

    assert over_a.error is not None and over_b.error is not None
    assert (await b.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=BOB)).ok
    shared.clock.advance(seconds=15)  # one call every 15 s comes back, on either replica
    assert (await b.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)).ok
    assert not (await a.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)).ok
    assert ran["deploy_status"] + ran["deploy_log"] == 6
