"""Where the keys that verify tokens come from: the issuer's JWKS, fetched and
kept, or one configured public key.

The JWKS is fetched when the first token arrives, used for ``jwks_ttl`` seconds,
then fetched again. A token naming a key (``kid``) the set does not hold asks
for a fetch too, so keys the issuer rotates in are found at once. Fetches are
bounded so that a stream of made-up ``kid`` values cannot turn the gateway
against its issuer:

- at most one fetch per ``jwks_min_refresh`` seconds, whatever asks for it;
- one fetch in flight at a time: verifications that need it wait for it and
  then use its result, they do not fetch again;
- a fetch that fails (the issuer down, an answer that is not a JWKS, larger
  than :data:`MAX_JWKS_BYTES`, not JSON) leaves the keys in place and is
  logged; with no keys yet, tokens are refused as "keys unavailable".

A key the issuer withdraws stops verifying at the next fetch (within
``jwks_ttl``). Verification results are not cached: every token is verified.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

import anyio
import httpx2

from callgate.auth._keys import VerifyKey, keys_from_jwks
from callgate.auth.errors import InvalidToken
from callgate.clock import Clock

__all__ = ["FETCH_TIMEOUT", "MAX_JWKS_BYTES", "JwksKeys", "StaticKey"]

logger = logging.getLogger("callgate.auth")

MAX_JWKS_BYTES = 1024 * 1024
"""The largest JWKS answer read (real ones are a few kilobytes)."""
FETCH_TIMEOUT = 5.0
"""Seconds one fetch may take: verifications that need it wait this long at most."""


class StaticKey:
    """One configured public key: it verifies every token its type fits."""

    def __init__(self, key: VerifyKey) -> None:
        self._key = key

    async def find(self, kid: str | None, alg: str) -> VerifyKey:
        """The key for a token (its ``kid`` does not matter).

        Raises:
            InvalidToken: the token's algorithm does not fit the key.
        """
        if not self._key.fits(alg):
            raise InvalidToken("unknown_key", f"the token's algorithm {alg} does not fit the key")
        return self._key

    async def aclose(self) -> None:
        """Nothing to release."""


class JwksKeys:
    """The issuer's keys, from its JWKS URL (see the module's docs).

    Args:
        url: the JWKS URL.
        http: the client to fetch with (None: one of its own, closed by :meth:`aclose`).
        ttl: seconds fetched keys are used before the next fetch.
        min_refresh: seconds between two fetches at least.
        clock: what time it is (fetch times are measured on it).
    """

    def __init__(
        self,
        url: str,
        *,
        http: httpx2.AsyncClient | None,
        ttl: float,
        min_refresh: float,
        clock: Clock,
    ) -> None:
        self._url = url
        self._own_http = http is None
        self._http = http if http is not None else httpx2.AsyncClient(timeout=FETCH_TIMEOUT)
        self._ttl = timedelta(seconds=ttl)
        self._min_refresh = timedelta(seconds=min_refresh)
        self._clock = clock
        self._by_kid: dict[str, tuple[VerifyKey, ...]] = {}
        self._keys: tuple[VerifyKey, ...] = ()
        self._fetched: datetime | None = None
        """When the keys in place were fetched (None: never)."""
        self._attempted: datetime | None = None
        """When the last fetch, successful or not, ended."""
        self._attempts = 0
        self._lock = anyio.Lock()

    async def find(self, kid: str | None, alg: str) -> VerifyKey:
        """The key for a token naming ``kid`` (None: it names none) and signed with ``alg``.

        Raises:
            InvalidToken: no key fits (``unknown_key``), or no keys could be
                fetched yet (``keys_unavailable``).
        """
        seen = self._attempts
        now = self._clock.now()
        if (self._fetched is None or now - self._fetched >= self._ttl) and self._may_fetch(now):
            await self._refresh(seen)
            seen = self._attempts
        candidates = self._candidates(kid)
        if kid is not None and not candidates and self._may_fetch(self._clock.now()):
            await self._refresh(seen)  # a key the issuer has rotated in since
            candidates = self._candidates(kid)
        if self._fetched is None:
            raise InvalidToken(
                "keys_unavailable", "the issuer's keys could not be fetched; try again later"
            )
        fitting = [key for key in candidates if key.fits(alg)]
        if len(fitting) == 1:
            return fitting[0]
        if kid is None and len(fitting) > 1:
            raise InvalidToken(
                "unknown_key", "the token names no key (kid) and the issuer has several"
            )
        if candidates:
            raise InvalidToken("unknown_key", f"the token's algorithm {alg} does not fit its key")
        raise InvalidToken("unknown_key", "the token is signed with a key the issuer does not list")

    def _candidates(self, kid: str | None) -> tuple[VerifyKey, ...]:
        if kid is None:
            return self._keys
        # A JWK without a kid may verify any token its type fits (RFC 7517 leaves
        # matching to the application): some issuers publish one key and no kid.
        return self._by_kid.get(kid) or tuple(key for key in self._keys if key.kid is None)

    def _may_fetch(self, now: datetime) -> bool:
        return self._attempted is None or now - self._attempted >= self._min_refresh

    async def _refresh(self, seen: int) -> None:
        async with self._lock:
            if self._attempts != seen:
                return  # fetched while this verification waited: use that
            try:
                keys = await self._fetch()
            except ValueError as exc:
                kept = f"keeping the {len(self._keys)} keys fetched before"
                logger.warning(
                    "the issuer's JWKS at %s was not updated: %s; %s",
                    self._url,
                    exc,
                    kept
                    if self._fetched is not None
                    else "no token can be verified until it answers",
                )
            else:
                self._keys = keys
                by_kid: dict[str, tuple[VerifyKey, ...]] = {}
                for key in keys:
                    if key.kid is not None:
                        by_kid[key.kid] = (*by_kid.get(key.kid, ()), key)
                self._by_kid = by_kid
                self._fetched = self._clock.now()
            # Counted only once it ends: a fetch cancelled half-way lets the next one try.
            self._attempted = self._clock.now()
            self._attempts += 1

    async def _fetch(self) -> tuple[VerifyKey, ...]:
        """The keys the JWKS URL lists now; a ValueError says why not, for the log."""
        body = bytearray()
        try:
            async with self._http.stream(
                "GET",
                self._url,
                headers={"Accept": "application/json", "Accept-Encoding": "identity"},
                timeout=FETCH_TIMEOUT,
            ) as response:
                if response.status_code != 200:
                    raise ValueError(f"it answered HTTP {response.status_code}")
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > MAX_JWKS_BYTES:
                    raise ValueError(
                        f"its answer is too large ({length} bytes, at most {MAX_JWKS_BYTES})"
                    )
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise ValueError(f"its answer is too large (over {MAX_JWKS_BYTES} bytes)")
        except httpx2.HTTPError as exc:
            raise ValueError(f"it could not be fetched ({type(exc).__name__})") from None
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise ValueError("its answer is not JSON") from None
        return keys_from_jwks(document, source=self._url)

    async def aclose(self) -> None:
        """Close the HTTP client if it is this cache's own."""
        if self._own_http:
            await self._http.aclose()
