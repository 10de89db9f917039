"""The issuer's keys: fetched once and kept, fetched again for a key rotated in
(one fetch for a burst, at most one per jwks_min_refresh), kept when the issuer
fails, dropped when the issuer withdraws them."""

from __future__ import annotations

import json
import warnings

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from callgate.auth import AuthSettings, InvalidToken, TokenVerifier
from callgate.auth._jwks import MAX_JWKS_BYTES
from callgate.auth._keys import MAX_KEYS
from callgate.clock import ManualClock

from .conftest import MakeVerifier
from .issuer import AUDIENCE, ISSUER, Issuer, Key, free_port, serving

pytestmark = pytest.mark.anyio


async def code_of(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as info:
        await verifier.verify(token)
    return info.value.code


async def test_the_jwks_is_fetched_once_for_many_tokens(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    for _ in range(20):
        await verifier.verify(issuer.token("rsa-1"))
    await verifier.verify(issuer.token("ec-1"))
    assert issuer.hits == 1


async def test_a_key_the_issuer_rotates_in_is_fetched_once_and_accepted(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    await verifier.verify(issuer.token("rsa-1"))
    issuer.keys.append(Key.rsa("rsa-2"))
    clock.advance(seconds=31)

    assert (await verifier.verify(issuer.token("rsa-2"))).user == "alice@acme.example"
    assert issuer.hits == 2
    await verifier.verify(issuer.token("rsa-2"))
    await verifier.verify(issuer.token("rsa-1"))
    assert issuer.hits == 2


async def test_a_burst_of_tokens_with_a_new_key_makes_one_fetch(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    await verifier.verify(issuer.token("rsa-1"))
    issuer.keys.append(Key.ec("ec-2"))
    clock.advance(seconds=31)
    token = issuer.token("ec-2")
    users: list[str] = []

    async def one() -> None:
        users.append((await verifier.verify(token)).user)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(one)

    assert users == ["alice@acme.example"] * 50
    assert issuer.hits == 2


async def test_a_burst_of_tokens_with_an_unknown_key_makes_at_most_one_fetch(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    await verifier.verify(issuer.token("rsa-1"))
    clock.advance(seconds=31)
    stranger = Key.rsa("made-up")
    codes: list[str] = []

    async def one(n: int) -> None:
        codes.append(await code_of(verifier, issuer.token(f"made-up-{n}", key=stranger)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(one, n)

    assert codes == ["unknown_key"] * 50
    assert issuer.hits == 2


async def test_an_unknown_key_within_jwks_min_refresh_is_refused_without_a_fetch(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    await verifier.verify(issuer.token("rsa-1"))
    clock.advance(seconds=31)
    assert await code_of(verifier, issuer.token("nobody", key=Key.rsa("nobody"))) == "unknown_key"
    assert issuer.hits == 2

    issuer.keys.append(Key.rsa("rsa-2"))
    clock.advance(seconds=10)
    assert await code_of(verifier, issuer.token("rsa-2")) == "unknown_key"
    assert issuer.hits == 2  # 10 s after the last fetch: not asked again

    clock.advance(seconds=21)
    assert (await verifier.verify(issuer.token("rsa-2"))).user == "alice@acme.example"
    assert issuer.hits == 3


async def test_a_key_the_issuer_withdraws_stops_verifying_at_the_next_fetch(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    token = issuer.token("rsa-1")
    await verifier.verify(token)
    issuer.keys = [key for key in issuer.keys if key.kid != "rsa-1"]

    clock.advance(seconds=299)
    await verifier.verify(token)  # the JWKS is trusted for jwks_ttl (300 s)
    assert issuer.hits == 1
    clock.advance(seconds=2)
    assert await code_of(verifier, token) == "unknown_key"
    assert issuer.hits == 2


async def test_an_issuer_down_at_start_is_a_clear_refusal_then_works_once_up(
    issuer: Issuer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/.well-known/jwks.json"
    verifier = TokenVerifier(
        AuthSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url), clock=clock
    )
    token = issuer.token("rsa-1")

    with pytest.raises(InvalidToken) as info:
        await verifier.verify(token)
    assert info.value.code == "keys_unavailable"
    assert info.value.description == "the issuer's keys could not be fetched; try again later"
    [line] = [r.getMessage() for r in caplog.records if r.name == "callgate.auth"]
    assert url in line and "ConnectError" in line
    assert "no token can be verified until it answers" in line

    with serving(issuer, port):
        assert await code_of(verifier, token) == "keys_unavailable"
        assert issuer.hits == 0  # within jwks_min_refresh of the failed fetch
        clock.advance(seconds=30)
        assert (await verifier.verify(token)).user == "alice@acme.example"
        assert issuer.hits == 1
    await verifier.aclose()


def _too_many_keys() -> bytes:
    key = Key.ec("x").jwk()
    return json.dumps({"keys": [{**key, "kid": str(n)} for n in range(MAX_KEYS + 1)]}).encode()


BROKEN = {
    "an HTTP error": (503, b'{"error": "down"}', True, "it answered HTTP 503"),
    "not JSON": (200, b"<html>maintenance</html>", True, "its answer is not JSON"),
    "no keys list": (200, b'{"keys": "none"}', True, "it is not a JWKS"),
    "a JSON list": (200, b"[1, 2]", True, "it is not a JWKS"),
    "too large": (200, b" " * (MAX_JWKS_BYTES + 1), True, "its answer is too large"),
    "too large, no length": (200, b" " * (MAX_JWKS_BYTES + 1), False, "its answer is too large"),
    "too many keys": (200, _too_many_keys(), True, f"it holds {MAX_KEYS + 1} keys"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_a_broken_jwks_at_start_refuses_tokens_and_says_why_in_the_log(
    case: str, issuer: Issuer, verifier: TokenVerifier, caplog: pytest.LogCaptureFixture
) -> None:
    issuer.status, issuer.body, issuer.send_length, reason = BROKEN[case]

    assert await code_of(verifier, issuer.token("rsa-1")) == "keys_unavailable"
    [line] = [r.getMessage() for r in caplog.records if r.name == "callgate.auth"]
    assert reason in line


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_a_broken_jwks_later_leaves_the_keys_in_place(
    case: str,
    issuer: Issuer,
    verifier: TokenVerifier,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = issuer.token("ec-1")
    await verifier.verify(token)
    issuer.status, issuer.body, issuer.send_length, reason = BROKEN[case]
    clock.advance(seconds=301)

    assert (await verifier.verify(token)).user == "alice@acme.example"
    assert issuer.hits == 2
    [line] = [r.getMessage() for r in caplog.records if r.name == "callgate.auth"]
    assert reason in line and "keeping the 2 keys fetched before" in line


async def test_keys_that_cannot_verify_are_left_out_and_the_rest_used(
    issuer: Issuer, verifier: TokenVerifier, caplog: pytest.LogCaptureFixture
) -> None:
    good = Key.rsa("good")
    short = Key("short", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=1024))
    algorithm = jwt.get_algorithm_by_name("RS256")
    private_jwk = algorithm.to_jwk(good.private, as_dict=True)
    jwks = [
        {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},
        {**good.jwk(), "kid": "enc", "use": "enc"},
        {**private_jwk, "kid": "private"},
        short.jwk(),
        {**good.jwk(), "alg": "ES256", "kid": "mislabelled"},
        "not a key",
        good.jwk(),
    ]
    issuer.body = json.dumps({"keys": jwks}).encode()

    assert (await verifier.verify(issuer.token("good", key=good))).user == "alice@acme.example"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns when it signs with a short key
        weak = issuer.token("short", key=short)
    assert await code_of(verifier, weak) == "unknown_key"
    for kid in ("shared", "enc", "private", "mislabelled"):
        assert await code_of(verifier, issuer.token(kid, key=good)) == "unknown_key"
    left_out = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(left_out) == 6
    assert not any("c2VjcmV0" in line or private_jwk["d"][:20] in line for line in left_out)


async def test_a_token_naming_no_key_is_verified_with_the_one_that_fits(
    issuer: Issuer, verifier: TokenVerifier, clock: ManualClock
) -> None:
    key = issuer.key("rsa-1")
    unnamed = jwt.encode(issuer.claims(), key.private, algorithm="RS256")
    assert (await verifier.verify(unnamed)).user == "alice@acme.example"

    issuer.keys.append(Key.rsa("rsa-2"))
    clock.advance(seconds=301)
    with pytest.raises(InvalidToken, match="names no key"):
        await verifier.verify(unnamed)


async def test_a_given_http_client_is_used_and_left_open(issuer: Issuer, jwks_url: str) -> None:
    async with httpx2.AsyncClient() as http:
        settings = AuthSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
        verifier = TokenVerifier(settings, http=http)
        await verifier.verify(issuer.token("rsa-1"))
        await verifier.aclose()
        assert (await http.get(jwks_url)).status_code == 200
    assert issuer.hits == 2


async def test_the_jwks_fetch_is_not_retried_on_every_token_while_the_issuer_fails(
    issuer: Issuer, make_verifier: MakeVerifier, clock: ManualClock
) -> None:
    verifier = make_verifier(jwks_ttl=60, jwks_min_refresh=30)
    issuer.status = 500
    for _ in range(10):
        assert await code_of(verifier, issuer.token("rsa-1")) == "keys_unavailable"
    assert issuer.hits == 1
    clock.advance(seconds=30)
    issuer.status = 200
    assert (await verifier.verify(issuer.token("rsa-1"))).user == "alice@acme.example"
    assert issuer.hits == 2


async def test_a_jwks_key_without_a_kid_verifies_tokens_whatever_kid_they_name(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    key = issuer.key("ec-1")
    jwk = key.jwk()
    del jwk["kid"]
    issuer.body = json.dumps({"keys": [jwk]}).encode()

    assert (await verifier.verify(issuer.token("any", key=key))).user == "alice@acme.example"
    assert await code_of(verifier, issuer.token("any", key=Key.ec("any"))) == "bad_signature"
    assert issuer.hits == 1
