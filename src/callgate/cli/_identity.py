"""Who calls ``callgate serve`` over HTTP when the config has an ``[auth]`` table:
the MCP endpoint as an OAuth 2.1 resource server, and the approvals API beside
it, both taking their callers from the same bearer tokens.

- Every request to ``/mcp`` needs a token that :class:`callgate.auth.TokenVerifier`
  accepts (issuer, audience, signature, lifetime); its claims are the caller.
  Without one: ``401`` and ``WWW-Authenticate: Bearer resource_metadata="..."``.
  When the issuer's keys cannot be fetched, the answer is ``503`` (the gateway's
  trouble, not the token's).
- The Protected Resource Metadata (RFC 9728) is served without a token at
  ``/.well-known/oauth-protected-resource`` and at the form suffixed with the
  resource's path.
- The approvals API (``/api/approvals``: :func:`callgate.console.approvals_app`)
  is served by the same process with the same tokens, so the person who
  approves is authenticated exactly as the person who asked, and roles and
  tenants come from one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

    from callgate.auth import AuthSettings, TokenVerifier
    from callgate.console.auth import Authenticate
    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

__all__ = ["APPROVALS_PREFIX", "HttpIdentity", "http_identity"]

APPROVALS_PREFIX = "/api/approvals"


class IssuerUnavailable(RuntimeError):
    """The issuer's keys could not be fetched: the edge answers ``503``."""


@dataclass(frozen=True, kw_only=True)
class HttpIdentity:
    """What ``streamable_http_app`` and the approvals API take for ``[auth]``."""

    settings: AuthSettings
    verifier: TokenVerifier
    authenticate: Authenticate
    challenge: Callable[..., str]
    routes: list[Route]

    def summary(self) -> str:
        """The startup line that replaces the local principal's."""
        claims = self.settings.claims
        return (
            f"callers: bearer tokens of {self.settings.issuer} for {self.settings.audience} "
            f"(user from {claims.user!r}, tenant from {' or '.join(map(repr, claims.tenant))}, "
            f"scopes from {' or '.join(map(repr, claims.scopes))}, roles from {claims.roles!r})"
        )

    def with_approvals(self, gate: Gate, mcp_app: ASGIApp) -> ASGIApp:
        """``mcp_app``, with the approvals API answering under :data:`APPROVALS_PREFIX`
        (its own errors and authentication; the same tokens)."""
        from callgate.console import approvals_app

        approvals = approvals_app(gate, authenticate=self.authenticate)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            path = scope.get("path", "") if scope["type"] == "http" else ""
            if path == APPROVALS_PREFIX or path.startswith(APPROVALS_PREFIX + "/"):
                await approvals(scope, receive, send)
            else:  # lifespan and everything else: the MCP app
                await mcp_app(scope, receive, send)

        return app


def http_identity(settings: AuthSettings, gate: Gate) -> HttpIdentity:
    """The authentication of ``callgate serve`` for ``settings`` (``[auth]``)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from callgate.auth import (
        WELL_KNOWN,
        InvalidToken,
        TokenVerifier,
        metadata_path,
        metadata_url,
        protected_resource_metadata,
        www_authenticate,
    )
    from callgate.console.auth import bearer

    verifier = TokenVerifier(settings)

    async def verify(token: str) -> Principal:
        try:
            return await verifier.verify(token)
        except InvalidToken as exc:
            if exc.code == "keys_unavailable":
                raise IssuerUnavailable(exc.description) from None
            raise

    async def metadata(_request: Request) -> JSONResponse:
        # Made per request: upstreams' tools (and their scopes) arrive after start-up
        # and change with their listings. Public, read by clients in browsers too.
        document = protected_resource_metadata(settings, scopes=gate.required_scopes())
        return JSONResponse(document, headers={"access-control-allow-origin": "*"})

    paths = dict.fromkeys((metadata_path(settings), WELL_KNOWN))
    return HttpIdentity(
        settings=settings,
        verifier=verifier,
        authenticate=bearer(verify, refused=InvalidToken),
        challenge=functools.partial(www_authenticate, metadata_url(settings)),
        routes=[Route(path, metadata, methods=["GET"]) for path in paths],
    )
