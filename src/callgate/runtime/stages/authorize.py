"""Stage 2: check the caller's tenant and scopes on every call, whatever a listing showed."""

from __future__ import annotations

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope


async def authorize(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    if spec.tenants is not None and call.principal.tenant not in spec.tenants:
        return call.fail(
            ErrorKind.PERMISSION,
            f"{call.shown(spec.name)} is not available to your organization.",
            next_step="Do not retry. Tell the user this tool is not enabled for them.",
        )
    missing = sorted(spec.scopes - call.principal.scopes)
    if not missing:
        return None
    needed = ", ".join(repr(s) for s in missing)
    plural = "s" if len(missing) > 1 else ""
    return call.fail(
        ErrorKind.PERMISSION,
        f"You are not allowed to call {call.shown(spec.name)}: it needs the scope{plural} "
        f"{needed}, which {call.principal.user!r} does not have.",
        next_step="Do not retry. Tell the user which permission is missing; an "
        "administrator can grant it.",
        missing_scopes=tuple(missing),
    )
