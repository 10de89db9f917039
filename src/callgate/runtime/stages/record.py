"""Stage 10: record the call, and answer only what the store holds.

The Envelope is returned once its final audit record is durable. When the store
cannot take it (a SQLite file locked by another process, PostgreSQL connections
terminated, a server restarting), the caller still gets an Envelope, never the
driver's text (it names SQL statements and their parameters), and never one that
invites a blind retry:

- a side effect may have started (a write's intent was recorded): ``unknown_outcome``,
  whatever the tool answered, since the answer could not be kept;
- nothing was changed (a read, or a call that ended before its tool ran):
  ``transient``, to be tried again.

The record itself, the idempotency key's answer and the approval's result are
kept in the write backlog (:mod:`callgate.store.backlog`) and written once the
store answers. The kept record holds what really happened (``outcome: ok`` for
a write that worked) and, in its detail, what the caller was told (``answered``)
and why (``store_error``).

Taints go to the store first: a result must not reach a session whose store
does not know what the result brought into it (the lethal trifecta guard reads
them on the next call, from any replica).
"""

from __future__ import annotations

from typing import Any

import anyio

from callgate.errors import ErrorKind
from callgate.runtime import approvals, idempotency, trifecta
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.recording import audit_record
from callgate.store import Store
from callgate.store.failures import describe


async def record(call: Call, envelope: Envelope, *, store_failed: bool = False) -> Envelope:
    """Record ``call`` and return the Envelope its caller gets.

    Args:
        call: The finished call.
        envelope: Its outcome, as the chain produced it.
        store_failed: The chain already ended on a store that does not answer
            (``envelope`` says so): keep every write for later instead of waiting
            for the store again.
    """
    services = call.services
    answer = envelope
    deferred = store_failed
    failure: BaseException | None = None
    try:
        if not deferred:
            try:
                await trifecta.note_envelope(call, envelope)
                await services.committer.append(
                    audit_record(call, phase="final", envelope=envelope)
                )
            except Exception as exc:
                failure, deferred = exc, True
            else:
                services.backlog.poke()
        if deferred:
            if failure is not None:
                answer = unrecorded(call, envelope)
                call.detail["store_error"] = describe(failure)
            call.detail["answered"] = _kind(answer)
            services.backlog.keep_audit(
                audit_record(call, phase="final", envelope=envelope), why=failure
            )
        await _keep_approval_result(call, answer, deferred=deferred)
    finally:
        if call.idempotency_scope is not None:
            with anyio.CancelScope(shield=True):
                await idempotency.finish(call, answer, deferred=deferred)
    return answer


def unrecorded(call: Call, envelope: Envelope | None = None) -> Envelope:
    """What the caller gets when the store could not take the call's outcome
    (``envelope``, when the chain got that far)."""
    spec = call.spec
    ran_write = call.intent_written and spec is not None
    error = envelope.error if envelope is not None else None
    if ran_write and error is not None and error.kind is ErrorKind.UNKNOWN_OUTCOME:
        assert envelope is not None
        return envelope  # already says exactly this
    if ran_write:
        assert spec is not None
        return call.fail(
            ErrorKind.UNKNOWN_OUTCOME,
            f"{call.shown(spec.name)} ran, but its outcome could not be recorded (callgate's "
            f"store did not answer; reference {call.call_id}); the change may have been made.",
            next_step=f"Do not retry. First {call.how_to_check()} to see whether the change happened.",
            detail_ref=call.call_id,
        )
    return call.fail(
        ErrorKind.TRANSIENT,
        "callgate's store did not answer, so this call could not be recorded; nothing "
        "was changed and no result is shown.",
        next_step="Wait a moment and try again.",
        retryable=True,
    )


def _kind(envelope: Envelope) -> str:
    return envelope.error.kind.value if envelope.error is not None else envelope.status.value


async def _keep_approval_result(call: Call, answer: Envelope, *, deferred: bool) -> None:
    """The approved run's Envelope on its approval (or the approval given back)."""
    approval_id = call.approval_id
    if approval_id is None:
        return
    failure: BaseException | None = None
    if not deferred:
        try:
            await approvals.keep_result(call, answer)
            return
        except Exception as exc:
            failure = exc
    # Kept with small values only: a kept write must not hold the call and its payload.
    call_id = call.call_id
    if approvals.had_no_effect(call, answer):

        async def give_back(store: Store) -> Any:
            return await store.release_approval(approval_id, call_id=call_id)

        call.services.backlog.keep(f"the release of {approval_id}", give_back, why=failure)
        return
    result = answer.model_dump(mode="json")

    async def keep(store: Store) -> Any:
        await store.set_approval_result(approval_id, result)

    call.services.backlog.keep(f"the result of {approval_id}", keep, why=failure)
