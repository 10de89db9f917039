"""The checks of the governed chain for one recorded call, against the gate as it is now.

A replayed call passes the chain's own stage functions, up to the decision:
resolve, authorize, validate, inject, classify, and the verdict the decide stage
would reach (policy, the lethal-trifecta guard, no auto-approval for an
untrusted source). Nothing runs, nothing is parked for approval and nothing is
audited: a check has no side effect. Left out on purpose: the rate limit (a
check would spend the quota) and the stages of a previewed change (the preview a
recorded apply names is long gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.contract import Principal
from callgate.discovery.meta import CALL_TOOL, inner_call
from callgate.runtime.call import Call
from callgate.runtime.gate import Gate
from callgate.runtime.policy import Effect
from callgate.runtime.services import Services
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


async def _services(gate: Gate) -> Services:
    # The stage functions take a Call over the gate's services, and the gate has
    # no public way to build one yet: a runtime seam for "check, do not run" would
    # replace this.
    await gate.open()
    services = gate._services
    assert services is not None
    return services


def target(tool: str, arguments: Any) -> tuple[str, Any]:
    """The tool and arguments a recorded call ran as: a ``callgate.call_tool`` call
    runs as the tool it names (as :meth:`Gate.call` does)."""
    if tool == CALL_TOOL:
        inner = inner_call(arguments)
        if inner is not None and inner[0] != CALL_TOOL:
            return inner
    return tool, arguments


async def check(
    gate: Gate,
    tool: str,
    arguments: Mapping[str, Any] | str,
    *,
    principal: Principal,
    session_id: str,
) -> Check:
    """Take the call of ``tool`` (its full name) with ``arguments`` through the
    chain's checks as ``principal`` in ``session_id``, without running it."""
    call = Call(
        services=await _services(gate),
        tool_name=tool,
        raw_arguments=arguments if isinstance(arguments, str) else dict(arguments),
        principal=principal,
        session_id=session_id,
    )
    if await resolve(call) is not None or call.spec is None:
        return Check(tool=tool, outcome="missing", reason=f"no tool {tool!r} now")
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
