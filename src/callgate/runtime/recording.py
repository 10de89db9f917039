"""Audit records built from a Call and its Envelope."""

from __future__ import annotations

from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.redaction import scrub
from callgate.store import AuditPhase, AuditRecord

MAX_REASON_CHARS = 500


def _refusal(envelope: Envelope | None) -> str | None:
    if envelope is None or envelope.error is None:
        return None
    return envelope.error.message_for_model[:MAX_REASON_CHARS]


def audit_record(call: Call, *, phase: AuditPhase, envelope: Envelope | None = None) -> AuditRecord:
    spec = call.spec
    decision = call.decision
    outcome = None
    status = None
    if envelope is not None:
        status = envelope.status.value
        # A pending call carries an explanation in ``error`` but its outcome is its status.
        is_error = envelope.status is Status.ERROR and envelope.error is not None
        outcome = envelope.error.kind.value if is_error else envelope.status.value  # type: ignore[union-attr]
    detail = dict(call.detail)
    if call.secret_fields and "exception" in detail:
        # A tool's exception text may quote what it was given: never a secret.
        detail["exception"] = scrub(
            detail["exception"], [str(call.injected.get(name)) for name in call.secret_fields]
        )
    if envelope is not None and envelope.raw_ref:
        detail["raw_ref"] = envelope.raw_ref
    if call.approval_id is not None:
        detail.setdefault("approval_used", call.approval_id)
    if envelope is not None and envelope.replayed:
        detail["replay_of"] = envelope.call_id
    return AuditRecord(
        call_id=call.call_id,
        phase=phase,
        at=call.now(),
        trace_id=call.trace_id,
        tool=spec.name if spec else call.tool_name,
        user=call.principal.user,
        tenant=call.principal.tenant,
        session_id=call.session_id,
        tool_version=spec.version if spec else None,
        contract_hash=spec.contract_hash if spec else None,
        args_hash=call.args_hash,
        # A resource read or prompt get has no spec: it is a read by nature.
        risk=spec.risk.value if spec else ("read" if call.kind != "tool" else None),
        decision=decision.effect
        if decision
        else (f"refused:{call.refused_by}" if call.refused_by else None),
        decision_reason=decision.reason
        if decision
        else (_refusal(envelope) if call.refused_by or call.kind != "tool" else None),
        status=status,
        outcome=outcome,
        duration_ms=round(call.elapsed_ms, 3) if envelope is not None else None,
        attempts=call.attempts,
        idempotency_key=call.idempotency_key,
        dropped_fields=tuple(call.dropped_fields),
        detail=detail,
    )
