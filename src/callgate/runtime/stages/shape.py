"""Stage 9: size limit with an explicit notice; the full result stays readable by cursor.

The payload is serialized once: that JSON text is measured, cut (when no
whole items fit) and handed to the store as it is.

A result over ``Limits.max_result_bytes`` (measured on its JSON text, before it
is stored or cut) is neither kept nor shown: five concurrent 100 MB results
once took a server to a gigabyte and the SQLite file to 643 MB. A read's
caller is told to ask for less (``construction``); a write's, that the action
was carried out but its result cannot be shown (``unrecoverable``: the outcome
is known, so not ``unknown_outcome``; and never retried, so not ``transient``).
"""

from __future__ import annotations

import secrets

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.cursor import Cursor
from callgate.runtime.envelope import Envelope, Status, Truncation
from callgate.runtime.shaping import CHARS_PER_TOKEN, dumps, first_page, notice, size_in_bytes
from callgate.store import StoredResult

READ_MORE_TOOL = "callgate.read_more"


async def shape(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    limits = call.services.limits
    budget = limits.max_result_tokens * CHARS_PER_TOKEN
    # read_more sizes its own pages to the budget; truncating a page again would
    # hand out a cursor into a page instead of into the result.
    if spec.name == READ_MORE_TOOL:
        return call.envelope(Status.OK, payload=call.payload)
    text = dumps(call.payload)
    size = size_in_bytes(text)
    if size > limits.max_result_bytes:
        call.detail["result_bytes"] = size
        call.payload = None  # not kept for the rest of the call either
        return _too_large(call, size)
    pg = first_page(call.payload, budget, text=text)
    if pg is None:  # shown whole: the wire sends the text measured here
        return call.envelope(Status.OK, payload=call.payload).with_payload_json(text)
    ref = "res_" + secrets.token_urlsafe(16)
    now = call.now()
    await call.services.store.put_result(
        StoredResult(
            ref=ref,
            call_id=call.call_id,
            tool=spec.name,
            tenant=call.principal.tenant,
            user=call.principal.user,
            content=call.payload,
            text=text,  # measured and cut above: the store need not serialize it again
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


def _too_large(call: Call, size: int) -> Envelope:
    spec = call.spec
    assert spec is not None
    limit = call.services.limits.max_result_bytes
    sizes = f"{size:,} bytes; at most {limit:,} are returned"
    if spec.effective_annotations.read_only:
        return call.fail(
            ErrorKind.CONSTRUCTION,
            f"The result of {call.shown(spec.name)} is too large ({sizes}); nothing is shown.",
            next_step="Ask for less: use the tool's filters, a narrower range or a smaller "
            "page, then call it again.",
        )
    return call.fail(
        ErrorKind.UNRECOVERABLE,
        f"{call.shown(spec.name)} ran and its action was carried out, but its result is too large "
        f"to return ({sizes}); it is not shown (reference {call.call_id}).",
        next_step="Do not call it again: the action is done. Tell the user it was carried "
        "out; read what you need with a read tool.",
        detail_ref=call.call_id,
    )
