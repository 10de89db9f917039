"""Stage 5: the risk tier, from annotations of a trusted source (else worst case)."""

from __future__ import annotations

from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope


async def classify(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    call.detail["risk"] = spec.risk.value
    if not spec.annotations_believed:
        call.detail["annotations"] = "untrusted source: treated as destructive and open-world"
    return None
