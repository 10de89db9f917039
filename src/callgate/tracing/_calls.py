"""The span of one governed tool call, with the chain's stages as its events.

The pipeline asks the gate's tracer (``Services.tracer``, None when tracing is
off) to run the chain inside :meth:`CallTracer.governed`; each stage is wrapped
to add an event as it ends (:meth:`CallTracer.chains`). Attributes follow the
OpenTelemetry GenAI conventions for tool execution (``gen_ai.*``), plus
``callgate.*`` for what the gate decided. They are read from the Call and its
Envelope once the audit record is written, the same facts the audit keeps.

Never recorded: argument values, injected trusted values (secrets or not),
payloads, and model-facing messages (which may quote arguments). Injected and
dropped fields appear by name only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

from callgate.runtime.envelope import Envelope, Status
from callgate.tracing import _setup

if TYPE_CHECKING:
    from callgate.runtime.call import Call

INSTRUMENTATION = "callgate"

Stage = Callable[["Call"], Awaitable[Envelope | None]]
T = TypeVar("T")


def _stage_facts(call: Call, name: str) -> dict[str, Any]:
    """What a stage's event says, beyond its name: never a value, only names and verdicts."""
    facts: dict[str, Any] = {}
    if name == "resolve":
        facts["callgate.tool.found"] = call.spec is not None
    elif name == "inject":
        facts["callgate.injected_fields"] = sorted(call.injected)
        facts["callgate.dropped_fields"] = list(call.dropped_fields)
    elif name == "classify" and call.spec is not None:
        facts["callgate.risk"] = call.spec.risk.value
    elif name == "decide" and call.decision is not None:
        facts["callgate.decision"] = call.decision.effect
        if call.decision.rule:
            facts["callgate.decision.rule"] = call.decision.rule
    elif name == "execute":
        facts["callgate.attempts"] = call.attempts
        facts["callgate.retries"] = max(call.attempts - 1, 0)
        if "retry" in call.detail:
            facts["callgate.retry"] = str(call.detail["retry"])
    return facts


class CallTracer:
    """Emits the spans of governed calls (and, through :mod:`._agent`, of agent runs).

    Build it with :meth:`build`; a gate picks the current one up as it opens.
    """

    def __init__(self, tracer: trace.Tracer, *, own_ids: bool) -> None:
        self.tracer = tracer
        self._own_ids = own_ids
        self._chains: dict[int, Any] = {}

    @classmethod
    def build(cls, provider: Any = None) -> CallTracer:
        """A tracer from ``provider`` (the global one if None)."""
        provider = provider if provider is not None else trace.get_tracer_provider()
        own_ids = _setup.adopt(provider)
        return cls(provider.get_tracer(INSTRUMENTATION), own_ids=own_ids)

    # -- the chain ------------------------------------------------------------
    def chains(self, chains: T) -> T:
        """``chains`` (the pipeline's stage table) with every stage wrapped to add
        its event to the call's span; made once per table."""
        traced = self._chains.get(id(chains))
        if traced is None:
            traced = self._chains[id(chains)] = _wrap_all(chains)
        return traced  # type: ignore[no-any-return]

    async def governed(self, call: Call, run: Callable[[], Awaitable[Envelope]]) -> Envelope:
        """Run the chain (``run``) in the call's span, then describe the outcome.

        Under an active span the call's span is its child, and the call takes that
        trace's id as its ``trace_id``, so the Envelope and the audit name the
        trace the span is in. Outside any span, the call's own ``trace_id`` is the
        new trace's id.
        """
        parent = trace.get_current_span().get_span_context()
        start_in: otel_context.Context | None = None
        token = None
        if parent.is_valid:
            call.trace_id = format(parent.trace_id, "032x")
        else:
            wanted = _trace_id(call.trace_id)
            if wanted is not None and self._own_ids:
                token = _setup.wanted_trace_id.set(wanted)
            elif wanted is not None:
                start_in = trace.set_span_in_context(_remote_parent(wanted))
        try:
            span = self.tracer.start_span(
                f"execute_tool {call.tool_name}",
                context=start_in,
                kind=SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.tool_name,
                    "gen_ai.tool.call.id": call.call_id,
                    "gen_ai.tool.type": "function",
                },
            )
        finally:
            if token is not None:
                _setup.wanted_trace_id.reset(token)
        if not parent.is_valid:
            call.trace_id = format(span.get_span_context().trace_id, "032x")
        with trace.use_span(span, end_on_exit=True):
            envelope = await run()
            if span.is_recording():
                _describe(span, call, envelope)
        return envelope


def _wrap_all(value: Any) -> Any:
    if callable(value):
        return _traced(value)
    if isinstance(value, tuple):
        return tuple(_wrap_all(item) for item in value)
    if isinstance(value, Mapping):
        return {key: _wrap_all(item) for key, item in value.items()}
    return value


def _traced(stage: Stage) -> Stage:
    name = stage.__name__

    # The wrapper keeps the stage's name: the pipeline records it as the refusing stage.
    @functools.wraps(stage)
    async def traced(call: Call) -> Envelope | None:
        envelope = await stage(call)
        span = trace.get_current_span()
        if span.is_recording():
            facts = _stage_facts(call, name)
            if envelope is not None:
                facts["callgate.stage.ended_call"] = True
                facts["callgate.status"] = envelope.status.value
                if envelope.error is not None and envelope.status is Status.ERROR:
                    facts["error.type"] = envelope.error.kind.value
            span.add_event(f"callgate.{name}", facts)
        return envelope

    return traced


def _trace_id(text: str) -> int | None:
    if len(text) != 32:
        return None
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return value or None


def _remote_parent(trace_id: int) -> NonRecordingSpan:
    """A stand-in parent carrying ``trace_id``, for a provider whose ids callgate
    cannot choose: the call's span is in the call's trace, under a parent that
    no exporter sends."""
    span_id = int.from_bytes(os.urandom(8), "big") or 1
    return NonRecordingSpan(
        SpanContext(
            trace_id=trace_id,
            span_id=span_id,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )


def _describe(span: trace.Span, call: Call, envelope: Envelope) -> None:
    spec = call.spec
    principal = call.principal
    name = spec.name if spec is not None else call.tool_name
    if name != call.tool_name:
        # Started under the caller's name for the tool (an MCP host's bank__pay):
        # the span, like the audit, names it in full.
        span.update_name(f"execute_tool {name}")
    attributes: dict[str, Any] = {
        "gen_ai.tool.name": name,
        "callgate.call_id": call.call_id,
        "callgate.trace_id": call.trace_id,
        "callgate.kind": call.kind,
        "callgate.status": envelope.status.value,
        "callgate.duration_ms": round(call.elapsed_ms, 3),
        "callgate.attempts": call.attempts,
        "callgate.idempotency_key.present": call.idempotency_key is not None,
    }
    if principal.tenant is not None:
        attributes["callgate.tenant"] = principal.tenant
    if principal.user is not None:
        attributes["callgate.user"] = principal.user
    if call.session_id is not None:
        attributes["callgate.session_id"] = call.session_id
    if spec is not None:
        attributes["callgate.risk"] = spec.risk.value
        if spec.version is not None:
            attributes["callgate.tool.version"] = spec.version
    decision = call.decision
    if decision is not None:
        attributes["callgate.decision"] = decision.effect
        if decision.rule:
            attributes["callgate.decision.rule"] = decision.rule
        if decision.reason:
            attributes["callgate.decision.reason"] = decision.reason[:500]
    elif call.refused_by:
        attributes["callgate.decision"] = f"refused:{call.refused_by}"
    if name != call.tool_name:
        attributes["callgate.tool.called_as"] = call.tool_name
    if call.dropped_fields:
        attributes["callgate.dropped_fields"] = list(call.dropped_fields)
    if envelope.approval is not None:
        attributes["callgate.approval_id"] = envelope.approval.approval_id
    if envelope.truncated is not None:
        attributes["callgate.truncated"] = True
    if envelope.replayed:
        attributes["callgate.replayed"] = True
    error = envelope.error
    is_error = envelope.status is Status.ERROR and error is not None
    if is_error:
        assert error is not None
        attributes["error.type"] = error.kind.value
        attributes["callgate.error.kind"] = error.kind.value
        attributes["callgate.error.retryable"] = error.retryable
    span.set_attributes(attributes)
    outcome: dict[str, Any] = {"callgate.status": envelope.status.value}
    if is_error:
        assert error is not None
        outcome["error.type"] = error.kind.value
    span.add_event("callgate.outcome", outcome)
    if is_error:
        # The kind only: the model-facing message may quote the arguments.
        assert error is not None
        span.set_status(StatusCode.ERROR, error.kind.value)
