"""Stage 6: policy decides allow, deny or require_approval."""

from __future__ import annotations

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Decision, Envelope, Status
from callgate.runtime.policy import Effect, activation


async def decide(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    verdict = call.services.policy.decide(
        activation(spec, call.full_arguments(), call.principal, call.session_id), spec
    )
    call.decision = Decision(effect=verdict.effect.value, reason=verdict.reason, rule=verdict.rule)
    if verdict.effect is Effect.ALLOW:
        return None
    if verdict.effect is Effect.DENY:
        reason = verdict.reason or "the gateway's policy does not allow it"
        return call.fail(
            ErrorKind.PERMISSION,
            f"This call to {spec.name} was refused: {reason}.",
            next_step="Do not retry the same request. Explain this to the user, or hand over "
            "to a human.",
        )
    reason = verdict.reason or f"policy requires a human's approval for {spec.name}"
    return call.envelope(
        Status.PENDING_APPROVAL,
        payload={
            "message": f"Nothing was executed: {reason}. A human must approve this exact "
            "request before it can run.",
            "reason": reason,
            "next_step": "Tell the user this action needs approval; do not retry it yourself.",
        },
    )
