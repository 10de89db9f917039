"""The audit: filtered and paged by cursor, exported as JSON Lines, and one
call's whole story (intent, decision, approvals, attempts, outcome, result).

Everything is read with :meth:`~callgate.store.console_records.ConsoleRecords.search_audit`
in the reader's :func:`~callgate.access.record_scope`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from callgate import access
from callgate.access import Action
from callgate.cli.audit_view import records_json
from callgate.contract.annotations import RiskTier
from callgate.errors import ErrorKind
from callgate.runtime.envelope import Status
from callgate.store.console_records import AuditQuery, Scope

if TYPE_CHECKING:
    from callgate.console.sessions import SignedIn
    from callgate.console.web import Console

__all__ = ["FILTERS", "ROUTES"]

PAGE = 50
EXPORT_PAGE = 1000
EXPORT_MAX = 1_000_000
"""Records one export streams at most (the newest first)."""
FILTERS = ("tool", "user", "tenant", "status", "outcome", "risk", "trace_id", "call_id", "phase")
_TIMES = ("since", "until")
STATUSES = tuple(status.value for status in Status)
KINDS = tuple(kind.value for kind in ErrorKind)
PHASES = ("intent", "final", "decision", "late")


def _time(raw: str, name: str) -> datetime:
    from callgate.console.web import ConsoleError

    try:
        value = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ConsoleError(
            400, f"{name} must be a date and time such as 2026-12-05T13:00 (UTC), not {raw!r}"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def query_from(
    request: Request, scope: Scope, *, limit: int = PAGE
) -> tuple[AuditQuery, dict[str, str]]:
    """The audit query a page's parameters ask for, and the filters as given.

    Raises:
        ConsoleError: 400 for a time or cursor that cannot be read.
    """
    from callgate.console.web import ConsoleError

    params = request.query_params
    given = {k: params[k].strip() for k in (*FILTERS, *_TIMES) if params.get(k, "").strip()}
    values: dict[str, Any] = {k: v for k, v in given.items() if k in FILTERS}
    for name in _TIMES:
        if name in given:
            values[name] = _time(given[name], name)
    before = params.get("before")
    if before:
        if not before.isdigit():
            raise ConsoleError(400, "before must be a record number (the cursor of a page)")
        values["before"] = int(before)
    return AuditQuery(scope=scope, limit=limit, **values), given


async def audit_page(console: Console, request: Request, signed_in: SignedIn) -> Response:
    scope = access.record_scope(signed_in.principal)
    query, given = query_from(request, scope, limit=PAGE + 1)
    records = await (await console.records()).search_audit(query)
    more = len(records) > PAGE
    records = records[:PAGE]
    older = urlencode({**given, "before": records[-1].seq}) if more else None
    return console.render(
        "audit.html",
        request,
        signed_in,
        records=records,
        given=given,
        older=older,
        first_page="before" in request.query_params,
        newest=urlencode(given),
        export=urlencode(given),
        every_tenant=scope.every_tenant,
        statuses=STATUSES,
        kinds=KINDS,
        phases=PHASES,
        risks=tuple(tier.value for tier in RiskTier),
    )


async def export(console: Console, request: Request, signed_in: SignedIn) -> Response:
    """The current filter's records as JSON Lines, newest first, streamed a page at a time."""
    scope = access.record_scope(signed_in.principal)
    query, _ = query_from(request, scope, limit=EXPORT_PAGE)
    store = await console.records()

    async def lines() -> AsyncIterator[bytes]:
        page, sent = query, 0
        while sent < EXPORT_MAX:
            records = await store.search_audit(page)
            if not records:
                return
            for row in records_json(records):
                row.pop("outcome_unknown", None)  # needs the whole call: not known per page
                yield (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()
            sent += len(records)
            if len(records) < page.limit:
                return
            page = replace(page, before=records[-1].seq)

    stamp = console.gate.clock.now().strftime("%Y%m%dT%H%M%SZ")
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="callgate-audit-{stamp}.jsonl"',
            "Cache-Control": "no-store",
        },
    )


async def call_story(console: Console, request: Request, signed_in: SignedIn) -> Response:
    from callgate.console.web import ConsoleError

    call_id = request.path_params["call_id"]
    scope = access.record_scope(signed_in.principal)
    store = await console.records()
    newest_first = await store.search_audit(AuditQuery(scope=scope, call_id=call_id, limit=500))
    if not newest_first:
        raise ConsoleError(404, f"There is no call {call_id} you can see.")
    records = newest_first[::-1]
    ids: dict[str, None] = {}
    for record in records:
        for key in ("approval_filed", "approval_pending", "approval_denied", "approval_used"):
            if isinstance(record.detail.get(key), str):
                ids[record.detail[key]] = None
    approvals_api = await console.gate.approvals()
    approvals: list[dict[str, Any]] = []
    for approval_id in ids:
        approval = await approvals_api.get(approval_id)
        if approval is not None and access.check(
            signed_in.principal, Action.VIEW_APPROVAL, approval
        ):
            decisions = await store.search_audit(
                AuditQuery(
                    scope=Scope(every_tenant=True), call_id=approval_id, phase="decision", limit=20
                )
            )
            approvals.append({"record": approval, "decisions": decisions[::-1]})
    last = next((r for r in newest_first if r.phase == "final"), None)
    result = _shaped_result(approvals, last)
    if result is None and last is not None and last.idempotency_key:
        kept = await store.get_idempotency(
            json.dumps([last.tenant, last.tool, last.idempotency_key])
        )
        if kept is not None and kept.call_id == call_id:
            result = kept.envelope
    events: list[tuple[str, Any, Any]] = [("record", r.at, r) for r in records]
    events += [("approval", a["record"].created_at, a) for a in approvals]
    raw_ref = next((r.detail["raw_ref"] for r in newest_first if "raw_ref" in r.detail), None)
    return console.render(
        "call.html",
        request,
        signed_in,
        call_id=call_id,
        records=records,
        first=records[0],
        last=last,
        unknown=last is None and any(r.phase == "intent" for r in records),
        events=sorted(events, key=lambda event: event[1]),
        result=result,
        raw_ref=raw_ref,
        parent=records[0].detail.get("parent_call_id"),
    )


def _shaped_result(approvals: list[dict[str, Any]], last: Any) -> Any:
    if last is None:
        return None
    for approval in approvals:
        record = approval["record"]
        if record.used_by_call == last.call_id and record.result is not None:
            return record.result
    return None


async def full_result(console: Console, request: Request, signed_in: SignedIn) -> Response:
    from callgate.console.web import ConsoleError

    ref = request.path_params["ref"]
    stored = await (await console.records()).get_result(ref)
    if stored is None or not access.may_read(signed_in.principal, stored):
        raise ConsoleError(404, f"There is no kept result {ref} you can see (it may have expired).")
    return console.render("result.html", request, signed_in, stored=stored)


ROUTES = [
    ("/audit", audit_page, ["GET"]),
    ("/audit/export.jsonl", export, ["GET"]),
    ("/calls/{call_id}", call_story, ["GET"]),
    ("/results/{ref}", full_result, ["GET"]),
]
