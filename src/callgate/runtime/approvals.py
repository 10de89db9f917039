"""Human approval: park a call bound to its exact inputs; decide once; resume once.

When policy says ``require_approval``, the call is parked as an approval
record holding *exactly* what the tool would receive (trusted fields
included) and, for a preview's apply, the previewed impact. The caller gets a
``pending_approval`` Envelope naming the approval. A human approves or denies
it (CLI, HTTP API, later the console and MCP elicitation); the decision is
audited.

An approved call does not run by itself: it runs when its caller makes the
same call again (same tool, same arguments, same user and tenant), or resumes
it with ``Gate.resume(approval_id)``. That call passes the whole chain again
(so it is authorized again with the caller's scopes of *now*), and the
approval is consumed by exactly one run; its Envelope is kept on the approval.
An approval never covers other arguments, never runs twice and expires. Once
used, it answers only that run's own retries (the same idempotency key: the
stored Envelope, nothing runs again); any other identical call, an agent's new
run with its new key included, files a new approval.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from callgate import access
from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.contract import Principal
from callgate.errors import ErrorKind, RuntimeFailure
from callgate.runtime import idempotency, redaction
from callgate.runtime.call import Call
from callgate.runtime.envelope import ApprovalRequest, Decision, Envelope, ErrorInfo, Status
from callgate.runtime.policy import Effect, Verdict, activation
from callgate.store import ApprovalRecord, AuditRecord, Store

APPROVAL_STATUS_TOOL = "callgate.approval_status"
"""The built-in tool that tells where an approval request stands."""


class ApprovalError(RuntimeFailure):
    """A decision that cannot be taken.

    ``code`` says why, for programs: ``unknown``, ``self_approval``,
    ``other_tenant``, ``not_an_approver``, ``already_decided``, ``expired`` or
    ``invalid``.
    """

    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.code = code


def new_approval_id() -> str:
    return "apr_" + secrets.token_urlsafe(9)


def is_live(record: ApprovalRecord, now: datetime | None = None) -> bool:
    """Whether ``record`` has not expired at ``now`` (the system's time by default:
    the gate passes its own clock's)."""
    return record.expires_at > (now or SYSTEM_CLOCK.now())


def effective_state(record: ApprovalRecord, now: datetime | None = None) -> str:
    """The state a person should see: ``expired`` for a pending or approved one past its time."""
    if record.state in ("pending", "approved") and not is_live(record, now):
        return "expired"
    return record.state


def pending_envelope(call: Call, record: ApprovalRecord) -> Envelope:
    """What the caller gets while its call waits for a human."""
    assert call.spec is not None
    return call.envelope(
        Status.PENDING_APPROVAL,
        approval=ApprovalRequest(
            approval_id=record.id, reason=record.reason, expires_at=record.expires_at
        ),
        error=ErrorInfo(
            kind=ErrorKind.BUSINESS_STATE,
            message_for_model=(
                f"Nothing was executed: this needs a human's approval ({record.reason}). "
                f"An approval request has been filed: {record.id}."
            ),
            next_step=(
                f"Tell the user that request {record.id} awaits approval. Once it is approved, "
                f"call {call.shown(call.spec.name)} again with exactly the same arguments; do "
                "not change them, or a new approval is needed."
            ),
            retryable=False,
        ),
    )


async def park(call: Call, verdict: Verdict, *, reason: str | None = None) -> Envelope:
    """File a new approval for exactly this call and answer ``pending_approval``."""
    record = await file_approval(call, verdict, reason=reason)
    return pending_envelope(call, record)


async def file_approval(
    call: Call,
    verdict: Verdict,
    *,
    reason: str | None = None,
    tool: str | None = None,
    arguments: dict[str, Any] | None = None,
    model_arguments: dict[str, Any] | None = None,
    args_hash: str | None = None,
    impact: Any = None,
    preview_id: str | None = None,
) -> ApprovalRecord:
    """Store a pending approval (for this call, or for another bound call: a preview's apply).

    ``arguments`` are stored as people will see them: secret fields redacted.
    """
    assert call.spec is not None
    now = call.now()
    target = call.services.registry.get(tool) if tool else call.spec
    shown = arguments if arguments is not None else call.full_arguments()

    def variables() -> dict[str, Any]:
        assert target is not None
        return activation(
            target,
            shown,
            call.principal,
            call.session_id,
            impact=impact if impact is not None else call.impact,
        )

    record = ApprovalRecord(
        id=new_approval_id(),
        tool=tool or call.spec.name,
        arguments=redaction.redact(shown, call.secret_fields),
        model_arguments=model_arguments if model_arguments is not None else call.arguments,
        args_hash=args_hash or call.args_hash or "",
        user=call.principal.user,
        tenant=call.principal.tenant,
        session_id=call.session_id,
        call_id=call.call_id,
        reason=reason or verdict.reason or "policy requires a human's approval",
        rule=verdict.rule,
        created_at=now,
        expires_at=now + call.services.limits.approval_ttl,
        impact=impact if impact is not None else call.impact,
        preview_id=preview_id or (call.preview.id if call.preview else None),
        approved_by=verdict.approved_by,
        approvers=list(call.services.policy.approver_sets(verdict, variables)),
    )
    # One pending approval per request, across replicas: a concurrent identical
    # call's approval, if it filed first, is the one this call waits on too.
    stored = await call.services.store.create_pending_approval(record)
    call.detail["approval_filed" if stored.id == record.id else "approval_pending"] = stored.id
    return stored


async def require(call: Call, verdict: Verdict) -> Envelope | None:
    """Policy said require_approval: answer from the approval bound to this exact call.

    Returns an Envelope (pending, denied) or None when an approved approval may
    be used: it is consumed in the execute stage by the call that owns the run.
    """
    # No lock here: the store files at most one pending approval per request
    # (create_pending_approval), which holds across processes and replicas too.
    return await _require(call, verdict)


async def _require(call: Call, verdict: Verdict) -> Envelope | None:
    assert call.spec is not None and call.args_hash is not None
    earlier = await _earlier_run(call)
    if isinstance(earlier, Envelope):
        return earlier
    store = call.services.store
    existing = await store.find_approval(
        tool=call.spec.name,
        args_hash=call.args_hash,
        user=call.principal.user,
        tenant=call.principal.tenant,
    )
    if existing is None or not is_live(existing, call.now()):
        return await park(call, verdict)
    if existing.state == "pending":
        call.detail["approval_pending"] = existing.id
        return pending_envelope(call, existing)
    if existing.state == "denied":
        call.detail["approval_denied"] = existing.id
        why = existing.note or "no reason given"
        return call.fail(
            ErrorKind.PERMISSION,
            f"A human ({existing.decided_by}) denied this request ({existing.id}): {why}.",
            next_step="Do not retry. Tell the user it was denied and why.",
        )
    if existing.state == "used" and not earlier:
        # One approval, one run: the same call again (a new run of an agent, a new
        # idempotency key, no key at all) needs a new decision.
        return await park(call, verdict)
    call.approval_to_consume = existing.id
    call.decision = Decision(
        effect="approved",
        reason=f"approved by {existing.decided_by}"
        + (f": {existing.note}" if existing.note else ""),
        rule=verdict.rule,
    )
    return None


async def _earlier_run(call: Call) -> Envelope | bool:
    """Whether ``call`` retries a run that already went ahead (its idempotency key
    is claimed): that run's Envelope once it is done, True while it runs, False
    for a key never claimed (or no key).

    The run that used an approval claimed its key before it consumed the
    approval, so a used approval's own retry always finds its claim; a call with
    a key never claimed (another agent run proposing the identical write) finds
    none and asks a human again. A finished run is answered here, whichever
    approval for the same request is the latest now.
    """
    if not call.idempotency_key:
        return False
    scope = idempotency.scope_of(call)
    if scope in call.services.inflight:
        return True  # the execute stage waits for it and answers with its Envelope
    claim = await call.services.store.get_idempotency(scope)
    if claim is None:
        return False
    if claim.state == "done" and claim.envelope is not None and claim.args_hash == call.args_hash:
        call.detail["idempotency"] = f"replayed the result of {claim.call_id}"
        return idempotency.replay(Envelope.model_validate(claim.envelope))
    return True


async def consume(call: Call) -> Envelope | None:
    """Use the approval for this run (exactly once), or say why it cannot be used."""
    approval_id = call.approval_to_consume
    if approval_id is None:
        return None
    store = call.services.store
    if await store.consume_approval(approval_id, call_id=call.call_id, at=call.now()):
        call.approval_id = approval_id
        return None
    record = await store.get_approval(approval_id)
    if record is not None and record.state == "used":
        # Another run of this same request used it just now: one approval, one run.
        return call.fail(
            ErrorKind.BUSINESS_STATE,
            f"Approval {approval_id} was just used by another run of this same request "
            f"({record.used_by_call}); it covers one run only.",
            next_step=f"Check its result with {call.shown(APPROVAL_STATUS_TOOL)} ({approval_id}) "
            "instead of calling again.",
        )
    assert call.decision is not None
    verdict = Verdict(
        effect=Effect.REQUIRE_APPROVAL,
        reason=None,
        rule=call.decision.rule,
        approved_by=record.approved_by if record is not None else "another",
        approvers=tuple(record.approvers) if record is not None else (),
    )
    return await park(call, verdict, reason=f"approval {approval_id} expired before it was used")


def had_no_effect(call: Call, envelope: Envelope) -> bool:
    """Whether the call ended without touching anything (so its approval is not spent)."""
    if envelope.status is Status.PENDING_INPUT:
        return True  # stopped to ask the client: a tool asks before it changes anything
    if envelope.error is None:
        return False
    if envelope.error.kind is ErrorKind.TRANSIENT:
        return True  # a transient failure or a cancellation before any effect
    # Refused before the tool ran (the preview no longer matches, for one).
    return call.attempts == 0 and envelope.error.kind is not ErrorKind.UNKNOWN_OUTCOME


async def keep_result(call: Call, envelope: Envelope) -> None:
    """Keep the approved run's Envelope on its approval, or give the approval back
    if the run had no effect (it may then run again, still once)."""
    if call.approval_id is None:
        return
    store = call.services.store
    if had_no_effect(call, envelope):
        await store.release_approval(call.approval_id, call_id=call.call_id)
        call.detail["approval"] = f"{call.approval_id} given back: the run had no effect"
        return
    await store.set_approval_result(call.approval_id, envelope.model_dump(mode="json"))


class Approvals:
    """The human side: list, inspect, approve, deny. Every decision is audited."""

    def __init__(self, store: Store, *, audit: Any, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._audit = audit  # GroupCommitter-like: ``await append(record)``
        self._clock = clock

    def state(self, record: ApprovalRecord) -> str:
        """The state a person should see now (:func:`effective_state` on the gate's clock)."""
        return effective_state(record, self._clock.now())

    def as_json(self, record: ApprovalRecord) -> dict[str, Any]:
        """``record`` as the CLI and HTTP API show it, its state as of now."""
        return approval_json(record, self._clock.now())

    async def list(
        self,
        *,
        state: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        oldest_first: bool = False,
    ) -> list[ApprovalRecord]:
        """Newest first (``oldest_first``: the one waiting longest first).
        ``state='expired'`` lists pending/approved ones past their time; ``pending``
        and ``approved`` only those still live; ``settled`` every one no longer
        waiting for a decision (decided, used or expired)."""
        now = self._clock.now()
        if state in ("expired", "settled"):
            return await self._store.list_approvals(
                tenant=tenant,
                limit=limit,
                oldest_first=oldest_first,
                expired_at=now if state == "expired" else None,
                settled_at=now if state == "settled" else None,
            )
        live = state in ("pending", "approved")
        return await self._store.list_approvals(
            state=state,  # type: ignore[arg-type]
            tenant=tenant,
            limit=limit,
            live_at=now if live else None,
            oldest_first=oldest_first,
        )

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        return await self._store.get_approval(approval_id)

    async def approve(
        self, approval_id: str, *, by: Principal, note: str | None = None
    ) -> ApprovalRecord:
        """Approve a pending request as ``by``.

        Who may decide is :func:`callgate.access.check` (``DECIDE_APPROVAL``): a
        person of the request's tenant, not the requester (unless its rules let
        the requester confirm), in every approver set its rules named. A refused
        attempt is audited too (who tried, on what, why refused).

        Raises:
            ApprovalError: unknown, not pending (decided, used or expired), or
                ``by`` may not decide it (``self_approval``, ``other_tenant``,
                ``not_an_approver``).
        """
        return await self._decide(approval_id, "approved", by=by, note=note)

    async def deny(self, approval_id: str, *, by: Principal, reason: str) -> ApprovalRecord:
        """Deny a pending request as ``by``; the caller is told ``reason``.

        The same people may deny as may approve (the requester may withdraw a
        request only where they could confirm it).

        Raises:
            ApprovalError: as :meth:`approve`, or ``invalid`` for an empty reason.
        """
        if not reason.strip():
            raise ApprovalError("a denial needs a reason: the requester is told it", code="invalid")
        return await self._decide(approval_id, "denied", by=by, note=reason)

    async def _decide(
        self, approval_id: str, state: str, *, by: Principal, note: str | None
    ) -> ApprovalRecord:
        if not isinstance(by, Principal):
            # A bare name would skip the tenant and role checks: refuse loudly.
            raise TypeError("approve/deny need the deciding Principal, not a name")
        record = await self._store.get_approval(approval_id)
        if record is None:
            raise ApprovalError(f"no approval request {approval_id!r}", code="unknown")
        verdict = access.check(by, access.Action.DECIDE_APPROVAL, record)
        if not verdict:
            await self._refused(record, state, by, verdict.code, verdict.reason)
            raise ApprovalError(f"{approval_id}: {verdict.reason}", code=verdict.code)
        current = self.state(record)
        if current != "pending":
            error = _not_pending(approval_id, current)
            await self._refused(record, state, by, error.code, str(error))
            raise error
        now = self._clock.now()
        decided = await self._store.decide_approval(
            approval_id,
            state=state,  # type: ignore[arg-type]
            decided_by=by.user,
            note=note,
            at=now,
        )
        if decided is None:
            latest = await self._store.get_approval(approval_id)
            error = _not_pending(approval_id, self.state(latest) if latest else "gone")
            await self._refused(record, state, by, error.code, str(error))
            raise error
        await self._audit.append(
            _decision_record(
                record,
                by,
                at=now,
                decision=state,
                reason=note,
                outcome=state,
                detail={"approval_id": approval_id, "parked_call": record.call_id},
            )
        )
        return decided

    async def _refused(
        self, record: ApprovalRecord, state: str, by: Principal, code: str, reason: str
    ) -> None:
        """Audit an attempt to decide that was refused: who tried, on what, why."""
        await self._audit.append(
            _decision_record(
                record,
                by,
                at=self._clock.now(),
                decision="refused",
                reason=reason,
                outcome=ErrorKind.PERMISSION.value
                if code in _ACCESS_CODES
                else ErrorKind.BUSINESS_STATE.value,
                detail={
                    "approval_id": record.id,
                    "attempted": "approve" if state == "approved" else "deny",
                    "refused": code,
                    "request_tenant": record.tenant,
                    "parked_call": record.call_id,
                },
            )
        )


_ACCESS_CODES = frozenset({"self_approval", "other_tenant", "not_an_approver"})


def _decision_record(
    record: ApprovalRecord,
    by: Principal,
    *,
    at: datetime,
    decision: str,
    reason: str | None,
    outcome: str,
    detail: dict[str, Any],
) -> AuditRecord:
    """A ``decision`` audit record: ``user``/``tenant`` are the decider's own."""
    return AuditRecord(
        call_id=record.id,
        phase="decision",
        at=at,
        trace_id=record.call_id,
        tool=record.tool,
        user=by.user,
        tenant=by.tenant,
        session_id=record.session_id,
        args_hash=record.args_hash,
        decision=decision,
        decision_reason=reason,
        status="decision",
        outcome=outcome,
        detail={"requested_by": record.user, **detail},
    )


def _not_pending(approval_id: str, state: str) -> ApprovalError:
    code = "expired" if state == "expired" else "already_decided"
    return ApprovalError(f"{approval_id} is {state}; a decision is taken once", code=code)


def approval_json(record: ApprovalRecord, now: datetime | None = None) -> dict[str, Any]:
    """An approval as the CLI and HTTP API show it: every exact argument included,
    its state as of ``now``."""
    return {
        "id": record.id,
        "state": effective_state(record, now),
        "tool": record.tool,
        "arguments": record.arguments,
        "model_arguments": record.model_arguments,
        "impact": record.impact,
        "preview_id": record.preview_id,
        "reason": record.reason,
        "rule": record.rule,
        "approved_by": record.approved_by,
        "approvers": record.approvers,
        "may_decide": access.describe_approvers(record.approvers),
        "requested_by": record.user,
        "tenant": record.tenant,
        "session_id": record.session_id,
        "call_id": record.call_id,
        "created_at": record.created_at.isoformat(),
        "expires_at": record.expires_at.isoformat(),
        "decided_by": record.decided_by,
        "decided_at": record.decided_at.isoformat() if record.decided_at else None,
        "note": record.note,
        "used_by_call": record.used_by_call,
        "result": record.result,
    }
