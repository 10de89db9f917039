"""The approvals inbox and one approval's page, with its decision forms.

The inbox lists pending requests first, oldest first (the one waiting longest
at the top), then the latest decided ones. Its pending rows are polled by the
page's script every few seconds (``/approvals/rows``: ``204`` while nothing
changed), so new requests appear below the ones shown without a reload.
Deciding runs :meth:`~callgate.runtime.approvals.Approvals.approve` or
``deny``, the same code as ``callgate approvals approve``: the checks (same
tenant, not the requester, in every approver set) and the audit are theirs.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from callgate import access
from callgate.access import ADMIN_ROLE, Action
from callgate.console import views
from callgate.runtime.approvals import ApprovalError, effective_state
from callgate.store import ApprovalRecord

if TYPE_CHECKING:
    from callgate.console.sessions import SignedIn
    from callgate.console.web import Console

__all__ = ["ROUTES"]

DECIDED_SHOWN = 25
"""Decided requests the inbox shows below the pending ones."""
PENDING_SHOWN = 100
"""Pending requests the inbox shows, the ones waiting longest; it says when more wait."""


async def _visible(
    console: Console, signed_in: SignedIn, state: str | None, limit: int
) -> list[ApprovalRecord]:
    who = signed_in.principal
    approvals = await console.gate.approvals()
    admin = ADMIN_ROLE in who.roles
    rows = await approvals.list(
        state=state,
        tenant=None if admin else who.tenant,
        limit=limit,
        oldest_first=state == "pending",
    )
    return [r for r in rows if access.check(who, Action.VIEW_APPROVAL, r)]


async def _pending(console: Console, signed_in: SignedIn) -> tuple[list[dict[str, Any]], bool]:
    """The pending rows, oldest first, and whether more wait behind them."""
    rows = await _visible(console, signed_in, "pending", PENDING_SHOWN + 1)
    shown = rows[:PENDING_SHOWN]
    return [_row(console, r, signed_in) for r in shown], len(rows) > len(shown)


def _row(console: Console, record: ApprovalRecord, signed_in: SignedIn) -> dict[str, Any]:
    spec = console.gate.tool(record.tool)
    decide = access.check(signed_in.principal, Action.DECIDE_APPROVAL, record)
    rows, _ = views.impact_rows(record.impact)
    return {
        "record": record,
        "state": effective_state(record, console.gate.clock.now()),
        "risk": spec.risk.value if spec else "unknown",
        "summary": "; ".join(
            f"{r.label} {r.before} → {r.after} ({r.change})" for r in rows if r.changed
        ),
        "may_decide": bool(decide),
        "why_not": None if decide else decide.reason,
    }


async def waiting(console: Console, signed_in: SignedIn) -> str:
    """How many pending requests ``signed_in`` sees (``100+`` past what the inbox shows)."""
    rows = await _visible(console, signed_in, "pending", PENDING_SHOWN + 1)
    return f"{PENDING_SHOWN}+" if len(rows) > PENDING_SHOWN else str(len(rows))


def _version(rows: list[dict[str, Any]], more: bool) -> str:
    text = "|".join(f"{r['record'].id}:{r['state']}:{r['may_decide']}" for r in rows)
    return hashlib.sha256(f"{text}|{more}".encode()).hexdigest()[:16]


def _count(rows: list[dict[str, Any]], more: bool) -> str:
    return f"{len(rows)}+" if more else str(len(rows))


async def inbox(console: Console, request: Request, signed_in: SignedIn) -> Response:
    pending, more = await _pending(console, signed_in)
    decided = [
        _row(console, r, signed_in)
        for r in await _visible(console, signed_in, "settled", DECIDED_SHOWN)
    ]
    return console.render(
        "inbox.html",
        request,
        signed_in,
        pending=pending,
        more=more,
        count=_count(pending, more),
        decided=decided,
        version=_version(pending, more),
    )


async def inbox_rows(console: Console, request: Request, signed_in: SignedIn) -> Response:
    """The pending rows alone, for the inbox's polling; 204 while unchanged."""
    pending, more = await _pending(console, signed_in)
    version = _version(pending, more)
    if request.query_params.get("version") == version:
        return Response(status_code=204, headers={"Cache-Control": "no-store"})
    response = console.render("_pending_rows.html", request, signed_in, pending=pending, more=more)
    response.headers["X-Inbox-Version"] = version
    response.headers["X-Inbox-Count"] = _count(pending, more)
    return response


async def _record(console: Console, request: Request, signed_in: SignedIn) -> ApprovalRecord:
    from callgate.console.web import ConsoleError

    approval_id = request.path_params["approval_id"]
    record = await (await console.gate.approvals()).get(approval_id)
    if record is None or not access.check(signed_in.principal, Action.VIEW_APPROVAL, record):
        raise ConsoleError(404, f"There is no approval request {approval_id} you can see.")
    return record


async def approval(console: Console, request: Request, signed_in: SignedIn) -> Response:
    record = await _record(console, request, signed_in)
    return await _approval_page(console, request, signed_in, record)


async def _approval_page(
    console: Console,
    request: Request,
    signed_in: SignedIn,
    record: ApprovalRecord,
    *,
    status: int = 200,
    problem: str | None = None,
    done: str | None = None,
) -> Response:
    from callgate.console.impact import impact_now

    row = _row(console, record, signed_in)
    diff, facts = views.impact_rows(record.impact)
    changed = None
    if row["state"] == "pending" and record.preview_id is not None:
        changed = await impact_now(console.gate, record)
    return console.render(
        "approval.html",
        request,
        signed_in,
        status,
        row=row,
        a=record,
        diff=diff,
        facts=facts,
        changed=changed,
        approvers=access.describe_approvers(record.approvers),
        set_by=_set_by(console, record),
        problem=problem,
        done=done or request.query_params.get("done"),
    )


def _set_by(console: Console, record: ApprovalRecord) -> dict[str, str]:
    """Who set each argument: the model, the server (a trusted field), or the
    preview the apply is bound to."""
    spec = console.gate.tool(record.tool)
    trusted = set(spec.trusted_fields) if spec is not None else set()
    preview = console.gate.tool(spec.change.preview_tool) if spec and spec.change else None
    if preview is not None:  # an apply runs on what its preview was given
        trusted |= set(preview.trusted_fields)
    out = {}
    for name in record.arguments:
        if name in trusted:
            out[name] = "the server (trusted)"
        elif name in record.model_arguments:
            out[name] = "the model"
        else:
            out[name] = "the preview" if record.preview_id else "the server"
    return out


async def decide(console: Console, request: Request, signed_in: SignedIn) -> Response:
    from callgate.console.web import ConsoleError

    verb = request.path_params["verb"]
    if verb not in ("approve", "deny"):
        raise ConsoleError(404, "There is no such page.")
    form = await console.form(request, signed_in)
    record = await _record(console, request, signed_in)
    text = form.get("text")
    text = text.strip() if isinstance(text, str) else ""
    approvals = await console.gate.approvals()
    try:
        if verb == "approve":
            await approvals.approve(record.id, by=signed_in.principal, note=text or None)
        elif not text:
            return await _approval_page(
                console,
                request,
                signed_in,
                record,
                status=400,
                problem="Say why you deny it: the requester (and the model) are told the reason.",
            )
        else:
            await approvals.deny(record.id, by=signed_in.principal, reason=text)
    except ApprovalError as exc:
        current = await approvals.get(record.id) or record
        status = {"unknown": 404, "invalid": 400, "other_tenant": 403, "not_an_approver": 403}
        return await _approval_page(
            console,
            request,
            signed_in,
            current,
            status=status.get(exc.code, 409),
            problem=str(exc),
        )
    done = "approved" if verb == "approve" else "denied"
    return RedirectResponse(
        f"{request.url.path.rsplit('/', 1)[0]}?done={done}",
        303,
        headers={"Cache-Control": "no-store"},
    )


ROUTES = [
    ("/approvals", inbox, ["GET"]),
    ("/approvals/rows", inbox_rows, ["GET"]),
    ("/approvals/{approval_id}", approval, ["GET"]),
    ("/approvals/{approval_id}/{verb:str}", decide, ["POST"]),
]
