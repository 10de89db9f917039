"""The ``[auth]`` table of the config file: which access tokens ``callgate serve``
accepts, and how their claims become a :class:`~callgate.Principal`.

Example::

    [auth]
    issuer = "https://login.acme.example"
    audience = "https://gateway.acme.example/mcp"    # this gateway: tokens for anything else are refused
    jwks_url = "https://login.acme.example/.well-known/jwks.json"
    algorithms = ["RS256", "ES256"]

    [auth.claims]
    tenant = ["tenant", "org_id"]     # the first present wins
    scopes = ["scope", "scp"]

Everything that cannot be right is refused here, when the file is read, with the
key named: an algorithm that is no public-key signature (``none``, ``HS256``...),
both or neither of ``jwks_url`` and a public key, a JWKS URL a network attacker
could answer (plain ``http`` to another host than this one), a PEM that holds no
public key, an audience that is not an absolute URL.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pydantic
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from pydantic import BaseModel, ConfigDict

from callgate.auth._keys import ALGORITHMS, key_kind
from callgate.errors import UserError

__all__ = ["AuthConfigError", "AuthSettings", "ClaimNames", "load_public_key", "parse_auth"]

MAX_LEEWAY = 600.0
"""The largest clock skew accepted, in seconds: clocks further apart are wrong."""


class AuthConfigError(UserError, ValueError):
    """An ``[auth]`` table (or :class:`AuthSettings`) that cannot be used; the
    message names the key and what is allowed."""


@dataclass(frozen=True, kw_only=True)
class ClaimNames:
    """Which claims of a token say who is calling.

    Args:
        user: the user id (required in every token).
        tenant: the tenant; the first of these the token has wins (none: no tenant).
        scopes: the scopes, as a space-separated string or a list of strings;
            the first of these the token has wins.
        roles: the roles, as a list of strings or a space-separated string.
    """

    user: str = "sub"
    tenant: tuple[str, ...] = ("tenant", "org_id")
    scopes: tuple[str, ...] = ("scope", "scp")
    roles: str = "roles"

    def __post_init__(self) -> None:
        for key in ("user", "roles"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise AuthConfigError(f"claims.{key}: must be a claim name (a non-empty string)")
        for key in ("tenant", "scopes"):
            names = getattr(self, key)
            if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
                raise AuthConfigError(f"claims.{key}: must be a list of claim names")


@dataclass(frozen=True, kw_only=True)
class AuthSettings:
    """Which access tokens the gateway accepts (see docs/auth.md).

    Args:
        issuer: the ``iss`` every token must carry, exactly.
        audience: this gateway's resource URL, as its clients reach it; a token
            whose ``aud`` does not contain it is refused, however well signed.
        jwks_url: where the issuer publishes its public keys (JWKS).
        public_key: or one PEM public key, for tests and simple setups.
        algorithms: the signature algorithms accepted (public-key ones only).
        leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        claims: which claims say who is calling.
        jwks_ttl: seconds a fetched JWKS is used before it is fetched again.
        jwks_min_refresh: at most one fetch per this many seconds (a token with
            an unknown key asks for one).
        authorization_servers: for the protected resource metadata (default: the issuer).
        resource_name: a human-readable name for the metadata.

    Raises:
        AuthConfigError: a value that cannot be right (the message names the key).
    """

    issuer: str
    audience: str
    jwks_url: str | None = None
    public_key: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway: float = 60.0
    claims: ClaimNames = field(default_factory=ClaimNames)
    jwks_ttl: float = 300.0
    jwks_min_refresh: float = 30.0
    authorization_servers: tuple[str, ...] = ()
    resource_name: str | None = None

    def __post_init__(self) -> None:
        _check_url("issuer", self.issuer)
        _check_url("audience", self.audience)
        for server in self.authorization_servers:
            _check_url("authorization_servers", server)
        _check_algorithms(self.algorithms)
        if (self.jwks_url is None) == (self.public_key is None):
            raise AuthConfigError(
                "jwks_url: give either jwks_url (the issuer's keys) or public_key / "
                "public_key_file (one PEM public key), "
                + ("not both" if self.jwks_url is not None else "one of them is required")
            )
        if self.jwks_url is not None:
            _check_jwks_url(self.jwks_url)
        if self.public_key is not None:
            kind = key_kind(load_public_key(self.public_key))
            if not any(ALGORITHMS[alg] == kind for alg in self.algorithms):
                raise AuthConfigError(
                    f"public_key: is an {kind} key, which none of the algorithms "
                    f"({', '.join(self.algorithms)}) can verify"
                )
        _check_seconds("leeway", self.leeway, maximum=MAX_LEEWAY)
        _check_seconds("jwks_ttl", self.jwks_ttl, positive=True)
        _check_seconds("jwks_min_refresh", self.jwks_min_refresh)
        if self.resource_name is not None and not self.resource_name.strip():
            raise AuthConfigError("resource_name: must not be empty")

    @property
    def metadata_servers(self) -> tuple[str, ...]:
        """The authorization servers the metadata names: the configured ones, else the issuer."""
        return self.authorization_servers or (self.issuer,)


def load_public_key(pem: str) -> PublicKeyTypes:
    """The public key in a PEM text.

    Raises:
        AuthConfigError: the text holds no PEM public key (a private key or a
            certificate is refused too: only the public key belongs in the config).
    """
    try:
        key = load_pem_public_key(pem.encode())
    except (ValueError, TypeError):
        raise AuthConfigError(
            "public_key: not a PEM public key (-----BEGIN PUBLIC KEY-----); "
            "a private key or a certificate does not belong here"
        ) from None
    try:
        key_kind(key)
    except ValueError as exc:
        raise AuthConfigError(f"public_key: {exc}") from None
    return key


# The file's schema -------------------------------------------------------------
class _ClaimsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    user: str = "sub"
    tenant: str | list[str] = ["tenant", "org_id"]
    scopes: str | list[str] = ["scope", "scp"]
    roles: str = "roles"


class _AuthFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    issuer: str
    audience: str
    jwks_url: str | None = None
    public_key: str | None = None
    public_key_file: str | None = None
    algorithms: list[str] = ["RS256", "ES256"]
    leeway: float | int = 60.0
    jwks_ttl: float | int = 300.0
    jwks_min_refresh: float | int = 30.0
    authorization_servers: list[str] = []
    resource_name: str | None = None
    claims: _ClaimsFile = _ClaimsFile()


def parse_auth(raw: Mapping[str, Any], label: str, *, base_dir: Path | None = None) -> AuthSettings:
    """The ``[auth]`` table of a config file, checked.

    Args:
        raw: the table as TOML gives it.
        label: how messages name the file.
        base_dir: where a relative ``public_key_file`` is (the config file's
            directory; default: the current one).

    Raises:
        AuthConfigError: an unknown key, a value of the wrong type or one that
            cannot be right; the message names the file and the key.
    """
    try:
        parsed = _AuthFile.model_validate(dict(raw))
    except pydantic.ValidationError as exc:
        raise AuthConfigError(f"{label}: {_describe(exc)}") from None
    public_key = parsed.public_key
    path: Path | None = None
    if parsed.public_key_file is not None:
        if public_key is not None:
            raise AuthConfigError(
                f"{label}: auth.public_key_file: give public_key or public_key_file, not both"
            )
        if parsed.jwks_url is not None:
            raise AuthConfigError(
                f"{label}: auth.public_key_file: give either jwks_url or a public key, not both"
            )
        path = (base_dir or Path.cwd()) / Path(parsed.public_key_file).expanduser()
        try:
            public_key = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise AuthConfigError(
                f"{label}: auth.public_key_file: cannot read {path} ({reason})"
            ) from None
    claims = parsed.claims
    try:
        return AuthSettings(
            issuer=parsed.issuer,
            audience=parsed.audience,
            jwks_url=parsed.jwks_url,
            public_key=public_key,
            algorithms=tuple(parsed.algorithms),
            leeway=float(parsed.leeway),
            claims=ClaimNames(
                user=claims.user,
                tenant=_names(claims.tenant),
                scopes=_names(claims.scopes),
                roles=claims.roles,
            ),
            jwks_ttl=float(parsed.jwks_ttl),
            jwks_min_refresh=float(parsed.jwks_min_refresh),
            authorization_servers=tuple(parsed.authorization_servers),
            resource_name=parsed.resource_name,
        )
    except AuthConfigError as exc:
        message = str(exc)
        if path is not None and message.startswith("public_key:"):
            message = f"public_key_file: {path}:" + message.removeprefix("public_key:")
        raise AuthConfigError(f"{label}: auth.{message}") from None


# Checks ------------------------------------------------------------------------
def _names(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _key(loc: tuple[int | str, ...]) -> str:
    """``auth.claims.tenant`` or ``auth.algorithms[0]`` for a pydantic error location
    (the members of a union, which pydantic adds, are left out)."""
    key = "auth"
    fields: Mapping[str, Any] = _AuthFile.model_fields
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
            continue
        if part not in fields:
            break
        key += f".{part}"
        fields = _ClaimsFile.model_fields if part == "claims" else {}
    return key


def _describe(exc: pydantic.ValidationError) -> str:
    messages: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        if err["type"] == "extra_forbidden":
            model: type[BaseModel] = _ClaimsFile if loc[0] == "claims" else _AuthFile
            key = f"{_key(loc[:-1])}.{loc[-1]}"
            messages[key] = f"unknown key (allowed: {', '.join(model.model_fields)})"
        else:
            key = _key(loc)
            if err["type"] == "missing":
                message = "required"
            elif err["type"] in ("model_type", "dict_type"):
                message = "must be a table"
            elif key in ("auth.claims.tenant", "auth.claims.scopes"):
                message = "must be a claim name or a list of claim names"
            else:
                message = err["msg"]
            # A union reports each member's failure: the first one is enough.
            messages.setdefault(key, message)
    return "; ".join(f"{key}: {message}" for key, message in messages.items())


def _check_algorithms(algorithms: tuple[str, ...]) -> None:
    if isinstance(algorithms, str) or not algorithms:
        raise AuthConfigError("algorithms: must be a non-empty list, e.g. ['RS256', 'ES256']")
    for alg in algorithms:
        if not isinstance(alg, str) or alg.lower() == "none":
            raise AuthConfigError(
                "algorithms: 'none' means an unsigned token, which is never accepted"
            )
        if alg.upper().startswith("HS"):
            raise AuthConfigError(
                f"algorithms: {alg} is a shared-secret algorithm: a gateway accepting it "
                "could be handed a token 'signed' with the issuer's public key (algorithm "
                "confusion); use the issuer's public-key algorithm (RS256, ES256, ...)"
            )
        if alg not in ALGORITHMS:
            raise AuthConfigError(
                f"algorithms: unknown algorithm {alg!r} (accepted: {', '.join(ALGORITHMS)})"
            )


def _check_url(key: str, value: str) -> None:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname:
        raise AuthConfigError(f"{key}: must be an absolute http(s) URL, e.g. https://host/path")
    if parts.fragment or value.endswith("#"):
        raise AuthConfigError(f"{key}: must not have a fragment (#...)")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_jwks_url(url: str) -> None:
    _check_url("jwks_url", url)
    parts = urlsplit(url)
    if parts.scheme != "https" and not _is_loopback(parts.hostname or ""):
        raise AuthConfigError(
            "jwks_url: must be https: keys fetched over plain http can be replaced on the "
            "way (plain http is accepted for a loopback host only)"
        )


def _check_seconds(
    key: str, value: float, *, positive: bool = False, maximum: float | None = None
) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise AuthConfigError(f"{key}: must be a number of seconds")
    if value < 0 or (positive and value == 0):
        raise AuthConfigError(f"{key}: must be {'above' if positive else 'at least'} 0 seconds")
    if maximum is not None and value > maximum:
        raise AuthConfigError(f"{key}: must be at most {maximum:g} seconds")
