"""Stage 9: size limit with an explicit notice; the full result stays readable by cursor."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from callgate.runtime.call import Call
from callgate.runtime.cursor import Cursor
from callgate.runtime.envelope import Envelope, Status, Truncation
from callgate.runtime.shaping import CHARS_PER_TOKEN, first_page, notice
from callgate.store import StoredResult

READ_MORE_TOOL = "callgate.read_more"


async def shape(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    limits = call.services.limits
    budget = limits.max_result_tokens * CHARS_PER_TOKEN
    # read_more sizes its own pages to the budget; truncating a page again would
    # hand out a cursor into a page instead of into the result.
    pg = None if spec.name == READ_MORE_TOOL else first_page(call.payload, budget)
    if pg is None:
        return call.envelope(Status.OK, payload=call.payload)
    ref = "res_" + secrets.token_urlsafe(16)
    now = datetime.now(UTC)
    await call.services.store.put_result(
        StoredResult(
            ref=ref,
            call_id=call.call_id,
            tool=spec.name,
            tenant=call.principal.tenant,
            user=call.principal.user,
            content=call.payload,
            created_at=now,
            expires_at=now + limits.result_ttl,
        )
    )
    cursor = (
        Cursor(ref=ref, offset=pg.next_offset, unit=pg.unit, key=pg.key).encode()
        if pg.next_offset is not None
        else None
    )
    return call.envelope(
        Status.OK,
        payload=pg.payload,
        raw_ref=ref,
        truncated=Truncation(
            shown=pg.shown,
            total=pg.total,
            unit=pg.unit,
            cursor=cursor,
            notice=notice(pg, cursor, call.shown(READ_MORE_TOOL)),
        ),
    )
