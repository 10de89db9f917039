"""Who is asking: the seam between an HTTP request and a :class:`~callgate.Principal`.

The approvals API takes any ``authenticate`` function (a session cookie, an
OAuth token verifier, a reverse proxy's header); :func:`bearer_tokens` is the
simplest one, for static tokens.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from starlette.requests import Request

from callgate.contract import Principal

Authenticate = Callable[[Request], Principal | None]
"""Maps a request to its authenticated principal, or None when it has none."""


def bearer_tokens(tokens: Mapping[str, Principal]) -> Authenticate:
    """Authenticate ``Authorization: Bearer <token>`` against fixed tokens.

    Every known token is compared in constant time (``hmac.compare_digest``),
    so neither the match nor its position leaks through timing.

    Args:
        tokens: token -> the principal it stands for. Empty tokens are ignored.

    Returns:
        A function for ``approvals_app(authenticate=...)``.
    """
    known = [(token.encode(), principal) for token, principal in tokens.items() if token]

    def authenticate(request: Request) -> Principal | None:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return None
        offered = credentials.strip().encode()
        found: Principal | None = None
        for token, principal in known:
            if hmac.compare_digest(offered, token) and found is None:
                found = principal
        return found

    return authenticate
