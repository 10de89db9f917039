"""Code mode in the agent loop: the model is offered run_code with its functions, a
program that waits pauses the run, and resuming the run goes on with the program."""

from __future__ import annotations

import pytest

from callgate import Gate, Principal
from callgate.agent.loop import Agent
from callgate.agent.messages import ForcedTool
from callgate.agent.model import ScriptedModel, call, reply
from callgate.codemode import CodeModeSettings
from callgate.runtime.policy import Policy, Rule
from tests.codemode.conftest import GateFactory
from tests.codemode.toolkit import shop

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
BOB = Principal("bob", tenant="acme")
PROGRAM = 'n = len((await shop.list_orders())["orders"])\nawait shop.refund(order_id="O-1")\nn'


async def test_the_model_sees_run_code_and_the_functions_it_may_call() -> None:
    model = ScriptedModel([call("callgate.run_code", {"code": PROGRAM}), reply("10 orders.")])
    async with Gate(shop(), store="memory://", code_mode=CodeModeSettings(enabled=True)) as gate:
        result = await Agent(gate, model, principal=ALICE, code_mode=True).run("Count orders")

    assert result.status == "completed", result.reason
    offered = model.requests[0].tools
    assert [tool.name for tool in offered] == ["callgate.run_code"]
    description = offered[0].description
    assert "async def list_orders(*, page: int = ...)" in description
    assert "secret_report" not in description  # not the caller's
    outcome = result.calls[0]
    assert outcome.payload["result"] == 10


async def test_a_program_that_waits_pauses_the_run_and_resuming_finishes_it(
    durable_gates: GateFactory,
) -> None:
    policy = Policy([Rule(effect="require_approval", tools=("shop.refund",))])
    gate = durable_gates(shop(), policy=policy)
    first = ScriptedModel([call("callgate.run_code", {"code": PROGRAM})])
    paused = await Agent(gate, first, principal=ALICE, code_mode=True).run("Refund O-1")

    assert paused.status == "waiting_approval", paused.reason
    (approval_id,) = paused.pending_approvals
    await (await gate.approvals()).approve(approval_id, by=BOB)

    later = ScriptedModel([reply("Refunded; there were 10 orders.")])
    done = await Agent(gate, later, principal=ALICE, code_mode=True).resume(paused.run_id)

    assert done.status == "completed", done.reason
    assert done.calls[-1].payload["result"] == 10
    refunds = [r for r in await gate.audit() if r.tool == "shop.refund" and r.outcome == "ok"]
    assert len(refunds) == 1


async def test_code_mode_needs_a_gate_that_runs_programs() -> None:
    async with Gate(shop(), store="memory://") as gate:
        with pytest.raises(ValueError, match="code_mode=CodeModeSettings"):
            Agent(gate, ScriptedModel([]), principal=ALICE, code_mode=True)


async def test_run_code_can_be_the_forced_tool_and_nothing_else_can() -> None:
    async with Gate(shop(), store="memory://", code_mode=CodeModeSettings(enabled=True)) as gate:
        forced = Agent(
            gate,
            ScriptedModel([call("callgate.run_code", {"code": "1 + 1"})]),
            principal=ALICE,
            code_mode=True,
            tool_choice=ForcedTool("callgate.run_code"),
        )
        result = await forced.run("Add")
        assert result.calls[0].payload["result"] == 2
        other = Agent(
            gate,
            ScriptedModel([]),
            principal=ALICE,
            code_mode=True,
            tool_choice=ForcedTool("shop.list_orders"),
        )
        with pytest.raises(ValueError, match=r"offered callgate\.run_code alone"):
            await other.run("List")
