"""How the governed chain would take a call now, without running it (:meth:`Gate.check`).

A checked call passes the chain's own stage functions, up to the decision:
resolve, authorize, validate, inject, classify, and the verdict the decide stage
would reach (policy, the lethal-trifecta guard, no auto-approval for an
untrusted source). Nothing runs, nothing is parked for approval and nothing is
audited: a check has no side effect. Left out on purpose: the rate limit (a
check would spend the quota) and the stages of a previewed change (a check has
no preview to apply).
"""

from __future__ import annotations

from dataclasses import dataclass

from callgate.runtime.call import Call
from callgate.runtime.policy import Effect
from callgate.runtime.stages.authorize import authorize
from callgate.runtime.stages.classify import classify
from callgate.runtime.stages.decide import verdict_for
from callgate.runtime.stages.inject import inject
from callgate.runtime.stages.resolve import resolve
from callgate.runtime.stages.validate import validate

__all__ = ["Check", "check"]

_BEFORE_DECIDE = (authorize, validate, inject, classify)


@dataclass(kw_only=True, frozen=True)
class Check:
    """How the chain would take a call now, before running it.

    ``outcome`` is ``missing`` (no such tool), ``refused:<stage>`` (authorize,
    validate or inject refused it; ``reason`` is the model-facing message), or
    the decision: ``allow``, ``deny``, ``require_approval``, ``auto_approved``.
    """

    tool: str
    outcome: str
    reason: str | None = None
    contract_hash: str | None = None
    tool_version: str | None = None

    @property
    def runs(self) -> bool:
        """Whether the call would run without a human."""
        return self.outcome in ("allow", "auto_approved")


async def check(call: Call) -> Check:
    """Take ``call`` through the chain's checks, up to the decision (see the module docs)."""
    if await resolve(call) is not None or call.spec is None:
        return Check(
            tool=call.tool_name, outcome="missing", reason=f"no tool {call.tool_name!r} now"
        )
    spec = call.spec
    found = {"tool": spec.name, "contract_hash": spec.contract_hash, "tool_version": spec.version}
    for stage in _BEFORE_DECIDE:
        envelope = await stage(call)
        if envelope is not None:
            reason = envelope.error.message_for_model if envelope.error else None
            return Check(outcome=f"refused:{stage.__name__}", reason=reason, **found)
    verdict = await verdict_for(call, spec, call.shown_arguments, impact=None)
    outcome = "auto_approved" if verdict.effect is Effect.AUTO_APPROVE else verdict.effect.value
    return Check(outcome=outcome, reason=verdict.reason, **found)
