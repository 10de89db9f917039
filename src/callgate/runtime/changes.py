"""The runtime side of preview / apply (see ``callgate.contract.change``).

- preview: the preview function runs like any read-only tool; its impact and
  the exact arguments are then kept as a PreviewRecord with a short-lived,
  unguessable id bound to the caller and tenant. The apply tool's policy is
  decided right away on those arguments and that impact (the decide stage's
  own verdict), so the model learns at once when the change will need a human,
  and the approval is filed then.
- apply: the id is bound to the stored arguments (it takes nothing else), the
  caller must be the one who previewed, and the id is the call's idempotency
  key: the apply function runs once per id, every caller gets its Envelope,
  and a timed-out apply is an unknown outcome, never retried.
- status: reads what happened to an id, for reconciling after a timeout.

The chain's stage for these three tools is :mod:`callgate.runtime.stages.change`;
this module holds what it does.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import timedelta
from typing import Any

from callgate import access
from callgate.contract import ToolContext, ToolSpec
from callgate.contract.change import ChangeBinding
from callgate.errors import ErrorKind, ToolError
from callgate.runtime import approvals, idempotency, redaction
from callgate.runtime.call import Call, hash_json
from callgate.runtime.deadline import Deadline
from callgate.runtime.envelope import Envelope
from callgate.runtime.invoke import run_tool
from callgate.runtime.policy import Effect
from callgate.runtime.runner import Unresponsive
from callgate.runtime.stages.decide import verdict_for
from callgate.store import PreviewRecord

PREVIEW_ID = "preview_id"


def new_preview_id() -> str:
    return "pv_" + secrets.token_urlsafe(18)


def apply_arguments(record: PreviewRecord) -> dict[str, Any]:
    """What the apply call is bound to: the previewed arguments and the id."""
    return {**record.arguments, PREVIEW_ID: record.id}


async def find(call: Call, change: ChangeBinding) -> Envelope | None:
    """For apply and status: find the preview and check it belongs to this caller."""
    preview_id = call.arguments.get(PREVIEW_ID)
    record = await call.services.store.get_preview(preview_id) if preview_id else None
    again = f"Call {call.shown(change.preview_tool)} again to get a new preview_id."
    if record is None or record.change != change.apply_tool:
        return call.fail(
            ErrorKind.CONSTRUCTION,
            f"Unknown preview_id {preview_id!r} for {call.shown(change.apply_tool)}.",
            next_step=f"Use the preview_id exactly as returned. {again}",
        )
    if not access.owns(call.principal, record):
        return call.fail(
            ErrorKind.PERMISSION,
            "That preview belongs to another user or tenant; a preview can only be applied "
            "by whoever made it.",
            next_step=again,
        )
    call.preview = record
    call.impact = record.impact
    if change.role == "apply" and record.expires_at <= call.now():
        return call.fail(
            ErrorKind.CONSTRUCTION,
            f"Preview {preview_id} expired at {record.expires_at:%Y-%m-%d %H:%M:%S} UTC; "
            "nothing was changed.",
            next_step=again,
        )
    return None


def bind_apply(call: Call, change: ChangeBinding) -> None:
    """Give the apply exactly the previewed inputs: the apply function, the
    previewed arguments and trusted values (secrets afresh), the id as its
    idempotency key, and a check that the impact is still what was previewed."""
    assert call.preview is not None
    performer = change.performer
    assert performer is not None
    stored = call.preview.arguments
    model_args = {
        k: v for k, v in stored.items() if k in performer.input_schema.get("properties", {})
    }
    call.handler = performer.handler
    call.prepared, _ = performer.handler.prepare(model_args)
    call.secret_fields = redaction.secret_fields(performer, call.services.secret_sources)
    call.injected = previewed_injection(call, performer)
    call.bound_arguments = apply_arguments(call.preview)
    # The id is the idempotency key: one run per preview, whoever sends it.
    call.idempotency_key = call.preview.id
    call.args_hash = hash_json(call.bound_arguments)
    call.check_with = f"call {call.shown(change.status_tool)} with the same preview_id"

    async def check(call: Call) -> Envelope | None:
        return await unchanged(call, change)

    call.before_run = check


def previewed_injection(call: Call, spec: ToolSpec) -> dict[str, Any]:
    """The trusted values of ``spec`` for the apply of a preview: as previewed,
    except secrets, which previews never keep and are injected afresh."""
    assert call.preview is not None
    stored = call.preview.arguments
    secret = redaction.secret_fields(spec, call.services.secret_sources)
    return {
        name: call.trusted_value(marker.source or name) if name in secret else stored[name]
        for name, marker in spec.trusted_fields.items()
    }


async def _run_helper(call: Call, helper: ToolSpec) -> Any:
    """Run a change's own helper function (preview again, verify) on the previewed
    arguments. Part of the apply or status tool's work, inside its governed call:
    its deadline is that tool's timeout, and it runs on the gate's runner under
    the helper's own caps (a hung verifier cannot take more threads than a tool).

    Raises:
        Unresponsive: the helper's stray work fills its cap.
        TimeoutError: it did not answer in time (``NotStarted``, ``Overran``).
    """
    assert call.preview is not None
    stored = call.preview.arguments
    kwargs, _ = helper.handler.prepare(
        {k: v for k, v in stored.items() if k in helper.input_schema.get("properties", {})}
    )
    injected = previewed_injection(call, helper)
    timeout = call.effective_timeout()
    ctx = ToolContext(
        call_id=call.call_id,
        trace_id=call.trace_id,
        tool=helper.name,
        principal=call.principal,
        session_id=call.session_id,
        idempotency_key=None,
        deadline=call.now() + timedelta(seconds=timeout),
        attempt=1,
        handle_store=call.services.store,
    )
    return await run_tool(
        call, helper.name, helper.handler, kwargs, injected, ctx, Deadline(timeout)
    )


async def unchanged(call: Call, change: ChangeBinding) -> Envelope | None:
    """Before applying: the impact must still be what was previewed (and approved).

    Otherwise the apply would do something nobody saw: e.g. +25% previewed, the
    budget lowered meanwhile, +200% applied without the approval +200% needs.
    Run by the call that owns the apply's run, just before the apply function.
    """
    assert call.preview is not None
    previewer = change.previewer
    if previewer is None:
        return None
    timeout = call.effective_timeout()
    again = f"Call {call.shown(change.preview_tool)} again and show the user the new impact."
    try:
        async with asyncio.timeout(timeout):
            now = await _run_helper(call, previewer)
    except ToolError as exc:
        return call.fail(
            exc.kind,
            call.in_callers_names(exc.message) or "",
            next_step=call.in_callers_names(exc.next_step) or again,
        )
    except Unresponsive as exc:
        return call.fail(
            ErrorKind.TRANSIENT,
            "Could not confirm that the situation is still as previewed: the check is not "
            f"responding ({exc.stuck} earlier checks are still running); nothing was changed.",
            retryable=True,
        )
    except TimeoutError:
        return call.fail(
            ErrorKind.TRANSIENT,
            f"Could not confirm within {timeout:g} seconds that the situation is still as "
            "previewed; nothing was changed.",
            retryable=True,
        )
    if json.dumps(now, sort_keys=True, default=str) != json.dumps(
        call.preview.impact, sort_keys=True, default=str
    ):
        call.detail["impact_now"] = now
        return call.fail(
            ErrorKind.BUSINESS_STATE,
            "The situation changed since the preview, so applying it would not do what was "
            "previewed; nothing was changed.",
            next_step=again,
        )
    return None


async def impact_now(services: Any, preview: PreviewRecord) -> Any:
    """What the preview of ``preview``'s change computes now, on its stored arguments,
    for its requester: a person about to approve sees whether the world moved.

    Raises:
        LookupError: the change's tool or previewer is gone.
        Exception: whatever the previewer raises; TimeoutError past its timeout.
    """
    from callgate.contract import Principal

    spec = services.registry.get(preview.change)
    change = spec.change if spec is not None else None
    if change is None or change.previewer is None:
        raise LookupError(f"{preview.change} has no preview to run again")
    call = Call(
        services=services,
        tool_name=spec.name,
        raw_arguments=None,
        principal=Principal(preview.user, preview.tenant),
    )
    call.spec = spec
    call.preview = preview
    async with asyncio.timeout(call.effective_timeout()):
        return await _run_helper(call, change.previewer)


async def keep_preview(call: Call, change: ChangeBinding, impact: Any) -> dict[str, Any]:
    """Keep the preview, decide the apply's policy now, and say what comes next."""
    services = call.services
    apply_spec = services.registry.get(change.apply_tool)
    assert apply_spec is not None
    now = call.now()
    preview_id = new_preview_id()
    # Kept (and hashed) as shown to people: secrets are injected afresh at apply.
    arguments = call.shown_arguments()
    bound = {**arguments, PREVIEW_ID: preview_id}
    verdict = await verdict_for(call, apply_spec, lambda: bound, impact=impact)
    needs_human = verdict.effect is Effect.REQUIRE_APPROVAL
    # A preview awaiting a human stays valid as long as its approval can be given.
    ttl = services.limits.approval_ttl if needs_human else timedelta(seconds=change.ttl)
    record = PreviewRecord(
        id=preview_id,
        change=change.apply_tool,
        arguments=arguments,
        args_hash=hash_json(bound),
        user=call.principal.user,
        tenant=call.principal.tenant,
        impact=impact,
        created_at=now,
        expires_at=now + ttl,
    )
    await services.store.create_preview(record)
    call.detail["preview_id"] = preview_id
    out: dict[str, Any] = {
        "preview_id": preview_id,
        "expires_at": record.expires_at.isoformat(),
        "impact": impact,
    }
    if verdict.effect is Effect.DENY:
        out["next_step"] = (
            f"This change would be refused: {verdict.reason or 'policy does not allow it'}. "
            "Do not apply it; tell the user."
        )
        out["policy"] = {"effect": "deny", "reason": verdict.reason}
        return out
    if needs_human:
        approval = await approvals.file_approval(
            call,
            verdict,
            tool=apply_spec.name,
            arguments=bound,
            model_arguments={PREVIEW_ID: preview_id},
            args_hash=record.args_hash,
            impact=impact,
            preview_id=preview_id,
        )
        await services.store.set_preview_approval(preview_id, approval.id)
        out["approval"] = {
            "approval_id": approval.id,
            "state": "pending",
            "reason": approval.reason,
        }
        out["next_step"] = (
            f"This change needs a human's approval ({approval.reason}); an approval request "
            f"has been filed: {approval.id}. Tell the user. Once it is approved, call "
            f"{call.shown(apply_spec.name)} with this preview_id."
        )
        return out
    out["next_step"] = (
        "Show the user the impact. To make exactly this change, call "
        f"{call.shown(apply_spec.name)} with this preview_id before it expires."
    )
    return out


async def status(call: Call, change: ChangeBinding) -> dict[str, Any]:
    """Whether a previewed change was applied (after :func:`find`).

    The apply's claim is looked up under the key the apply itself used: the
    preview id, in the previewer's tenant, for the apply tool
    (:func:`idempotency.scope_for`, the same function the apply's own
    :func:`idempotency.scope_of` uses).
    """
    assert call.preview is not None
    record = call.preview
    services = call.services
    scope = idempotency.scope_for(record.tenant, change.apply_tool, record.id)
    claim = await services.store.get_idempotency(scope)
    now = call.now()
    out: dict[str, Any] = {"preview_id": record.id, "impact": record.impact}
    if claim is None:
        out["state"] = "not_applied"
        out["preview_valid"] = record.expires_at > now
        out["expires_at"] = record.expires_at.isoformat()
    elif claim.state == "pending":
        out["state"] = "applying"
        out["note"] = (
            "The apply started and has no recorded outcome yet. If it started long ago, "
            "its process stopped: check the system itself before doing anything else."
        )
    else:
        envelope = claim.envelope or {}
        error = envelope.get("error")
        out["state"] = "failed" if error else "applied"
        out["applied_by_call"] = claim.call_id
        out["result"] = envelope.get("payload")
        if error:
            out["error"] = {"kind": error["kind"], "message": error["message_for_model"]}
            if error["kind"] == ErrorKind.UNKNOWN_OUTCOME:
                out["state"] = "unknown"
    if out["state"] in ("applying", "unknown") and change.verifier is not None:
        in_effect = bool(await _run_helper(call, change.verifier))
        out["state"] = "applied" if in_effect else "not_applied"
        out["verified"] = (
            "checked on the live system: the change is in effect"
            if in_effect
            else "checked on the live system: the change is not in effect"
        )
    if record.approval_id:
        approval = await services.store.get_approval(record.approval_id)
        if approval is not None:
            out["approval"] = {
                "approval_id": approval.id,
                "state": approvals.effective_state(approval, now),
                "decided_by": approval.decided_by,
                "note": approval.note,
            }
    return out
