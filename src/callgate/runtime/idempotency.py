"""Idempotency keys: the same key runs the tool once; every caller gets its Envelope.

Within one process, concurrent callers with the same key wait on the first
caller's in-flight entry. Across processes and replicas the store's unique
claim decides who runs; the others poll the store for the stored Envelope. A
claim whose call never recorded an outcome (its process died) is reported as
an unknown outcome, never silently re-run. A transient failure, or a
cancellation before any effect, releases the key so it can run again.

A key's scope is its tenant, tool and key, encoded unambiguously (a JSON array:
no tenant and tenant ``"-"`` are two scopes). When the store does not answer as
the call ends, the key's answer waits in the write backlog; until it is written
the claim stays pending, so the same key waits or answers ``unknown_outcome``,
and never runs again.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.services import InFlight
from callgate.store import IdempotencyRecord, Store
from callgate.store.failures import is_unavailable

_POLL_START = 0.02
_POLL_MAX = 0.5
_STALE_MARGIN = timedelta(seconds=5)


def scope_for(tenant: str | None, tool: str, key: str) -> str:
    """The store's key for ``key`` of ``tool`` in ``tenant``: ``["acme","ops.pay","k1"]``.

    JSON, so that no two (tenant, tool, key) share a scope whatever characters
    they hold (``null`` is no tenant; migration 0009 rewrote the older
    ``tenant/tool/key`` scopes, where no tenant and tenant ``-`` collided).
    """
    return json.dumps([tenant, tool, key], ensure_ascii=False, separators=(",", ":"))


def scope_of(call: Call) -> str:
    assert call.spec is not None and call.idempotency_key is not None
    return scope_for(call.principal.tenant, call.spec.name, call.idempotency_key)


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

    On None the caller owns the key and must run the tool; ``finish`` (called by
    the record stage) stores its Envelope and wakes the waiters.
    """
    services = call.services
    scope = scope_of(call)
    assert call.args_hash is not None
    while (running := services.inflight.get(scope)) is not None:
        if running.args_hash != call.args_hash:
            return _conflict(call)
        outcome = await asyncio.shield(running.future)
        if outcome is not None:
            call.detail["idempotency"] = "waited for the in-flight call"
            return replay(outcome)
        # The registrant left without an answer: look again.

    # Registered before the first await so that concurrent callers in this process
    # find it instead of racing to the store.
    entry = InFlight(args_hash=call.args_hash, future=asyncio.get_running_loop().create_future())
    services.inflight[scope] = entry
    call.idempotency_scope = scope
    call.inflight = entry
    now = call.now()
    try:
        try:
            existing = await services.store.claim_idempotency(
                IdempotencyRecord(
                    scope=scope,
                    args_hash=call.args_hash,
                    call_id=call.call_id,
                    state="pending",
                    created_at=now,
                    expires_at=_claim_expiry(call, now),
                )
            )
        except Exception as exc:
            if is_unavailable(exc):
                # The claim may have been committed unheard (a connection lost at
                # the commit): give it back once the store answers, or the key
                # would answer unknown_outcome for a call that never ran.
                _keep(call, scope, released=True, envelope=None, why=exc)
            raise
        if existing is None:
            call.idempotency_owner = True
            return None
        outcome = await _existing_outcome(call, existing)
    except BaseException:
        _leave(call, None)
        raise
    _leave(call, outcome)
    return outcome


def _claim_expiry(call: Call, now: datetime) -> datetime:
    """How long the key's answer is kept. For an apply, past its preview's own expiry:
    a preview id must never find its claim gone while it can still be sent."""
    expiry = now + call.services.limits.idempotency_ttl
    if call.preview is not None:
        expiry = max(expiry, call.preview.expires_at + call.services.limits.idempotency_ttl)
    return expiry


def _leave(call: Call, outcome: Envelope | None) -> None:
    """Unregister this call's in-flight entry (only its own) and wake its waiters."""
    entry = call.inflight
    if entry is None or call.idempotency_scope is None:
        return
    call.inflight = None
    if call.services.inflight.get(call.idempotency_scope) is entry:
        del call.services.inflight[call.idempotency_scope]
    if not entry.future.done():
        entry.future.set_result(outcome)


def _stale_after(call: Call, record: IdempotencyRecord) -> datetime:
    """When a claim without outcome can no longer be running: the tool's own time
    budget after the claim, plus a margin.

    Only a retry-safe tool is tried again, so only its budget counts every attempt
    and backoff. A write (an apply too) runs once: the claim a crashed process
    left is reported after one timeout, not after ``max_attempts`` timeouts and
    backoffs. A run still going past that (a slow re-check of a preview, a tool
    that reports progress) makes a re-send answer ``unknown_outcome`` early, which
    is safe: it never runs the tool, and the first caller's answer is kept.
    """
    spec = call.spec
    assert spec is not None
    limits = call.services.limits
    timeout = call.effective_timeout()
    budget = timeout
    if spec.retry_safe:
        budget = (timeout + limits.backoff_max) * limits.max_attempts
    return record.created_at + timedelta(seconds=min(budget, limits.max_timeout)) + _STALE_MARGIN


async def _existing_outcome(call: Call, record: IdempotencyRecord) -> Envelope:
    if record.args_hash != call.args_hash:
        return _conflict(call)
    deadline = _stale_after(call, record)
    delay = _POLL_START
    while True:
        if record.state == "done" and record.envelope is not None:
            call.detail["idempotency"] = f"replayed the result of {record.call_id}"
            return replay(Envelope.model_validate(record.envelope))
        if call.now() > deadline:
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
            # Released (a transient failure) or expired: nothing more to wait for.
            return call.fail(
                ErrorKind.TRANSIENT,
                f"The earlier call with idempotency key {call.idempotency_key!r} did not "
                "complete; nothing was done.",
                retryable=True,
            )
        record = fresh


async def finish(call: Call, envelope: Envelope, *, deferred: bool = False) -> None:
    """Store the owner's Envelope for later callers and wake the waiting ones.

    A transient failure or a cancellation before any effect releases the key:
    nothing happened, so the same key may run again. With ``deferred`` (the store
    did not answer for this call already), or when the store does not answer
    now, the write waits in the backlog; the claim stays pending meanwhile.
    """
    scope = call.idempotency_scope
    if scope is None:
        return
    # Nothing happened (transient), or nothing may happen yet (parked for a human,
    # or for the client's answer): the key stays free, so the same request can
    # run once it may.
    released = (
        envelope.error is not None and envelope.error.kind is ErrorKind.TRANSIENT
    ) or envelope.status in (Status.PENDING_APPROVAL, Status.PENDING_INPUT)
    cancelled = call.detail.get("cancelled") is True
    try:
        if call.idempotency_owner and deferred:
            _keep(call, scope, released=released, envelope=envelope, why=None)
        elif call.idempotency_owner:
            store = call.services.store
            try:
                if released:
                    await store.release_idempotency(scope, call_id=call.call_id)
                else:
                    await store.complete_idempotency(
                        scope, envelope.model_dump(mode="json"), call_id=call.call_id
                    )
            except KeyError:
                # Our claim expired and another call took the key meanwhile.
                call.detail["idempotency"] = "claim lost before completion"
            except Exception as exc:
                _keep(call, scope, released=released, envelope=envelope, why=exc)
    finally:
        # Waiters of a cancelled owner look again (one of them will run it);
        # otherwise they share the owner's Envelope.
        _leave(call, None if (released and cancelled) else envelope)


def _keep(
    call: Call,
    scope: str,
    *,
    released: bool,
    envelope: Envelope | None,
    why: BaseException | None,
) -> None:
    """Keep the key's release or completion for when the store answers."""
    call_id = call.call_id
    answer = None if released or envelope is None else envelope.model_dump(mode="json")

    async def write(store: Store) -> None:
        if answer is None:
            await store.release_idempotency(scope, call_id=call_id)
        else:
            await store.complete_idempotency(scope, answer, call_id=call_id)

    what = f"the {'release' if answer is None else 'answer'} of idempotency key {scope}"
    call.services.backlog.keep(what, write, why=why)
