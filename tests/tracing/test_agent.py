"""An agent run is a trace: the run, a chat span per model turn, its tool calls under it."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from callgate import Gate
from callgate.agent import ScriptedModel, call, calls, reply
from callgate.agent.loop import Agent
from callgate.store import MemoryStore

from ._tools import ALICE, API_KEY, POLICY, bank

pytestmark = pytest.mark.anyio


async def test_a_run_has_a_span_with_a_chat_span_per_turn_and_its_tool_calls(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel(
        [
            calls(("bank.balance", {"account": "ACC-1"}), ("bank.balance", {"account": "ACC-2"})),
            call("bank.balance", {"account": "ACC-3"}),
            reply("All three hold 120."),
        ],
        tokens=(200, 15),
        name="acme:tiny-1",
    )
    async with Gate(
        [bank()], store=MemoryStore(), policy=POLICY, secrets={"api_key": API_KEY}
    ) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Balances of ACC-1..3?")
        audit = [r for r in await gate.store.list_audit() if r.phase == "final"]
    finished = spans.get_finished_spans()
    [run] = [s for s in finished if s.name == "invoke_agent"]
    chats = [s for s in finished if s.name.startswith("chat ")]
    tools = [s for s in finished if s.name.startswith("execute_tool ")]
    run_attributes = run.attributes or {}

    assert result.status == "completed" and len(finished) == 1 + 3 + 3
    assert run_attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run_attributes["gen_ai.conversation.id"] == result.run_id
    assert run_attributes["callgate.run.status"] == "completed"
    assert run_attributes["gen_ai.usage.input_tokens"] == 600
    assert run_attributes["callgate.run.tool_calls"] == 3
    # One chat span per model turn, with the provider's token counts and finish reason.
    assert [s.name for s in chats] == ["chat tiny-1"] * 3
    for turn, chat in enumerate(chats, start=1):
        attributes = chat.attributes or {}
        assert chat.kind is SpanKind.CLIENT
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "tiny-1"
        assert attributes["gen_ai.provider.name"] == "acme"
        assert attributes["gen_ai.usage.input_tokens"] == 200
        assert attributes["gen_ai.usage.output_tokens"] == 15
        assert attributes["callgate.turn"] == turn
    assert [tuple((c.attributes or {})["gen_ai.response.finish_reasons"]) for c in chats] == [
        ("tool_use",),
        ("tool_use",),
        ("end_turn",),
    ]
    # Every span is in the run's trace; the tool calls are the run's children, and
    # their audit records carry the same trace id.
    trace_id = run.context.trace_id
    assert {s.context.trace_id for s in finished} == {trace_id}
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in chats)
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in tools)
    assert len(audit) == 3 and {r.trace_id for r in audit} == {format(trace_id, "032x")}
    assert {(t.attributes or {})["gen_ai.tool.call.id"] for t in tools} == {
        r.call_id for r in audit
    }


async def test_a_run_waiting_for_approval_says_so(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([call("bank.pay", {"account": "ACC-1", "amount": 500})])
    async with Gate([bank()], store=MemoryStore(), policy=POLICY) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Pay 5 from ACC-1")
    finished = spans.get_finished_spans()
    [run] = [s for s in finished if s.name == "invoke_agent"]
    [tool] = [s for s in finished if s.name == "execute_tool bank.pay"]

    assert result.status == "waiting_approval"
    assert (run.attributes or {})["callgate.run.status"] == "waiting_approval"
    assert (tool.attributes or {})["callgate.status"] == "pending_approval"
    assert tool.parent is not None and tool.parent.span_id == run.context.span_id
