"""Stage 8: one Envelope shape for every tool's result."""

from __future__ import annotations

from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope


async def normalize(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    payload = call.payload
    if spec.concise is not None and call.arguments.get("response_format", "concise") == "concise":
        payload = spec.concise(payload)
    call.payload = payload
    return None
