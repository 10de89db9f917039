"""Who is using the web console: one-time sign-in links, bearer sign-in, and the
session cookie that follows either.

- A **sign-in link** (``/console/login?token=...``) is minted by whoever can
  reach the store (``callgate console``, ``callgate console link``), for a
  principal they name, exactly as ``callgate approvals --principal`` trusts its
  operator. It works once, within :data:`LINK_TTL`, and only when its token is
  posted back (a link previewer fetching the URL does not use it up).
- With an ``[auth]`` table, a person signs in with an access token of the same
  issuer as the MCP endpoint: the console's own page posts it once, the same
  :data:`~callgate.console.auth.Authenticate` function checks it, and the
  principal it yields is the session's. A request carrying
  ``Authorization: Bearer`` is also taken as is (scripts; no cookie, no CSRF).
- The **session** is a random secret in a cookie (``HttpOnly``,
  ``SameSite=Strict``, ``Secure`` off loopback, path ``/console``); the store
  keeps only its SHA-256, the principal and the session's CSRF token, so
  replicas on one store share sessions and a restart keeps them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.requests import Request

from callgate.console.auth import Authenticate, Unauthenticated, authenticate_request
from callgate.contract import Principal
from callgate.contract.identity import InvalidIdentity
from callgate.runtime.gate import Gate
from callgate.store.console_records import ConsoleSession, ReadRecords

__all__ = ["COOKIE", "LINK_TTL", "SESSION_TTL", "ConsoleSessions", "SignedIn"]

COOKIE = "callgate_console"
LINK_TTL = timedelta(minutes=15)
"""How long a sign-in link can be used (once)."""
SESSION_TTL = timedelta(hours=12)
"""How long a console session lasts; then the person signs in again."""


@dataclass(frozen=True)
class SignedIn:
    """The person behind a request: their principal, and the CSRF token their
    forms must carry (None when the request authenticated itself with a bearer
    token, which a browser never sends on its own)."""

    principal: Principal
    csrf: str | None
    session_id: str | None = None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def principal_json(principal: Principal) -> dict[str, Any]:
    """What a session keeps of its principal."""
    return {
        "user": principal.user,
        "tenant": principal.tenant,
        "scopes": sorted(principal.scopes),
        "roles": sorted(principal.roles),
    }


def _principal(data: dict[str, Any]) -> Principal | None:
    try:
        return Principal(
            data["user"],
            data.get("tenant"),
            scopes=data.get("scopes", ()),
            roles=data.get("roles", ()),
        )
    except (KeyError, TypeError, InvalidIdentity):
        return None  # a row this version cannot read signs nobody in


class ConsoleSessions:
    """Sign-in links, sessions and CSRF tokens over ``gate``'s store."""

    def __init__(self, gate: Gate, *, authenticate: Authenticate | None = None) -> None:
        self._gate = gate
        self.authenticate = authenticate

    async def mint_link(self, principal: Principal, *, ttl: timedelta = LINK_TTL) -> str:
        """A new one-time sign-in token for ``principal`` (put it in the link)."""
        token = secrets.token_urlsafe(32)
        now = self._gate.clock.now()
        await (await self._store()).create_console_session(
            ConsoleSession(
                id=_digest(token),
                kind="login",
                principal=principal_json(principal),
                csrf="",
                created_at=now,
                expires_at=now + ttl,
                detail={"via": "link"},
            )
        )
        return token

    async def use_link(self, token: str) -> tuple[str, SignedIn] | None:
        """Sign in with a link's token: the new session's cookie value and who it
        is, or None when the token is unknown, used or expired."""
        now = self._gate.clock.now()
        login = await (await self._store()).take_console_login(_digest(token), at=now)
        if login is None:
            return None
        principal = _principal(login.principal)
        return None if principal is None else await self._start(principal, "link")

    async def use_bearer(self, token: str, request: Request) -> tuple[str, SignedIn]:
        """Sign in with an access token, checked exactly as the MCP endpoint checks it.

        Raises:
            Unauthenticated: the token is refused, or no ``[auth]`` is configured.
        """
        if self.authenticate is None:
            raise Unauthenticated("this console takes sign-in links only")
        headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"authorization"] + [
            (b"authorization", f"Bearer {token}".encode())
        ]
        probe = Request({**request.scope, "headers": headers})
        principal = await authenticate_request(self.authenticate, probe)
        return await self._start(principal, "bearer")

    async def current(self, request: Request) -> SignedIn | None:
        """Who sent ``request``: its bearer token (with ``[auth]``), else its
        session cookie; None when neither holds."""
        if self.authenticate is not None and "authorization" in request.headers:
            try:
                principal = await authenticate_request(self.authenticate, request)
            except Unauthenticated:
                return None
            return SignedIn(principal, None)
        cookie = request.cookies.get(COOKIE)
        if not cookie:
            return None
        session_id = _digest(cookie)
        now = self._gate.clock.now()
        record = await (await self._store()).get_console_session(session_id, at=now)
        if record is None:
            return None
        kept = _principal(record.principal)
        return None if kept is None else SignedIn(kept, record.csrf, session_id)

    async def end(self, signed_in: SignedIn) -> None:
        """Sign out: the session is deleted from the store."""
        if signed_in.session_id is not None:
            await (await self._store()).delete_console_session(signed_in.session_id)

    @staticmethod
    def csrf_ok(signed_in: SignedIn, offered: str | None) -> bool:
        """Whether a form's CSRF token is the session's (always, for bearer requests)."""
        if signed_in.csrf is None:
            return True
        return offered is not None and hmac.compare_digest(
            offered.encode(), signed_in.csrf.encode()
        )

    async def _start(self, principal: Principal, via: str) -> tuple[str, SignedIn]:
        secret = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        now = self._gate.clock.now()
        session_id = _digest(secret)
        await (await self._store()).create_console_session(
            ConsoleSession(
                id=session_id,
                kind="session",
                principal=principal_json(principal),
                csrf=csrf,
                created_at=now,
                expires_at=now + SESSION_TTL,
                detail={"via": via},
            )
        )
        return secret, SignedIn(principal, csrf, session_id)

    async def _store(self) -> ReadRecords:
        return await self._gate.records()
