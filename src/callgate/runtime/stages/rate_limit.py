"""Stage 2b: refuse a call over its principal's or its tool's rate limit, before it runs.

Right after authorize: a caller without the tool's scope is refused for that
(and learns nothing else); a caller over a limit learns only when to come back,
before validation spends anything on its arguments. The gate runs this stage
only when ``[limits.rate]`` sets a limit (see ``pipeline.py``).
"""

from __future__ import annotations

import math

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope


async def rate_limit(call: Call) -> Envelope | None:
    limiter = call.services.rate_limiter
    spec = call.spec
    assert limiter is not None and spec is not None
    refusal = await limiter.admit(call.principal, spec.name)
    if refusal is None:
        return None
    call.detail["rate_limit"] = refusal.detail()
    wait = _seconds(refusal.retry_after)
    if refusal.limit == "unavailable":
        return call.fail(
            ErrorKind.TRANSIENT,
            f"{call.shown(spec.name)} did not run: the gateway cannot check its rate "
            "limits right now.",
            next_step=f"Wait about {wait}, then call again; if it keeps failing, tell the user.",
            retryable=True,
        )
    rate = refusal.rate.text if refusal.rate is not None else ""
    if refusal.limit == "per_principal":
        which = f"your limit of {rate} calls in all"
    else:
        which = f"the limit of {rate} calls of {call.shown(spec.name)}"
        if refusal.rule is not None and refusal.rule != spec.name:
            which += f" (shared by the tools matching {call.shown(refusal.rule)!r})"
    return call.fail(
        ErrorKind.TRANSIENT,
        f"{call.shown(spec.name)} did not run: {which} is used up. It can be called "
        f"again in {wait}.",
        next_step=f"Wait {wait} before calling it again; do not retry sooner. Tell the "
        "user if they are waiting.",
        retryable=True,
    )


def _seconds(value: float) -> str:
    whole = max(math.ceil(value), 1)
    if whole < 120:
        return f"{whole} second{'s' if whole > 1 else ''}"
    minutes = math.ceil(whole / 60)
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{math.ceil(minutes / 60)} hours"
