"""Bearer token in, :class:`~callgate.Principal` out: the gateway's side of OAuth 2.1
as a resource server (RFC 9068 access tokens, checked as RFC 8725 advises).

A token is accepted only when all of these hold, in this order:

1. it is a compact JWS of at most :data:`MAX_TOKEN_CHARS` characters;
2. its ``alg`` is one of the configured public-key algorithms (never ``none``,
   never a shared-secret ``HS*``, which would let the public key be used as an
   HMAC secret);
3. a key of the issuer fits it: the one its ``kid`` names (fetched if the set
   does not hold it yet, see :mod:`callgate.auth._jwks`), of the type ``alg``
   needs;
4. the signature verifies (PyJWT with ``cryptography``);
5. ``exp`` is present and not past, ``nbf`` and ``iat`` are not in the future,
   each with ``leeway`` seconds of clock skew;
6. ``iss`` is the issuer, exactly;
7. ``aud`` is, or lists, this gateway's resource URL: a token minted for
   another resource is refused even though the same issuer signed it;
8. the user claim is present, and the user, tenant, scopes and roles claims
   are identities (:mod:`callgate.contract.identity` normalizes them, as for
   every principal).

The token itself is never kept, logged or put into an error: what the
gateway calls upstreams with is its own credential.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import httpx2
import jwt
from jwt.algorithms import get_default_algorithms

from callgate.auth._jwks import JwksKeys, StaticKey
from callgate.auth._keys import VerifyKey, key_kind
from callgate.auth.errors import InvalidToken
from callgate.auth.settings import AuthSettings, ClaimNames, load_public_key
from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.contract.identity import InvalidIdentity, Principal, canonical

__all__ = ["ISSUER_ATTRIBUTE", "MAX_TOKEN_CHARS", "TokenVerifier"]

MAX_TOKEN_CHARS = 16 * 1024
"""Longer tokens are refused before they are parsed (real ones are 1 to 4 KB)."""
ISSUER_ATTRIBUTE = "token_issuer"
"""The principal's attribute holding the issuer that vouched for it."""

_KNOWN_ALGORITHMS = frozenset(get_default_algorithms())
_OPTIONS: jwt.types.Options = {
    "require": ["exp", "iss", "aud"],
    "verify_signature": True,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_iat": True,
    "verify_iss": True,
    "verify_aud": True,
    "enforce_minimum_key_length": True,
}


class TokenVerifier:
    """Verifies bearer tokens against one issuer (see the module's docs).

    Args:
        settings: the issuer, audience, keys and claim names.
        http: the client to fetch the JWKS with (None: one of its own, closed
            by :meth:`aclose`; a given one is the caller's to close).
        clock: what time the JWKS cache reads (``exp``, ``nbf`` and ``iat`` are
            checked on the system's clock, by PyJWT).
    """

    def __init__(
        self,
        settings: AuthSettings,
        *,
        http: httpx2.AsyncClient | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self._algorithms = frozenset(settings.algorithms)
        self._keys: JwksKeys | StaticKey
        if settings.jwks_url is not None:
            self._keys = JwksKeys(
                settings.jwks_url,
                http=http,
                ttl=settings.jwks_ttl,
                min_refresh=settings.jwks_min_refresh,
                clock=clock,
            )
        else:
            assert settings.public_key is not None  # AuthSettings requires one of the two
            key = load_public_key(settings.public_key)
            self._keys = StaticKey(VerifyKey(kid=None, alg=None, kind=key_kind(key), key=key))

    async def verify(self, token: str) -> Principal:
        """The principal a bearer token stands for.

        Raises:
            InvalidToken: the token does not authenticate anyone; its
                ``description`` says why without quoting the token.
        """
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            raise InvalidToken("malformed", "the token is empty, too long or not text")
        header = _header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            # Named only if it is a known one: the header is the caller's text.
            shown = alg if isinstance(alg, str) and alg in _KNOWN_ALGORITHMS else "unknown"
            raise InvalidToken(
                "algorithm_refused",
                f"the token's algorithm ({shown}) is not accepted; "
                f"accepted: {', '.join(self.settings.algorithms)}",
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed", "the token's kid is not a string")
        key = await self._keys.find(kid, alg)
        claims = self._decode(token, key, alg)
        return _principal(claims, self.settings.claims, self.settings.issuer)

    def _decode(self, token: str, key: VerifyKey, alg: str) -> dict[str, Any]:
        settings = self.settings
        try:
            return jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                options=_OPTIONS,
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway,
            )
        except jwt.InvalidSignatureError:
            raise InvalidToken("bad_signature", "the token's signature does not verify") from None
        except jwt.ExpiredSignatureError:
            raise InvalidToken("expired", "the token has expired") from None
        except jwt.ImmatureSignatureError as exc:
            which = "iat" if "(iat)" in str(exc) else "nbf"
            raise InvalidToken(
                "not_yet_valid", f"the token is not valid yet (its {which} is in the future)"
            ) from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(
                "wrong_audience", f"the token is not for this resource ({settings.audience})"
            ) from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(
                "wrong_issuer", "the token is not from the expected issuer"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            if exc.claim == "aud":
                raise InvalidToken(
                    "wrong_audience",
                    f"the token names no audience (this resource is {settings.audience})",
                ) from None
            if exc.claim == "iss":
                raise InvalidToken("wrong_issuer", "the token names no issuer") from None
            raise InvalidToken("missing_claim", f"the token has no {exc.claim} claim") from None
        except jwt.InvalidKeyError:
            raise InvalidToken("unknown_key", "the issuer's key cannot verify this token") from None
        except jwt.PyJWTError:
            raise InvalidToken("malformed", "the token or one of its claims is malformed") from None

    async def aclose(self) -> None:
        """Release the JWKS client (if it is this verifier's own)."""
        await self._keys.aclose()


def _header(token: str) -> dict[str, Any]:
    """The token's JOSE header, read only to choose the key and the algorithm.

    Not ``jwt.get_unverified_header``: it checks every character of all three
    segments in Python (about 50 µs for a 1 KB token), and ``jwt.decode`` does it
    again. ``jwt.decode`` then reads this same header strictly and holds it to
    the algorithm chosen here, so a header read more leniently here is refused there.
    """
    head, dot, _ = token.partition(".")
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, RecursionError):  # binascii.Error is a ValueError
        header = None
    if not dot or not isinstance(header, dict):
        raise InvalidToken("malformed", "the token is not a signed JWT")
    return header


def _principal(claims: Mapping[str, Any], names: ClaimNames, issuer: str) -> Principal:
    user = claims.get(names.user)
    if user is None:
        raise InvalidToken("missing_claim", f"the token has no {names.user} claim (who is calling)")
    if not isinstance(user, str):
        raise InvalidToken("bad_claim", f"the token's {names.user} claim is not a string")
    tenant_claim = _first(claims, names.tenant)
    tenant = claims[tenant_claim] if tenant_claim is not None else None
    if tenant_claim is not None and not isinstance(tenant, str):
        raise InvalidToken("bad_claim", f"the token's {tenant_claim} claim is not a string")
    scopes = _words(claims, names.scopes)
    roles = _words(claims, (names.roles,))
    try:
        return Principal(
            user, tenant, scopes=scopes, roles=roles, attributes={ISSUER_ATTRIBUTE: issuer}
        )
    except InvalidIdentity:
        # Which claim it was, found again without quoting the value: it may be
        # anything the issuer put there.
        checks = (
            (names.user, [user], True),
            (tenant_claim, [tenant] if isinstance(tenant, str) else [], True),
            (_first(claims, names.scopes), scopes, False),
            (names.roles, roles, True),
        )
        name = next(
            (name for name, values, fold in checks if not _identities(values, fold=fold)),
            "identity",
        )
        raise InvalidToken(
            "bad_claim",
            f"the token's {name} claim holds a value that is no identity "
            "(empty, too long or with control characters)",
        ) from None


def _identities(values: list[str], *, fold: bool) -> bool:
    try:
        for value in values:
            canonical("claim", value, fold_case=fold)
    except InvalidIdentity:
        return False
    return True


def _first(claims: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    return next((name for name in names if claims.get(name) is not None), None)


def _words(claims: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
    """A claim holding a space-separated string or a list of strings, as a list."""
    name = _first(claims, names)
    if name is None:
        return []
    value = claims[name]
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise InvalidToken(
        "bad_claim", f"the token's {name} claim is neither a string nor a list of strings"
    )
