"""The gateway's own OAuth credential for an HTTP upstream: the client credentials
grant (RFC 6749 section 4.4) against a configured token URL.

Why not the SDK's ``ClientCredentialsOAuthProvider``: it discovers the
authorization server from the upstream's protected resource metadata, and many
internal MCP servers publish none; the operator knows the token URL. The grant
itself is one form POST; the token is cached until shortly before it expires
and fetched again after a ``401``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

import httpx2

from callgate.errors import RuntimeFailure
from callgate.gateway.settings import Auth

__all__ = ["ClientCredentials", "TokenError"]

EARLY = 30.0
"""Seconds before its expiry a token is replaced."""


class TokenError(RuntimeFailure):
    """The token URL did not grant a token (the message never holds the secret)."""


class ClientCredentials(httpx2.Auth):
    """Adds ``Authorization: Bearer`` with a token from the client credentials grant."""

    def __init__(self, settings: Auth, client_secret: str) -> None:
        assert settings.token_url is not None and settings.client_id is not None
        self._url = settings.token_url
        self._client_id = settings.client_id
        self._secret = client_secret
        self._scope = settings.scope
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def _fetch(self) -> str:
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        async with httpx2.AsyncClient(timeout=10.0) as http:
            response = await http.post(
                self._url, data=form, auth=httpx2.BasicAuth(self._client_id, self._secret)
            )
        if response.status_code != 200:
            raise TokenError(f"the token URL answered {response.status_code}")
        try:
            body = response.json()
            token = body["access_token"]
        except (ValueError, KeyError, TypeError):
            raise TokenError("the token URL's answer holds no access_token") from None
        if not isinstance(token, str) or not token:
            raise TokenError("the token URL's answer holds no access_token")
        expires_in = body.get("expires_in")
        lifetime = float(expires_in) if isinstance(expires_in, (int, float)) else 3600.0
        self._expires = time.monotonic() + max(0.0, lifetime - EARLY)
        return token

    async def _current(self, *, renew: bool = False) -> str:
        async with self._lock:
            if renew or self._token is None or time.monotonic() >= self._expires:
                self._token = await self._fetch()
            return self._token

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {await self._current()}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {await self._current(renew=True)}"
            yield request
