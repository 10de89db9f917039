"""Who is asking: the one seam between an HTTP request and a :class:`~callgate.Principal`.

The approvals API (:func:`~callgate.console.approvals_app`) and the MCP
endpoint (:func:`callgate.mcp.streamable_http_app`) take the same
:data:`Authenticate` function, so roles and tenants cannot disagree between
them: a session cookie, a reverse proxy's header, or an OAuth bearer-token
verifier (:func:`bearer`). :func:`bearer_tokens` is the simplest one, for
static tokens.

An authenticate function reads the request's headers only (never its body) and
either returns the principal, returns None (no or unknown credentials), or
raises :class:`Unauthenticated` to say why the credentials are refused. The
principal it returns is built once, there, from trusted values
(:class:`~callgate.Principal` normalizes the identities); nothing downstream
re-reads the credentials.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request

from callgate.contract import Principal
from callgate.errors import RuntimeFailure

__all__ = [
    "Authenticate",
    "Unauthenticated",
    "authenticate_request",
    "bearer",
    "bearer_token",
    "bearer_tokens",
]

Authenticate = Callable[[Request], Principal | Awaitable[Principal | None] | None]
"""Maps a request to its authenticated principal, or None when it has none; sync
or async. It may raise :class:`Unauthenticated` to say why credentials are refused."""


class Unauthenticated(RuntimeFailure):
    """A request carries no valid credentials: HTTP ``401``.

    Args:
        description: why, for the client (``error_description`` of the
            ``WWW-Authenticate`` challenge): never the credentials themselves.
        error: the RFC 6750 error code: ``invalid_token`` for credentials that
            were offered and refused, None when none were offered (the
            challenge then carries no error, as RFC 6750 asks).
    """

    def __init__(
        self, description: str = "authentication required", *, error: str | None = "invalid_token"
    ) -> None:
        super().__init__(description)
        self.description = description
        self.error = error


async def authenticate_request(authenticate: Authenticate, request: Request) -> Principal:
    """The principal ``authenticate`` finds for ``request``: the one check the
    approvals API and the MCP endpoint both make.

    Raises:
        Unauthenticated: ``authenticate`` found no principal (without an
            ``Authorization`` header: no credentials were offered) or refused them.
    """
    found = authenticate(request)
    if inspect.isawaitable(found):
        found = await found
    if found is None:
        if "authorization" not in request.headers:
            raise Unauthenticated("authentication required", error=None)
        raise Unauthenticated("the credentials are not valid")
    return found


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any
    case), or None when there is none."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    token = credentials.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def bearer(
    verify: Callable[[str], Awaitable[Principal]],
    *,
    refused: type[Exception] | tuple[type[Exception], ...] = (),
) -> Authenticate:
    """Authenticate ``Authorization: Bearer <token>`` with ``verify`` (an OAuth
    access-token verifier, say).

    Args:
        verify: the token -> its principal; raises :class:`Unauthenticated` (or
            one of ``refused``) for a token it does not accept.
        refused: the verifier's own exceptions for a refused token; each becomes
            :class:`Unauthenticated` with its ``description`` attribute (else
            "invalid token") as the description.

    Returns:
        A function for ``streamable_http_app(authenticate=...)`` and
        ``approvals_app(authenticate=...)``.
    """

    async def authenticate(request: Request) -> Principal:
        token = bearer_token(request)
        if token is None:
            if "authorization" in request.headers:
                raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
            raise Unauthenticated("a bearer token is required", error=None)
        try:
            return await verify(token)
        except Unauthenticated:
            raise
        except refused as exc:
            description = getattr(exc, "description", None)
            raise Unauthenticated(
                description if isinstance(description, str) and description else "invalid token"
            ) from None

    return authenticate


def bearer_tokens(tokens: Mapping[str, Principal]) -> Authenticate:
    """Authenticate ``Authorization: Bearer <token>`` against fixed tokens.

    Every known token is compared in constant time (``hmac.compare_digest``),
    so neither the match nor its position leaks through timing.

    Args:
        tokens: token -> the principal it stands for. Empty tokens are ignored.

    Returns:
        A function for ``approvals_app(authenticate=...)`` and
        ``streamable_http_app(authenticate=...)``.
    """
    known = [(token.encode(), principal) for token, principal in tokens.items() if token]

    def authenticate(request: Request) -> Principal | None:
        token = bearer_token(request)
        if token is None:
            return None
        offered = token.encode()
        found: Principal | None = None
        for known_token, principal in known:
            if hmac.compare_digest(offered, known_token) and found is None:
                found = principal
        return found

    return authenticate
