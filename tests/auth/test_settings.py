"""``[auth]``: what the file may say, and everything that cannot be right refused
when it is read, with the file and the key named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from callgate.auth import AuthConfigError, AuthSettings, ClaimNames, parse_auth
from callgate.config import ConfigError, load_config

from .issuer import AUDIENCE, ISSUER, public_pem

JWKS = "https://login.acme.example/.well-known/jwks.json"
BASE = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": JWKS}


def refused(raw: dict[str, Any], base_dir: Path | None = None) -> str:
    with pytest.raises(AuthConfigError) as info:
        parse_auth(raw, "gw.toml", base_dir=base_dir)
    message = str(info.value)
    assert message.startswith("gw.toml: auth.")
    return message


def test_the_smallest_table_takes_the_defaults() -> None:
    settings = parse_auth(BASE, "gw.toml")

    assert settings == AuthSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=JWKS)
    assert settings.algorithms == ("RS256", "ES256")
    assert (settings.leeway, settings.jwks_ttl, settings.jwks_min_refresh) == (60.0, 300.0, 30.0)
    assert settings.claims == ClaimNames()
    assert settings.claims.tenant == ("tenant", "org_id")
    assert settings.claims.scopes == ("scope", "scp")
    assert settings.metadata_servers == (ISSUER,)


def test_every_key_is_read() -> None:
    settings = parse_auth(
        {
            **BASE,
            "algorithms": ["ES384", "PS256", "EdDSA"],
            "leeway": 5,
            "jwks_ttl": 600,
            "jwks_min_refresh": 10.5,
            "authorization_servers": ["https://login.acme.example/tenant-a"],
            "resource_name": "Acme tools",
            "claims": {"user": "email", "tenant": "org_id", "scopes": ["scp"], "roles": "groups"},
        },
        "gw.toml",
    )

    assert settings.algorithms == ("ES384", "PS256", "EdDSA")
    assert (settings.leeway, settings.jwks_ttl, settings.jwks_min_refresh) == (5.0, 600.0, 10.5)
    assert settings.metadata_servers == ("https://login.acme.example/tenant-a",)
    assert settings.resource_name == "Acme tools"
    assert settings.claims == ClaimNames(
        user="email", tenant=("org_id",), scopes=("scp",), roles="groups"
    )


def test_a_public_key_file_is_read_relative_to_the_config_file(tmp_path: Path) -> None:
    pem = public_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "issuer.pem").write_text(pem)
    raw = {"issuer": ISSUER, "audience": AUDIENCE, "public_key_file": "keys/issuer.pem"}

    assert parse_auth(raw, "gw.toml", base_dir=tmp_path).public_key == pem
    inline = parse_auth({"issuer": ISSUER, "audience": AUDIENCE, "public_key": pem}, "gw.toml")
    assert inline.public_key == pem
    message = refused({**raw, "public_key_file": "keys/missing.pem"}, tmp_path)
    assert "auth.public_key_file: cannot read" in message and "missing.pem" in message


@pytest.mark.parametrize("alg", ["none", "None"])
def test_an_unsigned_algorithm_is_refused(alg: str) -> None:
    message = refused({**BASE, "algorithms": ["RS256", alg]})
    assert "auth.algorithms: 'none' means an unsigned token" in message


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512", "hs256"])
def test_a_shared_secret_algorithm_is_refused(alg: str) -> None:
    message = refused({**BASE, "algorithms": [alg]})
    assert f"auth.algorithms: {alg} is a shared-secret algorithm" in message
    assert "algorithm confusion" in message


@pytest.mark.parametrize(
    ("algorithms", "says"),
    [
        ([], "must be a non-empty list"),
        (["RS257"], "unknown algorithm 'RS257'"),
        ("RS256", "auth.algorithms: Input should be a valid list"),
    ],
)
def test_algorithms_must_be_a_list_of_known_ones(algorithms: Any, says: str) -> None:
    assert says in refused({**BASE, "algorithms": algorithms})


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"public_key": "PEM"}, "auth.jwks_url: give either jwks_url"),
        ({"jwks_url": None}, "one of them is required"),
        ({"public_key_file": "issuer.pem"}, "auth.public_key_file: give either jwks_url"),
    ],
)
def test_exactly_one_source_of_keys(change: dict[str, Any], says: str) -> None:
    raw = {key: value for key, value in {**BASE, **change}.items() if value is not None}
    assert says in refused(raw)


def test_a_public_key_and_a_public_key_file_together_are_refused() -> None:
    raw = {"issuer": ISSUER, "audience": AUDIENCE, "public_key": "x", "public_key_file": "y"}
    assert "auth.public_key_file: give public_key or public_key_file, not both" in refused(raw)


@pytest.mark.parametrize(
    "url",
    [
        "http://login.acme.example/jwks.json",
        "http://10.0.0.5/jwks.json",
        "ftp://login.acme.example/jwks.json",
        "/jwks.json",
    ],
)
def test_a_jwks_url_others_could_answer_is_refused(url: str) -> None:
    assert "auth.jwks_url: must be" in refused({**BASE, "jwks_url": url})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9000/jwks"]
)
def test_plain_http_is_accepted_for_a_loopback_jwks_url(url: str) -> None:
    assert parse_auth({**BASE, "jwks_url": url}, "gw.toml").jwks_url == url


def _pem_of(private: Any, *, private_format: bool = False) -> str:
    if private_format:
        return private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    return public_pem(private)


def test_a_pem_that_holds_no_usable_public_key_is_refused() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    raw = {"issuer": ISSUER, "audience": AUDIENCE}

    assert "auth.public_key: not a PEM public key" in refused({**raw, "public_key": "garbage"})
    private = refused({**raw, "public_key": _pem_of(key, private_format=True)})
    assert "a private key or a certificate does not belong here" in private
    assert "1024 bits is too short" in refused({**raw, "public_key": _pem_of(short)})
    mismatch = refused({**raw, "public_key": _pem_of(key), "algorithms": ["ES256"]})
    assert "auth.public_key: is an RSA key, which none of the algorithms (ES256)" in mismatch
    ec_key = _pem_of(ec.generate_private_key(ec.SECP256R1()))
    assert parse_auth({**raw, "public_key": ec_key}, "gw.toml").public_key == ec_key


def test_a_bad_pem_file_is_named_by_its_key_and_path(tmp_path: Path) -> None:
    (tmp_path / "issuer.pem").write_text("not a key")
    raw = {"issuer": ISSUER, "audience": AUDIENCE, "public_key_file": "issuer.pem"}
    message = refused(raw, tmp_path)
    assert f"auth.public_key_file: {tmp_path / 'issuer.pem'}: not a PEM public key" in message


@pytest.mark.parametrize(
    "audience", ["gateway", "/mcp", "gateway.acme.example/mcp", "urn:acme:gateway", "https://"]
)
def test_an_audience_that_is_not_an_absolute_url_is_refused(audience: str) -> None:
    assert "auth.audience: must be an absolute http(s) URL" in refused(
        {**BASE, "audience": audience}
    )


def test_an_audience_with_a_fragment_is_refused() -> None:
    assert "auth.audience: must not have a fragment" in refused(
        {**BASE, "audience": AUDIENCE + "#x"}
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"issuer": "acme"}, "auth.issuer: must be an absolute http(s) URL"),
        ({"authorization_servers": ["login"]}, "auth.authorization_servers: must be an absolute"),
        ({"leeway": -1}, "auth.leeway: must be at least 0 seconds"),
        ({"leeway": 3600}, "auth.leeway: must be at most 600 seconds"),
        ({"leeway": "60"}, "auth.leeway: Input should be a valid number"),
        ({"jwks_ttl": 0}, "auth.jwks_ttl: must be above 0 seconds"),
        ({"jwks_min_refresh": -5}, "auth.jwks_min_refresh: must be at least 0 seconds"),
        ({"resource_name": " "}, "auth.resource_name: must not be empty"),
        ({"algorithms": ["RS256", 3]}, "auth.algorithms[1]: Input should be a valid string"),
        ({"claims": {"tenant": 3}}, "auth.claims.tenant: must be a claim name or a list of"),
        ({"claims": 5}, "auth.claims: must be a table"),
        ({"claims": {"user": ""}}, "auth.claims.user: must be a claim name"),
        (
            {"claims": {"scopes": ["scope", ""]}},
            "auth.claims.scopes: must be a list of claim names",
        ),
    ],
)
def test_values_that_cannot_be_right_are_refused_with_the_key_named(
    change: dict[str, Any], says: str
) -> None:
    assert says in refused({**BASE, **change})


def test_unknown_and_missing_keys_are_named() -> None:
    typo = refused({**BASE, "jwks_uri": JWKS})
    assert "auth.jwks_uri: unknown key (allowed: issuer, audience, jwks_url," in typo
    claims = refused({**BASE, "claims": {"tenants": "org_id"}})
    assert "auth.claims.tenants: unknown key (allowed: user, tenant, scopes, roles)" in claims
    assert "auth.issuer: required" in refused({"audience": AUDIENCE, "jwks_url": JWKS})


def test_auth_settings_built_in_code_are_checked_alike() -> None:
    with pytest.raises(AuthConfigError, match="algorithms: HS256 is a shared-secret"):
        AuthSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=JWKS, algorithms=("HS256",))
    with pytest.raises(AuthConfigError, match=r"claims\.tenant: must be a list of claim names"):
        ClaimNames(tenant="org_id")  # type: ignore[arg-type]


# In the config file -------------------------------------------------------------------
def test_the_config_file_s_auth_table_is_read(tmp_path: Path) -> None:
    pem = public_pem(ec.generate_private_key(ec.SECP256R1()))
    (tmp_path / "issuer.pem").write_text(pem)
    (tmp_path / "gw.toml").write_text(
        f'[auth]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\n'
        'public_key_file = "issuer.pem"\nalgorithms = ["ES256"]\n\n'
        '[auth.claims]\ntenant = "org_id"\nscopes = ["scp", "scope"]\n'
    )
    config = load_config(tmp_path / "gw.toml")

    assert config.auth is not None
    assert config.auth.public_key == pem
    assert config.auth.claims.tenant == ("org_id",)
    assert config.auth.claims.scopes == ("scp", "scope")


def test_without_an_auth_table_there_is_no_authentication(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text('[principal]\nuser = "alice"\n')
    assert load_config(tmp_path / "gw.toml").auth is None


def test_a_bad_auth_table_is_a_config_error_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        f'[auth]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_url = "{JWKS}"\n'
        'algorithms = ["HS256"]\n'
    )
    with pytest.raises(ConfigError, match=r"gw\.toml: auth\.algorithms: HS256 is a shared-secret"):
        load_config(path)
    path.write_text("[auth]\n")
    with pytest.raises(ConfigError, match=r"gw\.toml: auth\.issuer: required"):
        load_config(path)
