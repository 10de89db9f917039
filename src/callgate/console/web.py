"""The web console: server-rendered pages over the gate's store.

Served by ``callgate serve`` at ``/console`` and alone by ``callgate console``.
Every page reads through the store API the CLI uses (``Store.search_audit``,
``list_approvals``, ...) and every decision runs :class:`~callgate.runtime.approvals.Approvals`,
the code of ``callgate approvals approve``. Who sees what is
:mod:`callgate.access`'s decision: approvals by :func:`~callgate.access.check`,
the audit, runs and tasks by :func:`~callgate.access.record_scope`.

Security: sessions as :mod:`callgate.console.sessions` describes; every POST
must carry the session's CSRF token and, when the browser sends one, an
``Origin`` of this very host; pages are ``no-store`` with a strict Content
Security Policy (scripts and styles only from ``/console/static``), no framing
and referrers only within the console.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from callgate.console import views
from callgate.console.auth import Authenticate, Unauthenticated
from callgate.console.sessions import COOKIE, SESSION_TTL, ConsoleSessions, SignedIn
from callgate.runtime.gate import Gate
from callgate.store.console_records import ReadRecords

__all__ = ["PREFIX", "Console", "ConsoleError", "console_app"]

PREFIX = "/console"
MAX_FORM_BYTES = 16 * 1024
logger = logging.getLogger(__name__)
_HERE = Path(__file__).parent
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on
    # its own form posts. No link leads off the console, so no token leaks either way.
    "Referrer-Policy": "same-origin",
}

Page = Callable[["Console", Request, SignedIn], Awaitable[Response]]


class ConsoleError(Exception):
    """A page cannot be shown or a form not accepted: shown as an error page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Console:
    """What every page handler gets: the gate, the sessions and the templates."""

    def __init__(self, gate: Gate, *, authenticate: Authenticate | None, secure: bool) -> None:
        self.gate = gate
        self.sessions = ConsoleSessions(gate, authenticate=authenticate)
        self.secure = secure
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(
            number=views.number, when=views.when, pretty=views.pretty, origin=views.origin
        )
        self.templates.globals["prefix"] = PREFIX

    def render(
        self,
        template: str,
        request: Request,
        signed_in: SignedIn | None,
        status: int = 200,
        **values: Any,
    ) -> HTMLResponse:
        """The page ``template`` for ``signed_in``, with the security headers."""
        html = self.templates.get_template(template).render(
            request=request,
            me=signed_in.principal if signed_in else None,
            csrf=signed_in.csrf if signed_in else None,
            path=request.url.path,
            **values,
        )
        return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)

    async def records(self) -> ReadRecords:
        """The store's reads every page goes through (the CLI's too)."""
        return await self.gate.records()

    async def form(self, request: Request, signed_in: SignedIn) -> FormData:
        """A POSTed form, checked: same origin, CSRF token of this session.

        Raises:
            ConsoleError: 403 without the session's token or from another origin;
                413 when larger than :data:`MAX_FORM_BYTES`.
        """
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise ConsoleError(403, "The form was sent from another site; nothing was done.")
        if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
            raise ConsoleError(413, "The form is too large; nothing was done.")
        form = await request.form(max_files=0, max_fields=20)
        token = form.get("csrf")
        if not self.sessions.csrf_ok(signed_in, token if isinstance(token, str) else None):
            raise ConsoleError(
                403,
                "The form did not carry this session's security token (it may be from an "
                "old page or another site); reload the page and try again. Nothing was done.",
            )
        return form


def console_app(
    gate: Gate,
    *,
    authenticate: Authenticate | None = None,
    secure: bool = False,
) -> Starlette:
    """The console's ASGI app, answering under :data:`PREFIX`.

    Args:
        gate: whose store is shown and whose approvals are decided. Opened on
            first use, closed by its owner.
        authenticate: the MCP endpoint's ``[auth]`` check, to sign in with an
            access token (and to take ``Authorization: Bearer`` requests); None
            when sign-in is by one-time links only.
        secure: set the ``Secure`` flag on the session cookie (serving beyond
            loopback, behind TLS).

    Returns:
        The app; ``Console`` is at ``app.state.console`` (to mint sign-in links).
    """
    from callgate.console import pages_approvals, pages_audit, pages_more

    console = Console(gate, authenticate=authenticate, secure=secure)

    def page(handler: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            signed_in = await console.sessions.current(request)
            if signed_in is None:
                if request.method == "GET" and not request.url.path.endswith(".jsonl"):
                    target = request.url.path + (
                        f"?{request.url.query}" if request.url.query else ""
                    )
                    return RedirectResponse(
                        f"{PREFIX}/login?{urlencode({'next': target})}",
                        303,
                        headers=_SECURITY_HEADERS,
                    )
                raise ConsoleError(401, "Sign in first; nothing was done.")
            return await handler(console, request, signed_in)

        return endpoint

    routes = [
        Route(PREFIX, lambda r: RedirectResponse(f"{PREFIX}/approvals", 303)),
        Route(f"{PREFIX}/", lambda r: RedirectResponse(f"{PREFIX}/approvals", 303)),
        Route(f"{PREFIX}/login", _login_page(console), methods=["GET"]),
        Route(f"{PREFIX}/login", _login(console), methods=["POST"]),
        Route(f"{PREFIX}/logout", page(_logout), methods=["POST"]),
        *[
            Route(f"{PREFIX}{path}", page(handler), methods=methods)
            for path, handler, methods in (
                *pages_approvals.ROUTES,
                *pages_audit.ROUTES,
                *pages_more.ROUTES,
            )
        ],
        Mount(f"{PREFIX}/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]

    async def error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ConsoleError):
            status, message = exc.status, exc.message
        elif isinstance(exc, HTTPException):
            status = exc.status_code
            message = "There is no such page." if status == 404 else str(exc.detail)
        else:
            logger.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
            status, message = 500, "The page could not be shown; the server's log says why."
        signed_in = None
        try:
            signed_in = await console.sessions.current(request)
        except Exception:  # the store may be what failed
            signed_in = None
        return console.render("error.html", request, signed_in, status, message=message)

    app = Starlette(
        routes=routes,
        exception_handlers={ConsoleError: error, HTTPException: error, Exception: error},
    )
    app.state.console = console
    return app


def _login_page(console: Console) -> Callable[[Request], Awaitable[Response]]:
    async def login_page(request: Request) -> Response:
        token = request.query_params.get("token", "")
        return console.render(
            "login.html",
            request,
            None,
            token=token,
            next=_safe_next(request.query_params.get("next")),
            bearer=console.sessions.authenticate is not None,
            problem=None,
        )

    return login_page


def _login(console: Console) -> Callable[[Request], Awaitable[Response]]:
    async def login(request: Request) -> Response:
        if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
            raise ConsoleError(413, "The form is too large.")
        form = await request.form(max_files=0, max_fields=5)
        link, access = form.get("token"), form.get("access_token")
        wanted = form.get("next")
        target = _safe_next(wanted if isinstance(wanted, str) else None)
        started = None
        problem = "This sign-in link is not valid: it was used already, has expired, or is mistyped. Ask for a new one (callgate console link)."
        if isinstance(access, str) and access.strip():
            try:
                started = await console.sessions.use_bearer(access.strip(), request)
            except Unauthenticated as exc:
                problem = f"The access token was refused: {exc.description}."
        elif isinstance(link, str) and link:
            started = await console.sessions.use_link(link)
        if started is None:
            return console.render(
                "login.html",
                request,
                None,
                401,
                token="",
                next=target,
                bearer=console.sessions.authenticate is not None,
                problem=problem,
            )
        secret, _ = started
        response = RedirectResponse(target, 303, headers=_SECURITY_HEADERS)
        response.set_cookie(
            COOKIE,
            secret,
            max_age=int(SESSION_TTL.total_seconds()),
            path=PREFIX,
            secure=console.secure,
            httponly=True,
            samesite="strict",
        )
        return response

    return login


async def _logout(console: Console, request: Request, signed_in: SignedIn) -> Response:
    await console.form(request, signed_in)
    await console.sessions.end(signed_in)
    response = RedirectResponse(f"{PREFIX}/login", 303, headers=_SECURITY_HEADERS)
    response.delete_cookie(
        COOKIE, path=PREFIX, secure=console.secure, httponly=True, samesite="strict"
    )
    return response


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if target and target.startswith(PREFIX + "/") and not target.startswith("//"):
        return target
    return f"{PREFIX}/approvals"


def with_console(console: ASGIApp, other: ASGIApp) -> ASGIApp:
    """``other``, with ``console`` answering every path under :data:`PREFIX`."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == PREFIX or path.startswith(PREFIX + "/"):
            await console(scope, receive, send)
        else:  # lifespan and everything else
            await other(scope, receive, send)

    return app
