"""Stage 1: find the tool; an unknown name is a construction error with close matches."""

from __future__ import annotations

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.suggest import did_you_mean


async def resolve(call: Call) -> Envelope | None:
    # The caller's name, through the caller's naming: a host that sees
    # ops__deploy_status has no tool ops.deploy_status.
    full = call.names.full(call.tool_name)
    spec = call.services.registry.get(full) if full is not None else None
    if spec is not None:
        call.spec = spec
        return None
    # Suggest only tools this caller could actually use, as it names them.
    shown = [call.shown(s.name) for s in call.services.registry.specs(call.principal)]
    names = [name for name in shown if call.names.full(name) is not None]
    return call.fail(
        ErrorKind.CONSTRUCTION,
        f"Unknown tool {call.tool_name!r}." + did_you_mean(call.tool_name, names),
        next_step="Call a tool from the tool list, by its exact name.",
    )
