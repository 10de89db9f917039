"""The agent loop with a scripted model: calls go through the gate, results come back paired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import Gate, Policy, Principal, Rule, Toolbox, Trusted
from callgate.agent import (
    AssistantMessage,
    ForcedTool,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolResults,
    UserMessage,
    call,
    calls,
    reply,
)
from callgate.agent.loop import Agent, RunEvent, RunLimits
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"ops:read", "ops:write"})
BOB = Principal("bob", tenant="acme", scopes={"ops:read", "ops:write"})
POLICY = Policy(
    [Rule("require_approval", tools=["ops.pay"], reason="payments need a second person")]
)


class Ops:
    """Tools that record what ran, in which order, and how many at once."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.in_flight = 0
        self.most_at_once = 0
        self.release = anyio.Event()
        self.hold_reads = 0

    def toolbox(self) -> Toolbox:
        box = Toolbox("ops")

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        async def status(deploy_id: str) -> dict[str, str]:
            """Show a deployment's state.

            Args:
                deploy_id: The deployment, like D-1.
            """
            self.in_flight += 1
            self.most_at_once = max(self.most_at_once, self.in_flight)
            if self.hold_reads and self.in_flight >= self.hold_reads:
                self.release.set()  # as many reads as expected are running together
            if self.hold_reads:
                with anyio.fail_after(5):
                    await self.release.wait()
            self.in_flight -= 1
            self.ran.append(f"status {deploy_id}")
            return {"deploy_id": deploy_id, "state": "failed"}

        @box.tool(scopes={"ops:write"}, idempotent=True, open_world=False)
        def rollback(deploy_id: str, tenant_id: Trusted[str]) -> str:
            """Roll a deployment back.

            Args:
                deploy_id: The deployment, like D-1.
            """
            self.ran.append(f"rollback {deploy_id}")
            return f"{deploy_id} rolled back in {tenant_id}"

        @box.tool(scopes={"ops:write"}, idempotent=False, open_world=False)
        def pay(amount: int) -> str:
            """Pay a supplier.

            Args:
                amount: In cents.
            """
            self.ran.append(f"pay {amount}")
            return f"paid {amount}"

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        def record_invoice(number: str, total: float) -> dict[str, Any]:
            """Record the invoice's fields exactly as read from the document.

            Args:
                number: The invoice number.
                total: The total amount.
            """
            return {"number": number, "total": total}

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        async def wait_forever() -> str:
            """Never answers (for the wall-time limit)."""
            await anyio.Event().wait()
            return "never"

        return box


@pytest.fixture
def ops() -> Ops:
    return Ops()


async def test_a_text_answer_completes_the_run(ops: Ops) -> None:
    model = ScriptedModel([reply("All deployments are healthy.")], tokens=(120, 8))
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, model, principal=ALICE, system="Be brief.").run("Status?")
    [request] = model.requests

    assert result.status == "completed" and result.output == "All deployments are healthy."
    assert result.usage.requests == 1 and result.usage.input_tokens == 120
    assert result.usage.output_tokens == 8 and result.usage.tool_definition_tokens > 0
    assert request.system == "Be brief."
    # Every tool alice may call is offered, with its model-facing schema only
    # (callgate's own only once they can be used: tests/agent/test_offered_tools.py).
    offered = {tool.name: tool for tool in request.tools}
    assert {"ops.status", "ops.rollback"} <= set(offered)
    assert "tenant_id" not in offered["ops.rollback"].input_schema["properties"]


async def test_reads_of_a_turn_run_together_and_results_come_back_paired(ops: Ops) -> None:
    ops.hold_reads = 3  # each read waits until three are running at once
    turn = calls(
        ("ops.status", {"deploy_id": "D-1"}),
        ("ops.status", {"deploy_id": "D-2"}),
        ("ops.status", {"deploy_id": "D-3"}),
    )
    model = ScriptedModel([turn, reply("D-1..3 failed.")])
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Check D-1 to D-3")
    second = model.requests[1]
    [*_, results] = second.messages

    assert ops.most_at_once == 3
    assert isinstance(results, ToolResults)
    assert [r.call_id for r in results.results] == [c.id for c in turn.message.tool_calls]
    assert all('"state":"failed"' in r.content for r in results.results)
    assert result.usage.tool_calls == 3 and result.usage.calls_by_risk == {"read": 3}


async def test_writes_run_one_at_a_time_in_the_models_order(ops: Ops) -> None:
    turn = calls(
        ("ops.rollback", {"deploy_id": "D-1"}),
        ("ops.status", {"deploy_id": "D-1"}),
        ("ops.status", {"deploy_id": "D-2"}),
        ("ops.rollback", {"deploy_id": "D-2"}),
    )
    model = ScriptedModel([turn, reply("Done.")])
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Roll back D-1 and D-2")

    # The reads between the writes see the first write done and run before the second.
    assert ops.ran[0] == "rollback D-1" and ops.ran[-1] == "rollback D-2"
    assert sorted(ops.ran[1:3]) == ["status D-1", "status D-2"]
    assert result.status == "completed"


async def test_concurrency_can_be_turned_off(ops: Ops) -> None:
    turn = calls(("ops.status", {"deploy_id": "D-1"}), ("ops.status", {"deploy_id": "D-2"}))
    model = ScriptedModel([turn, reply("ok")])
    limits = RunLimits(concurrent_reads=False)
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        await Agent(gate, model, principal=ALICE, limits=limits).run("Check")
    assert ops.most_at_once == 1
    assert model.requests[0].parallel_tool_calls is False


async def test_errors_go_back_to_the_model_with_what_to_do_next(ops: Ops) -> None:
    bad = ModelResponse(
        parts=(
            ToolCall(id="c1", name="ops.rolback", arguments={"deploy_id": "D-1"}),
            ToolCall(id="c2", name="ops.status", arguments={"deploy": "D-1"}),
            ToolCall(id="c3", name="ops.status", raw_arguments='{"deploy_id": '),
        ),
        stop_reason="tool_use",
    )
    model = ScriptedModel([bad, reply("Let me fix that.")])
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Roll back D-1")
    [*_, results] = model.requests[1].messages

    assert isinstance(results, ToolResults)
    unknown, misnamed, broken = results.results
    assert unknown.is_error and "ops.rollback" in unknown.content  # did you mean
    assert misnamed.is_error and "deploy_id" in misnamed.content
    assert broken.is_error and "Next step:" in broken.content
    assert result.usage.errors == 3 and result.usage.outcomes == {"construction": 3}
    assert ops.ran == []


@pytest.mark.parametrize(
    ("limits", "script", "reason", "requests"),
    [
        (
            RunLimits(max_turns=2),
            [call("ops.status", {"deploy_id": "D-1"})] * 3,
            "turn limit (2)",
            2,
        ),
        (
            RunLimits(max_tool_calls=2),
            [calls(*[("ops.status", {"deploy_id": f"D-{i}"}) for i in range(3)])],
            "tool call limit (2)",
            1,
        ),
        (
            RunLimits(max_tokens=150),
            [call("ops.status", {"deploy_id": "D-1"})] * 3,
            "token limit (150)",
            2,  # 110 tokens a request: the second reaches the limit
        ),
        (RunLimits(wall_time=0.3), [call("ops.wait_forever")], "wall time limit (0.3 s)", 1),
    ],
)
async def test_a_limit_ends_the_run_with_its_reason(
    ops: Ops, limits: RunLimits, script: list[ModelResponse], reason: str, requests: int
) -> None:
    model = ScriptedModel(script, tokens=(100, 10))
    events: list[RunEvent] = []
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        agent = Agent(gate, model, principal=ALICE, limits=limits, on_event=events.append)
        with anyio.fail_after(10):
            result = await agent.run("Keep checking")
        stored = await gate.store.get_run(result.run_id)

    assert result.status == "stopped" and reason in result.reason
    assert events[-1].kind == "stopped" and reason in events[-1].text
    assert stored is not None and stored.status == "stopped"
    # Stopped at the limit, not one request after it.
    assert len(model.requests) == result.usage.requests == requests


async def test_a_forced_tool_extracts_structured_data_and_ends_the_run(ops: Ops) -> None:
    extraction = call("ops.record_invoice", {"number": "INV-7", "total": 120.5})
    model = ScriptedModel([extraction])
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        agent = Agent(
            gate,
            model,
            principal=ALICE,
            tools=["ops.record_invoice"],
            tool_choice=ForcedTool(name="ops.record_invoice"),
        )
        result = await agent.run("Invoice INV-7, total 120.50 EUR")
    [request] = model.requests

    assert request.tool_choice == ForcedTool(name="ops.record_invoice")
    assert [t.name for t in request.tools] == ["ops.record_invoice"]
    assert result.status == "completed"
    assert result.calls[0].payload == {"number": "INV-7", "total": 120.5}


async def test_a_forced_call_that_waited_for_approval_ends_the_run_when_resumed(
    ops: Ops,
) -> None:
    model = ScriptedModel([call("ops.pay", {"amount": 5000})])
    async with Gate([ops.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
        agent = Agent(gate, model, principal=ALICE, tool_choice=ForcedTool("ops.pay"))
        first = await agent.run("Pay 5000")
        [approval_id] = first.pending_approvals
        await (await gate.approvals()).approve(approval_id, by=Principal("bob", "acme"))
        done = await agent.resume(first.run_id)

    # Asked once: asking again would have forced a second payment (and approval).
    assert len(model.requests) == 1 and ops.ran == ["pay 5000"]
    assert done.status == "completed", done.reason
    assert done.reason == "the forced tool ops.pay was called"
    assert [c.payload for c in done.calls] == ["paid 5000"]


def _payment_turn() -> ModelResponse:
    return calls(
        ("ops.status", {"deploy_id": "D-1"}),
        ("ops.pay", {"amount": 5000}),
        ("ops.status", {"deploy_id": "D-2"}),
    )


async def test_an_approval_pauses_the_run_and_it_resumes_after_a_restart(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    turn = _payment_turn()
    before, after = Ops(), Ops()
    async with Gate([before.toolbox()], store=store, policy=POLICY) as gate:
        first = await Agent(gate, ScriptedModel([turn]), principal=ALICE).run("Pay ACME")
    # A new process: a new gate over the same store; bob approves; alice resumes.
    finish = ScriptedModel([reply("Paid; D-2 checked.")])
    async with Gate([after.toolbox()], store=store, policy=POLICY) as gate:
        [approval_id] = first.pending_approvals
        await (await gate.approvals()).approve(
            approval_id, by=Principal("bob", "acme"), note="invoice ok"
        )
        resumed = await Agent(gate, finish, principal=ALICE).resume(first.run_id)
        stored = await gate.store.get_run(first.run_id)

    assert first.status == "waiting_approval" and approval_id in first.reason
    assert before.ran == ["status D-1"]  # the calls after the parked one wait too
    assert after.ran == ["pay 5000", "status D-2"]  # nothing that ran is repeated
    assert resumed.status == "completed" and resumed.output == "Paid; D-2 checked."
    [*_, results] = finish.requests[0].messages
    assert isinstance(results, ToolResults)
    assert [r.call_id for r in results.results] == [c.id for c in turn.message.tool_calls]
    assert results.results[1].content == "paid 5000"
    assert resumed.usage.approvals == 1 and resumed.usage.requests == 2
    assert stored is not None and stored.status == "completed"
    kinds = [entry["type"] for entry in stored.trace]
    assert kinds.count("model_request") == 2 and kinds.count("tool_call") == 4


async def test_a_denied_approval_reaches_the_model_as_a_permission_error(ops: Ops) -> None:
    finish = ScriptedModel([reply("The payment was refused.")])
    async with Gate([ops.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
        first = await Agent(gate, ScriptedModel([_payment_turn()]), principal=ALICE).run("Pay")
        [approval_id] = first.pending_approvals
        await (await gate.approvals()).deny(
            approval_id, by=Principal("bob", "acme"), reason="wrong supplier"
        )
        again = await Agent(gate, finish, principal=ALICE).resume(first.run_id)
    [*_, results] = finish.requests[0].messages

    assert isinstance(results, ToolResults)
    assert results.results[1].is_error and "wrong supplier" in results.results[1].content
    assert again.status == "completed" and "pay 5000" not in ops.ran


async def test_a_run_waiting_for_approval_waits_until_it_is_decided(ops: Ops) -> None:
    async with Gate([ops.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
        first = await Agent(gate, ScriptedModel([_payment_turn()]), principal=ALICE).run("Pay")
        still = await Agent(gate, ScriptedModel([]), principal=ALICE).resume(first.run_id)
        with pytest.raises(LookupError):
            await Agent(gate, ScriptedModel([]), principal=BOB).resume(first.run_id)
        with pytest.raises(LookupError):
            await Agent(gate, ScriptedModel([]), principal=ALICE).resume("run_nothing")

    assert still.status == "waiting_approval"
    assert still.pending_approvals == first.pending_approvals
    assert ops.ran == ["status D-1"]


async def test_resuming_before_the_decision_counts_no_call_twice(ops: Ops) -> None:
    async with Gate([ops.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
        first = await Agent(gate, ScriptedModel([_payment_turn()]), principal=ALICE).run("Pay")
        for _ in range(2):  # impatient: resumed twice while nobody has decided
            await Agent(gate, ScriptedModel([]), principal=ALICE).resume(first.run_id)
        [approval_id] = first.pending_approvals
        await (await gate.approvals()).approve(approval_id, by=Principal("bob", "acme"))
        done = await Agent(gate, ScriptedModel([reply("Paid.")]), principal=ALICE).resume(
            first.run_id
        )

    usage = done.usage
    assert ops.ran == ["status D-1", "pay 5000", "status D-2"]
    assert (usage.tool_calls, usage.approvals, usage.errors) == (3, 1, 0)
    assert usage.outcomes == {"ok": 3} and usage.calls_by_risk == {"read": 2, "write_high_risk": 1}


async def test_a_paused_run_keeps_its_model_url_but_never_a_secret_in_it(ops: Ops) -> None:
    kept = {}
    for url in ("http://127.0.0.1:8080/v1", "http://user:s3cret@127.0.0.1:8080/v1?key=k"):
        model = ScriptedModel([_payment_turn()])
        model.base_url = url  # type: ignore[attr-defined]  # as the provider adapters have
        async with Gate([ops.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
            first = await Agent(gate, model, principal=ALICE).run("Pay")
            record = await gate.store.get_run(first.run_id)
        assert record is not None
        kept[url] = record.state["base_url"]

    assert kept == {
        "http://127.0.0.1:8080/v1": "http://127.0.0.1:8080/v1",
        "http://user:s3cret@127.0.0.1:8080/v1?key=k": None,
    }


async def test_a_model_error_fails_the_run_with_the_reason(ops: Ops) -> None:
    from callgate.agent import ModelError

    def overloaded(request: ModelRequest) -> ModelResponse:
        raise ModelError("overloaded (529)", retryable=True, status=529)

    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, ScriptedModel([overloaded]), principal=ALICE).run("Hi")
    assert result.status == "failed" and "overloaded (529)" in result.reason


async def test_the_history_is_sent_with_the_new_prompt(ops: Ops) -> None:
    earlier = AssistantMessage(parts=())
    model = ScriptedModel([reply("ok")])
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        await Agent(gate, model, principal=ALICE).run("And now?", history=[earlier])
    assert model.requests[0].messages == (earlier, UserMessage(content="And now?"))
