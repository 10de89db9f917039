"""Every governed call is a span: what the gate decided, stage by stage, and nothing secret."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from callgate import Gate
from callgate.store import MemoryStore

from ._tools import ACCOUNT, ALICE, API_KEY, POLICY, bank

pytestmark = pytest.mark.anyio


def _gate() -> Gate:
    return Gate([bank()], store=MemoryStore(), policy=POLICY, secrets={"api_key": API_KEY})


def _one(spans: InMemorySpanExporter) -> ReadableSpan:
    [span] = spans.get_finished_spans()
    return span


def _every_value(span: ReadableSpan) -> list[Any]:
    values = list((span.attributes or {}).values())
    for event in span.events:
        values += list((event.attributes or {}).values())
    return [v for value in values for v in (value if isinstance(value, tuple) else (value,))]


async def test_a_call_is_one_tool_span_with_its_stages_as_events(
    spans: InMemorySpanExporter,
) -> None:
    async with _gate() as gate:
        envelope = await gate.call(
            "bank.balance", {"account": "ACC-1"}, principal=ALICE, session_id="s-1"
        )
        [*_, final] = await gate.store.list_audit()
    span = _one(spans)
    attributes = span.attributes or {}

    assert envelope.status.value == "ok"
    assert span.name == "execute_tool bank.balance" and span.kind is SpanKind.INTERNAL
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "bank.balance",
        "gen_ai.tool.call.id": envelope.call_id,
        "gen_ai.tool.type": "function",
        "callgate.tenant": "acme",
        "callgate.user": "alice",
        "callgate.session_id": "s-1",
        "callgate.risk": "read",
        "callgate.decision": "allow",
        "callgate.status": "ok",
        "callgate.attempts": 1,
        "callgate.idempotency_key.present": False,
    }.items() <= dict(attributes).items()
    assert attributes["callgate.duration_ms"] >= 0  # type: ignore[operator]
    assert [event.name for event in span.events] == [
        "callgate.resolve",
        "callgate.authorize",
        "callgate.validate",
        "callgate.inject",
        "callgate.classify",
        "callgate.decide",
        "callgate.execute",
        "callgate.normalize",
        "callgate.shape",
        "callgate.outcome",
    ]
    inject = next(e for e in span.events if e.name == "callgate.inject")
    assert tuple((inject.attributes or {})["callgate.injected_fields"]) == ("api_key", "tenant_id")
    # The trace, the Envelope and the audit name one trace id.
    assert format(span.context.trace_id, "032x") == envelope.trace_id == final.trace_id
    assert span.status.status_code is StatusCode.UNSET


async def test_a_denied_call_shows_the_decision_and_the_error(spans: InMemorySpanExporter) -> None:
    async with _gate() as gate:
        envelope = await gate.call("bank.close_account", {"account": "ACC-1"}, principal=ALICE)
    span = _one(spans)
    attributes = span.attributes or {}

    assert envelope.error is not None and envelope.error.kind.value == "permission"
    assert attributes["callgate.decision"] == "deny"
    assert attributes["callgate.decision.reason"] == "closing accounts is not allowed here"
    assert attributes["callgate.status"] == "error" and attributes["error.type"] == "permission"
    assert span.status.status_code is StatusCode.ERROR
    decide = next(e for e in span.events if e.name == "callgate.decide")
    assert (decide.attributes or {})["callgate.stage.ended_call"] is True
    assert "callgate.execute" not in [e.name for e in span.events]


async def test_a_call_parked_for_approval_shows_what_it_waits_for(
    spans: InMemorySpanExporter,
) -> None:
    async with _gate() as gate:
        envelope = await gate.call("bank.pay", {"account": "ACC-1", "amount": 500}, principal=ALICE)
    span = _one(spans)
    attributes = span.attributes or {}

    assert envelope.approval is not None
    assert attributes["callgate.decision"] == "require_approval"
    assert attributes["callgate.status"] == "pending_approval"
    assert attributes["callgate.approval_id"] == envelope.approval.approval_id
    # Waiting for a person is not a failure.
    assert span.status.status_code is StatusCode.UNSET and "error.type" not in attributes


async def test_a_refused_call_names_the_stage_that_refused_it(
    spans: InMemorySpanExporter,
) -> None:
    async with _gate() as gate:
        await gate.call("bank.balanse", {"account": "ACC-1"}, principal=ALICE)
        await gate.call("bank.balance", {"account": 7}, principal=ALICE)
    unknown, invalid = spans.get_finished_spans()

    assert (unknown.attributes or {})["callgate.decision"] == "refused:resolve"
    assert (unknown.attributes or {})["error.type"] == "construction"
    assert (invalid.attributes or {})["callgate.decision"] == "refused:validate"
    assert [e.name for e in invalid.events][-2:] == ["callgate.validate", "callgate.outcome"]


async def test_no_secret_and_no_argument_value_reaches_a_span(
    spans: InMemorySpanExporter,
) -> None:
    async with _gate() as gate:
        await gate.call("bank.balance", {"account": ACCOUNT}, principal=ALICE)
        # A model that tries to set the trusted field: dropped, and named only.
        await gate.call(
            "bank.balance", {"account": ACCOUNT, "api_key": "sk-from-the-model"}, principal=ALICE
        )
        await gate.call("bank.balance", {"account": ACCOUNT, "acount": ACCOUNT}, principal=ALICE)
        await gate.call("bank.pay", {"account": ACCOUNT, "amount": 987654}, principal=ALICE)
    finished = spans.get_finished_spans()

    assert len(finished) == 4
    for span in finished:
        text = repr(_every_value(span)) + span.name + repr(span.status.description)
        assert API_KEY not in text and ACCOUNT not in text
        assert "sk-from-the-model" not in text and "987654" not in text


async def test_a_call_inside_a_span_joins_that_trace(spans: InMemorySpanExporter) -> None:
    from opentelemetry import trace

    from callgate import tracing

    tracer = tracing.current()
    assert tracer is not None
    async with _gate() as gate:
        with tracer.tracer.start_as_current_span("request") as outer:
            envelope = await gate.call("bank.balance", {"account": "ACC-1"}, principal=ALICE)
        [record, *_] = await gate.store.list_audit()
    tool, request = spans.get_finished_spans()

    assert request is not None and tool.parent is not None
    assert tool.parent.span_id == outer.get_span_context().span_id
    assert envelope.trace_id == record.trace_id == format(outer.get_span_context().trace_id, "032x")
    assert trace.get_current_span().get_span_context().is_valid is False
