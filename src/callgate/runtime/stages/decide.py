"""Stage 6: policy decides allow, deny or require_approval (and the trifecta guard)."""

from __future__ import annotations

from callgate.errors import ErrorKind
from callgate.runtime import approvals, trifecta
from callgate.runtime.call import Call
from callgate.runtime.envelope import Decision, Envelope
from callgate.runtime.policy import Effect, Verdict, activation


async def decide(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    verdict = call.services.policy.decide(
        spec,
        lambda: activation(
            spec, call.shown_arguments(), call.principal, call.session_id, impact=call.impact
        ),
    )
    if verdict.problem:
        call.detail["policy_problem"] = verdict.problem
    verdict = await trifecta.guard(call, verdict)
    if verdict.effect is Effect.AUTO_APPROVE:
        if spec.trusted_source:
            call.decision = Decision(
                effect="auto_approved", reason=verdict.reason, rule=verdict.rule
            )
            return None
        verdict = Verdict(
            effect=Effect.REQUIRE_APPROVAL,
            reason=f"{verdict.reason or 'auto-approval'} (not for tools of an untrusted source)",
            rule=verdict.rule,
        )
    call.decision = Decision(effect=verdict.effect.value, reason=verdict.reason, rule=verdict.rule)
    if verdict.effect is Effect.ALLOW:
        return None
    if verdict.effect is Effect.DENY:
        reason = verdict.reason or "the gateway's policy does not allow it"
        return call.fail(
            ErrorKind.PERMISSION,
            f"This call to {call.shown(spec.name)} was refused: {reason}.",
            next_step="Do not retry the same request. Explain this to the user, or hand over "
            "to a human.",
        )
    return await approvals.require(call, verdict)
