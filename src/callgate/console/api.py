"""The approvals HTTP API: the JSON endpoints the web console (and scripts) use.

Endpoints (all JSON; an approval is :func:`~callgate.runtime.approvals.approval_json`):

- ``GET /api/approvals?state=pending&limit=100``: ``{"approvals": [...]}``, newest first.
- ``GET /api/approvals/{id}``: one approval, with its exact arguments, impact and
  (once the approved call ran) its Envelope under ``result``.
- ``POST /api/approvals/{id}/approve`` with ``{"note": "..."}`` (or ``{}``).
- ``POST /api/approvals/{id}/deny`` with ``{"reason": "..."}`` (required: the
  requester is told it).

Access: every request needs a principal from ``authenticate`` (else 401).
Who may see and decide what is :func:`callgate.access.check`, the same rule
as everywhere else: reading shows the principal's tenant's approvals (all of
them for the role ``admin``); another tenant's approval looks exactly like a
missing one (404). Deciding needs the approval's tenant (an admin who can see
another tenant's approval still gets 403 ``other_tenant``) and membership of
every approver set its rules named, such as a role (403 ``not_an_approver``);
nobody approves their own request (409 ``self_approval``). Every refused
attempt is audited. The decider is always the authenticated user, never a field
of the body. POST bodies must be ``application/json``, so a browser never sends
one cross-site without a CORS preflight.

Errors are always ``{"error": {"code": ..., "message": ...}}``, unexpected ones
included (500 ``internal_error``): 400 ``invalid_request``, 401
``unauthenticated``, 403 ``other_tenant`` / ``not_an_approver``, 404
``not_found``, 409 ``already_decided`` / ``expired`` / ``self_approval``, 413
``payload_too_large``, 415 ``unsupported_media_type``.

Deciding does not run the call: an approved call runs once, when its caller
makes it again or resumes it (``Gate.resume``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from callgate import access
from callgate.access import ADMIN_ROLE, Action
from callgate.console.auth import Authenticate, Unauthenticated, authenticate_request
from callgate.contract import Principal
from callgate.runtime.approvals import ApprovalError, Approvals, approval_json
from callgate.runtime.gate import Gate
from callgate.store import ApprovalRecord

__all__ = ["ADMIN_ROLE", "approvals_app"]

STATES = ("pending", "approved", "denied", "used", "expired")
MAX_BODY_BYTES = 16 * 1024
logger = logging.getLogger(__name__)
MAX_LIMIT = 500
_NO_STORE = {"Cache-Control": "no-store"}


class _ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers={**_NO_STORE, **(headers or {})})


def _error(exc: _ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return _json({"error": {"code": exc.code, "message": exc.message}}, exc.status, headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _ApiError)
    return _error(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 as JSON errors too."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    response = _error(_ApiError(exc.status_code, code, str(exc.detail)))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def approvals_app(gate: Gate, *, authenticate: Authenticate) -> Starlette:
    """A Starlette app serving the approvals API over ``gate``'s store.

    The gate is opened on first use and not closed by the app: its owner
    closes it (for example in the ASGI server's lifespan).

    Args:
        gate: whose approvals are listed and decided (decisions are audited there).
        authenticate: maps a request to its principal, or None (401); sync
            or async, the same seam as the MCP endpoint's (see
            :mod:`callgate.console.auth`).

    Returns:
        The ASGI app; mount it or serve it as is.
    """
    api = _ApprovalsApi(gate, authenticate)
    return Starlette(
        routes=[
            Route("/api/approvals", api.list_approvals, methods=["GET"]),
            Route("/api/approvals/{approval_id}", api.show_approval, methods=["GET"]),
            Route("/api/approvals/{approval_id}/approve", api.approve, methods=["POST"]),
            Route("/api/approvals/{approval_id}/deny", api.deny, methods=["POST"]),
        ],
        exception_handlers={
            _ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected is still the documented JSON error (details in the log only)."""
    logger.error("approvals API: %s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(_ApiError(500, "internal_error", "the request could not be processed"))


class _ApprovalsApi:
    def __init__(self, gate: Gate, authenticate: Authenticate) -> None:
        self._gate = gate
        self._authenticate = authenticate

    async def list_approvals(self, request: Request) -> Response:
        who = await self._principal(request)
        state = request.query_params.get("state") or None
        if state is not None and state not in STATES:
            raise _ApiError(400, "invalid_request", f"state must be one of {', '.join(STATES)}")
        limit = _limit(request.query_params.get("limit"))
        approvals = await self._gate.approvals()
        admin = ADMIN_ROLE in who.roles
        rows = await approvals.list(state=state, tenant=None if admin else who.tenant, limit=limit)
        # A tenant-less principal must not read the unfiltered list either.
        visible = [r for r in rows if access.check(who, Action.VIEW_APPROVAL, r)]
        return _json({"approvals": [approval_json(r, self._gate.clock.now()) for r in visible]})

    async def show_approval(self, request: Request) -> Response:
        who = await self._principal(request)
        return _json(approval_json(await self._visible(request, who), self._gate.clock.now()))

    async def approve(self, request: Request) -> Response:
        who = await self._principal(request)
        body = await _body(request)
        note = body.get("note")
        if note is not None and not isinstance(note, str):
            raise _ApiError(400, "invalid_request", "note must be a string")
        record = await self._visible(request, who)
        return await self._decide(record, lambda a: a.approve(record.id, by=who, note=note))

    async def deny(self, request: Request) -> Response:
        who = await self._principal(request)
        body = await _body(request)
        reason = body.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise _ApiError(400, "invalid_request", "reason is required: the requester is told why")
        record = await self._visible(request, who)
        return await self._decide(record, lambda a: a.deny(record.id, by=who, reason=reason))

    # access ---------------------------------------------------------------------
    async def _principal(self, request: Request) -> Principal:
        try:
            return await authenticate_request(self._authenticate, request)
        except Unauthenticated:
            raise _ApiError(401, "unauthenticated", "authentication required") from None

    async def _visible(self, request: Request, who: Principal) -> ApprovalRecord:
        approval_id = request.path_params["approval_id"]
        record = await (await self._gate.approvals()).get(approval_id)
        if record is None or not access.check(who, Action.VIEW_APPROVAL, record):
            raise _ApiError(404, "not_found", f"no approval request {approval_id!r}")
        return record

    async def _decide(
        self,
        record: ApprovalRecord,
        action: Callable[[Approvals], Awaitable[ApprovalRecord]],
    ) -> Response:
        try:
            decided = await action(await self._gate.approvals())
        except ApprovalError as exc:
            status = _STATUS.get(exc.code, 409)
            raise _ApiError(status, exc.code, str(exc)) from None
        return _json(approval_json(decided, self._gate.clock.now()))


_STATUS = {"unknown": 404, "invalid": 400, "other_tenant": 403, "not_an_approver": 403}


def _limit(raw: str | None) -> int:
    if raw is None:
        return 100
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise _ApiError(400, "invalid_request", f"limit must be a whole number 1-{MAX_LIMIT}")
    return limit


async def _body(request: Request) -> dict[str, Any]:
    """The POST body: a JSON object, at most :data:`MAX_BODY_BYTES`."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise _ApiError(
            415, "unsupported_media_type", "send a JSON object with Content-Type application/json"
        )
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise _ApiError(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _ApiError(400, "invalid_request", "the body is not valid JSON") from None
    except RecursionError:
        # Small but deeply nested ("[[[[..."): refused like malformed JSON.
        raise _ApiError(400, "invalid_request", "the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise _ApiError(400, "invalid_request", "the body must be a JSON object")
    return body
