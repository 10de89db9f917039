"""Idempotency keys: the same key runs the tool once; every caller gets its Envelope.

Within one process, concurrent callers with the same key wait on the first
caller's future. Across processes and replicas the store's unique claim decides
who runs; the others poll the store for the stored Envelope. A claim whose call
never recorded an outcome (its process died) is reported as an unknown outcome,
never silently re-run.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.services import InFlight
from callgate.store import IdempotencyRecord

_POLL_START = 0.02
_POLL_MAX = 0.5


def scope_of(call: Call) -> str:
    assert call.spec is not None and call.idempotency_key is not None
    return f"{call.principal.tenant or '-'}/{call.spec.name}/{call.idempotency_key}"


def replay(envelope: Envelope) -> Envelope:
    return envelope.model_copy(update={"replayed": True})


def _conflict(call: Call) -> Envelope:
    return call.fail(
        ErrorKind.CONSTRUCTION,
        f"The idempotency key {call.idempotency_key!r} was already used for a different "
        "request to this tool; one key stands for exactly one request.",
        next_step="Use a new idempotency key for a new request, or resend the original "
        "arguments to get the original result.",
    )


async def begin(call: Call) -> Envelope | None:
    """Claim the key, or return the Envelope this caller must get instead of running.

    On None the caller owns the key and must run the tool, then ``finish``.
    """
    services = call.services
    scope = call.idempotency_scope = scope_of(call)
    assert call.args_hash is not None
    running = services.inflight.get(scope)
    if running is not None:
        if running.args_hash != call.args_hash:
            return _conflict(call)
        call.detail["idempotency"] = "waited for the in-flight call"
        return replay(await asyncio.shield(running.future))

    # Registered before the first await so that concurrent callers in this process
    # find it instead of racing to the store.
    future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
    services.inflight[scope] = InFlight(args_hash=call.args_hash, future=future)
    now = datetime.now(UTC)
    try:
        existing = await services.store.claim_idempotency(
            IdempotencyRecord(
                scope=scope,
                args_hash=call.args_hash,
                call_id=call.call_id,
                state="pending",
                created_at=now,
                expires_at=now + services.limits.idempotency_ttl,
            )
        )
    except BaseException:
        services.inflight.pop(scope, None)
        future.cancel()
        raise
    if existing is None:
        call.idempotency_owner = True
        return None
    try:
        outcome = await _existing_outcome(call, existing)
    except BaseException:
        services.inflight.pop(scope, None)
        future.cancel()
        raise
    services.inflight.pop(scope, None)
    future.set_result(outcome)
    return outcome


async def _existing_outcome(call: Call, record: IdempotencyRecord) -> Envelope:
    if record.args_hash != call.args_hash:
        return _conflict(call)
    limits = call.services.limits
    deadline = record.created_at + timedelta(seconds=limits.max_timeout * limits.max_attempts + 5)
    delay = _POLL_START
    while True:
        if record.state == "done" and record.envelope is not None:
            call.detail["idempotency"] = f"replayed the result of {record.call_id}"
            return replay(Envelope.model_validate(record.envelope))
        if datetime.now(UTC) > deadline:
            call.detail["idempotency"] = f"stale claim by {record.call_id}"
            return call.fail(
                ErrorKind.UNKNOWN_OUTCOME,
                f"A call with idempotency key {call.idempotency_key!r} started at "
                f"{record.created_at:%Y-%m-%d %H:%M:%S} UTC and its outcome was never "
                "recorded; it may or may not have taken effect.",
                next_step="Do not retry. Check the current state (for example with a "
                "status or read tool) before doing anything else.",
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
        fresh = await call.services.store.get_idempotency(record.scope)
        if fresh is None:
            # Expired meanwhile: nothing more to wait for; report what is known.
            deadline = datetime.now(UTC)
            continue
        record = fresh


async def finish(call: Call, envelope: Envelope) -> None:
    """Store the owner's Envelope for later callers and wake the waiting ones."""
    scope = call.idempotency_scope
    if scope is None:
        return
    entry = call.services.inflight.pop(scope, None)
    try:
        if call.idempotency_owner:
            store = call.services.store
            if envelope.error is not None and envelope.error.kind is ErrorKind.TRANSIENT:
                # Nothing happened: the same key may run again later.
                await store.release_idempotency(scope, call_id=call.call_id)
            else:
                await store.complete_idempotency(
                    scope, envelope.model_dump(mode="json"), call_id=call.call_id
                )
    finally:
        if entry is not None and not entry.future.done():
            entry.future.set_result(envelope)
