"""The local issuer, its JWKS server and a verifier of its tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from callgate.auth import AuthSettings, TokenVerifier
from callgate.clock import ManualClock

from .issuer import AUDIENCE, ISSUER, Issuer, serving

MakeVerifier = Callable[..., TokenVerifier]


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def jwks_url(issuer: Issuer) -> Iterator[str]:
    with serving(issuer) as url:
        issuer.url = url
        yield url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def make_verifier(
    jwks_url: str, clock: ManualClock, anyio_backend: str
) -> AsyncIterator[MakeVerifier]:
    """``make_verifier(**settings)``: a verifier of the issuer's tokens, closed after the test."""
    made: list[TokenVerifier] = []

    def make(**overrides: Any) -> TokenVerifier:
        settings: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": jwks_url}
        settings.update(overrides)
        verifier = TokenVerifier(AuthSettings(**settings), clock=clock)
        made.append(verifier)
        return verifier

    yield make
    for verifier in made:
        await verifier.aclose()


@pytest.fixture
def verifier(make_verifier: MakeVerifier) -> TokenVerifier:
    return make_verifier()
