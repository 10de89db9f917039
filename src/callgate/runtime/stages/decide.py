"""Stage 6: policy decides allow, deny or require_approval (and the trifecta guard)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callgate.contract import ToolSpec
from callgate.errors import ErrorKind
from callgate.runtime import approvals, trifecta
from callgate.runtime.call import Call
from callgate.runtime.envelope import Decision, Envelope
from callgate.runtime.policy import Effect, Verdict, activation

UNTRUSTED_AUTO_APPROVAL = "(not for tools of an untrusted source)"


async def verdict_for(
    call: Call, spec: ToolSpec, arguments: Callable[[], dict[str, Any]], *, impact: Any
) -> Verdict:
    """What a call of ``spec`` with ``arguments`` by ``call``'s principal, in its
    session, gets: the policy's verdict, upgraded to an approval where the lethal
    trifecta would be complete, and never an auto-approval for a tool of an
    untrusted source.

    The decide stage asks it for the call itself; a preview asks it for the apply
    it previews, so the model learns at once whether that will need a human.
    ``arguments`` makes the arguments policy sees: only a rule with a condition
    asks for them (most calls pay nothing).
    """
    verdict = call.services.policy.decide(
        spec,
        lambda: activation(spec, arguments(), call.principal, call.session_id, impact=impact),
    )
    verdict = await trifecta.guard_for(
        call.services.store, spec, call.session_id, verdict, shown=call.shown
    )
    if verdict.effect is Effect.AUTO_APPROVE and not spec.trusted_source:
        return Verdict(
            effect=Effect.REQUIRE_APPROVAL,
            reason=f"{verdict.reason or 'auto-approval'} {UNTRUSTED_AUTO_APPROVAL}",
            rule=verdict.rule,
            problem=verdict.problem,
        )
    return verdict


async def decide(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    verdict = await verdict_for(call, spec, call.shown_arguments, impact=call.impact)
    if verdict.problem:
        call.detail["policy_problem"] = verdict.problem
    if verdict.rule == trifecta.RULE:
        call.detail["trifecta"] = verdict.reason
    if verdict.effect is Effect.AUTO_APPROVE:
        call.decision = Decision(effect="auto_approved", reason=verdict.reason, rule=verdict.rule)
        return None
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
