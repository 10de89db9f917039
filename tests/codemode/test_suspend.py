"""A program whose call needs a person's approval waits, kept in the store, and goes
on where it stopped once decided: in another process, exactly once."""

from __future__ import annotations

import anyio
import pytest

from callgate import Gate, Principal
from callgate.runtime.envelope import Envelope
from callgate.runtime.policy import Policy, Rule
from tests.codemode.conftest import GateFactory
from tests.codemode.toolkit import shop

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
BOB = Principal("bob", tenant="acme")
RUN = "callgate.run_code"
POLICY = Policy([Rule(effect="require_approval", tools=("shop.refund",), reason="refunds")])

PROGRAM = """
orders = await shop.list_orders()
print("read", len(orders["orders"]), "orders")
done = await shop.refund(order_id="O-3")
print("refund:", done)
{"first": orders["orders"][0]["id"], "refund": done}
"""


async def run(gate: Gate, code: str = PROGRAM, who: Principal = ALICE) -> Envelope:
    return await gate.call(RUN, {"code": code}, principal=who)


async def count(gate: Gate, tool: str) -> int:
    return sum(1 for r in await gate.audit() if r.tool == tool and r.phase == "final")


async def test_a_program_waits_and_goes_on_in_another_process(
    durable_gates: GateFactory,
) -> None:
    first = durable_gates(shop(), policy=POLICY)
    parked = await run(first)

    assert parked.status == "pending_approval"
    assert parked.approval is not None
    assert parked.error is not None
    assert "paused" in parked.error.message_for_model
    assert "same code" in (parked.error.next_step or "")
    assert await count(first, "shop.refund") == 1  # parked, not run
    await (await first.approvals()).approve(parked.approval.approval_id, by=BOB)
    await first.aclose()

    second = durable_gates(shop(), policy=POLICY)  # another process: a new sandbox pool
    done = await run(second)

    assert done.ok, done.error
    assert done.payload["result"] == {"first": "O-0", "refund": "refunded O-3 (refund #1)"}
    # What it printed before it waited is kept; the read before it is not made again.
    assert done.payload["printed"] == "read 10 orders\nrefund: refunded O-3 (refund #1)\n"
    assert await count(second, "shop.list_orders") == 1

    again = await run(second)  # ended: the same code now runs afresh
    assert again.status == "pending_approval"


async def test_a_denied_call_raises_in_the_program(durable_gates: GateFactory) -> None:
    gate = durable_gates(shop(), policy=POLICY)
    code = """
try:
    await shop.refund(order_id="O-1")
    outcome = "refunded"
except PermissionError as e:
    outcome = str(e)
outcome
"""
    parked = await run(gate, code)
    assert parked.approval is not None
    await (await gate.approvals()).deny(parked.approval.approval_id, by=BOB, reason="not now")

    done = await run(gate, code)

    assert done.ok, done.error
    assert done.payload["result"].startswith("permission:")
    assert "not now" in done.payload["result"]


async def test_gate_resume_with_the_approval_goes_on_with_the_program(
    durable_gates: GateFactory,
) -> None:
    gate = durable_gates(shop(), policy=POLICY)
    parked = await run(gate)
    assert parked.approval is not None
    await (await gate.approvals()).approve(parked.approval.approval_id, by=BOB)

    done = await gate.resume(parked.approval.approval_id, principal=ALICE)

    assert done.tool == RUN
    assert done.ok, done.error
    assert done.payload["result"]["refund"] == "refunded O-3 (refund #1)"


async def test_two_processes_taking_it_up_at_once_refund_once(
    durable_gates: GateFactory,
) -> None:
    refunds: list[str] = []
    gate = durable_gates(shop(refunds=refunds), policy=POLICY)
    parked = await run(gate)
    assert parked.approval is not None
    await (await gate.approvals()).approve(parked.approval.approval_id, by=BOB)
    other = durable_gates(shop(refunds=refunds), policy=POLICY)

    results: list[Envelope] = []

    async def take_up(g: Gate) -> None:
        results.append(await run(g))

    async with anyio.create_task_group() as group:
        group.start_soon(take_up, gate)
        group.start_soon(take_up, other)

    assert refunds == ["O-3"]
    assert any(r.ok for r in results), [r.error for r in results]


async def test_someone_else_cannot_take_up_a_program(durable_gates: GateFactory) -> None:
    gate = durable_gates(shop(), policy=POLICY)
    parked = await run(gate)
    assert parked.approval is not None
    await (await gate.approvals()).approve(parked.approval.approval_id, by=BOB)

    bobs = await run(gate, who=BOB)  # the same code: Bob's own, new program

    assert bobs.status == "pending_approval"
    assert bobs.approval is not None
    assert bobs.approval.approval_id != parked.approval.approval_id
