"""A bearer token in, the principal out, or a refusal that says why without
quoting the token: against a real issuer's keys and JWKS."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt
import pytest

from callgate import Gate, Principal
from callgate.auth import AuthSettings, ClaimNames, InvalidToken, TokenVerifier
from callgate.config import PrincipalDefaults, local_principal

from .conftest import MakeVerifier
from .issuer import AUDIENCE, ISSUER, Issuer, Key, b64url, forged, public_pem

pytestmark = pytest.mark.anyio


def now() -> int:
    """The time now, read when a token is made (a module-level constant would age
    while the suite runs, and a token within the leeway would fall out of it)."""
    return int(time.time())


async def refusal(verifier: TokenVerifier, token: str) -> InvalidToken:
    with pytest.raises(InvalidToken) as info:
        await verifier.verify(token)
    error = info.value
    # Whatever was wrong, the answer never quotes the token or any part of it.
    for part in [token, *token.split(".")]:
        if len(part) >= 8:
            assert part not in error.description
            assert part not in str(error)
    return error


# Accepted --------------------------------------------------------------------------
async def test_a_good_rs256_token_is_the_principal_it_names(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    principal = await verifier.verify(issuer.token("rsa-1", roles=["oncall", "Approver"]))

    assert principal == Principal(
        "alice@acme.example",
        "acme",
        scopes=["deploy:read", "deploy:rollback"],
        roles=["oncall", "approver"],
        attributes={"token_issuer": ISSUER},
    )


async def test_a_good_es256_token_is_accepted_too(issuer: Issuer, verifier: TokenVerifier) -> None:
    principal = await verifier.verify(issuer.token("ec-1", sub="bob@acme.example"))
    assert principal.user == "bob@acme.example"
    assert principal.tenant == "acme"


async def test_the_tenant_comes_from_org_id_when_there_is_no_tenant_claim(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    principal = await verifier.verify(issuer.token(tenant=None, org_id="Globex"))
    assert principal.tenant == "globex"
    assert (await verifier.verify(issuer.token(tenant=None))).tenant is None
    # The first present wins.
    assert (await verifier.verify(issuer.token(tenant="acme", org_id="globex"))).tenant == "acme"


async def test_scopes_come_from_a_scope_string_or_an_scp_list(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    spaced = await verifier.verify(issuer.token(scope="  deploy:read   Deploy:Write "))
    listed = await verifier.verify(issuer.token(scope=None, scp=["deploy:read", "deploy:write"]))
    none = await verifier.verify(issuer.token(scope=None))

    assert spaced.scopes == {"deploy:read", "Deploy:Write"}  # scopes keep their case
    assert listed.scopes == {"deploy:read", "deploy:write"}
    assert none.scopes == frozenset()


async def test_roles_may_be_a_list_or_a_space_separated_string(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    assert (await verifier.verify(issuer.token(roles="approver oncall"))).roles == {
        "approver",
        "oncall",
    }
    assert (await verifier.verify(issuer.token(roles=["Approver"]))).roles == {"approver"}


async def test_a_tokens_identity_is_normalized_like_a_configured_one(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    from_token = await verifier.verify(issuer.token(sub=" Alice@ACME.example", tenant="ACME"))
    from_config = local_principal(
        Gate(store="memory://"), PrincipalDefaults(user="alice@acme.example", tenant="acme")
    )
    assert (from_token.user, from_token.tenant) == (from_config.user, from_config.tenant)


async def test_claim_names_are_configurable(issuer: Issuer, make_verifier: MakeVerifier) -> None:
    verifier = make_verifier(
        claims=ClaimNames(user="email", tenant=("org",), scopes=("permissions",), roles="groups")
    )
    token = issuer.token(
        sub="opaque-id-17",
        email="carol@acme.example",
        org="acme",
        permissions=["deploy:read"],
        groups=["approver"],
    )
    principal = await verifier.verify(token)
    assert (principal.user, principal.tenant) == ("carol@acme.example", "acme")
    assert principal.scopes == {"deploy:read"}
    assert principal.roles == {"approver"}


async def test_a_configured_pem_public_key_verifies_without_any_jwks(issuer: Issuer) -> None:
    key = issuer.key("rsa-1")
    verifier = TokenVerifier(
        AuthSettings(
            issuer=ISSUER,
            audience=AUDIENCE,
            public_key=public_pem(key.private),
            algorithms=("RS256",),
        )
    )
    assert (await verifier.verify(issuer.token("any-kid", key=key))).user == "alice@acme.example"
    assert (await refusal(verifier, issuer.token("ec-1"))).code == "algorithm_refused"
    await verifier.aclose()


# Time ------------------------------------------------------------------------------
async def test_an_expired_token_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    error = await refusal(verifier, issuer.token(iat=now() - 3600, exp=now() - 600))
    assert (error.code, error.description) == ("expired", "the token has expired")


async def test_a_token_that_expired_within_the_leeway_is_accepted(
    issuer: Issuer, make_verifier: MakeVerifier
) -> None:
    token = issuer.token(iat=now() - 3600, exp=now() - 30)
    assert (await make_verifier(leeway=60).verify(token)).user == "alice@acme.example"
    assert (await refusal(make_verifier(leeway=0), token)).code == "expired"


async def test_a_token_without_exp_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    error = await refusal(verifier, issuer.token(exp=None))
    assert (error.code, error.description) == ("missing_claim", "the token has no exp claim")


async def test_a_token_not_valid_yet_is_refused_and_one_within_the_leeway_accepted(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    error = await refusal(verifier, issuer.token(nbf=now() + 600))
    assert error.code == "not_yet_valid"
    assert "nbf" in error.description
    assert (await verifier.verify(issuer.token(nbf=now() + 30))).user == "alice@acme.example"


async def test_a_token_issued_in_the_future_beyond_the_leeway_is_refused(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    error = await refusal(verifier, issuer.token(iat=now() + 600, exp=now() + 900))
    assert error.code == "not_yet_valid"
    assert "iat" in error.description
    assert (await verifier.verify(issuer.token(iat=now() + 30))).user == "alice@acme.example"


# Issuer and audience -----------------------------------------------------------------
async def test_a_validly_signed_token_for_another_resource_is_refused(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    other = "https://billing.acme.example/mcp"
    error = await refusal(verifier, issuer.token(aud=other))
    assert error.code == "wrong_audience"
    assert AUDIENCE in error.description  # which audience to ask for
    assert other not in error.description
    no_audience = await refusal(verifier, issuer.token(aud=None))
    assert no_audience.code == "wrong_audience"
    near = await refusal(verifier, issuer.token(aud=AUDIENCE + "/"))
    assert near.code == "wrong_audience"


async def test_an_audience_list_holding_this_gateway_is_accepted(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    token = issuer.token(aud=["https://billing.acme.example/mcp", AUDIENCE])
    assert (await verifier.verify(token)).user == "alice@acme.example"


async def test_a_token_from_another_issuer_is_refused(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    error = await refusal(verifier, issuer.token(iss="https://login.evil.example"))
    assert error.code == "wrong_issuer"
    assert "evil" not in error.description
    assert (await refusal(verifier, issuer.token(iss=None))).code == "wrong_issuer"


# Keys and algorithms ----------------------------------------------------------------------
@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
async def test_an_unsigned_token_is_refused(
    alg: str, issuer: Issuer, verifier: TokenVerifier
) -> None:
    token = forged({"alg": alg, "kid": "rsa-1", "typ": "JWT"}, issuer.claims())
    error = await refusal(verifier, token)
    assert error.code == "algorithm_refused"
    assert "RS256, ES256" in error.description


async def test_hs256_signed_with_the_rsa_public_key_is_refused(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    """The algorithm confusion attack: the public key, which anyone can read,
    used as an HMAC secret."""
    key = issuer.key("rsa-1")
    secrets = [public_pem(key.private).encode(), json.dumps(key.jwk()).encode()]
    for secret in secrets:
        token = forged({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, issuer.claims(), secret)
        error = await refusal(verifier, token)
        assert error.code == "algorithm_refused"
        assert "(HS256)" in error.description
    # The same with the one configured PEM key, the classic setting of the attack.
    pem_verifier = TokenVerifier(
        AuthSettings(issuer=ISSUER, audience=AUDIENCE, public_key=public_pem(key.private))
    )
    token = forged({"alg": "HS256", "typ": "JWT"}, issuer.claims(), secrets[0])
    assert (await refusal(pem_verifier, token)).code == "algorithm_refused"


async def test_a_token_cannot_choose_how_a_key_is_used(
    issuer: Issuer, make_verifier: MakeVerifier
) -> None:
    verifier = make_verifier(algorithms=("RS256", "RS384", "ES256"))
    # An ES256 signature presented as from the RSA key, and the RSA key's JWK pins RS256.
    ec_as_rsa = issuer.token("rsa-1", key=issuer.key("ec-1"))
    rsa_key = issuer.key("rsa-1")
    rs384 = jwt.encode(
        issuer.claims(), rsa_key.private, algorithm="RS384", headers={"kid": "rsa-1"}
    )
    for token in (ec_as_rsa, rs384):
        error = await refusal(verifier, token)
        assert error.code == "unknown_key"
        assert "does not fit" in error.description


async def test_a_tampered_payload_no_longer_matches_its_signature(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    for kid in ("rsa-1", "ec-1"):
        header, _, signature = issuer.token(kid).split(".")
        payload = b64url(json.dumps(issuer.claims(sub="mallory@acme.example")).encode())
        error = await refusal(verifier, f"{header}.{payload}.{signature}")
        assert (error.code, error.description) == (
            "bad_signature",
            "the token's signature does not verify",
        )


async def test_a_token_signed_by_a_key_the_issuer_never_published_is_refused(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    stranger = Key.rsa("rsa-1")  # same kid, another key
    error = await refusal(verifier, issuer.token("rsa-1", key=stranger))
    assert error.code == "bad_signature"


# Claims -----------------------------------------------------------------------------------
async def test_a_token_without_a_user_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    error = await refusal(verifier, issuer.token(sub=None))
    assert error.code == "missing_claim"
    assert "sub" in error.description


@pytest.mark.parametrize(
    ("claims", "named"),
    [
        ({"sub": "alice\u202e@acme.example"}, "sub"),
        ({"sub": "   "}, "sub"),
        ({"tenant": "acme\x00"}, "tenant"),
        ({"tenant": 17}, "tenant"),
        ({"scope": None, "scp": ["deploy:read", 3]}, "scp"),
        ({"roles": {"admin": True}}, "roles"),
        ({"roles": ["x" * 300]}, "roles"),
    ],
)
async def test_a_claim_that_is_no_identity_is_refused_without_quoting_it(
    claims: dict[str, Any], named: str, issuer: Issuer, verifier: TokenVerifier
) -> None:
    error = await refusal(verifier, issuer.token(**claims))
    assert error.code == "bad_claim"
    assert f"the token's {named} claim" in error.description
    assert "acme\x00" not in error.description and "x" * 40 not in error.description


@pytest.mark.parametrize(
    "token",
    [
        "",
        "abc.def",
        "!!!.@@@.###",
        "a.b.c.d",
        "eyJhbGciOiJSUzI1NiJ9.e30",
        "x" * 20_000,
        base64.urlsafe_b64encode(b'{"alg": "RS256"').decode() + ".e30.c2ln",
        base64.urlsafe_b64encode(b"[" * 5000).decode() + ".e30.c2ln",
        base64.urlsafe_b64encode(b'["RS256"]').decode() + ".e30.c2ln",
    ],
)
async def test_malformed_tokens_are_refused(token: str, verifier: TokenVerifier) -> None:
    error = await refusal(verifier, token)
    assert error.code == "malformed"


async def test_a_description_never_quotes_a_secret_looking_claim(
    issuer: Issuer, verifier: TokenVerifier
) -> None:
    secret = "sk-live-4f9a8b7c6d5e"
    for claims in (
        {"aud": secret},
        {"iss": secret},
        {"sub": secret + "\u200b"},
        {"tenant": [secret]},
        {"exp": now() - 600, "jti": secret},
    ):
        error = await refusal(verifier, issuer.token(**claims))
        assert secret not in error.description
