"""Public keys that verify tokens: which algorithm fits which key, and a JWKS
document read into keys (by PyJWT's ``PyJWK``, never by hand).

A key verifies a token only when the token's ``alg`` is accepted, fits the key's
type (an RSA key never verifies ``ES256``, nor any key ``HS256``) and, if the
JWK names an ``alg``, is that one: a token cannot choose how a key is used.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt import PyJWK, PyJWTError

__all__ = ["ALGORITHMS", "MAX_KEYS", "MIN_RSA_BITS", "VerifyKey", "key_kind", "keys_from_jwks"]

logger = logging.getLogger("callgate.auth")

ALGORITHMS: Mapping[str, str] = {
    "RS256": "RSA",
    "RS384": "RSA",
    "RS512": "RSA",
    "PS256": "RSA",
    "PS384": "RSA",
    "PS512": "RSA",
    "ES256": "EC P-256",
    "ES384": "EC P-384",
    "ES512": "EC P-521",
    "EdDSA": "EdDSA",
}
"""The signature algorithms a gateway may accept, and the type of key each needs.
Public-key signatures only: ``none`` and the shared-secret ``HS*`` are never here."""

MIN_RSA_BITS = 2048
MAX_KEYS = 100
"""A JWKS with more keys than this is refused (real ones hold a handful)."""

_CURVES = {"secp256r1": "EC P-256", "secp384r1": "EC P-384", "secp521r1": "EC P-521"}


def key_kind(key: Any) -> str:
    """The type of a public key, as :data:`ALGORITHMS` names it.

    Raises:
        ValueError: a key no accepted algorithm verifies (a private key, another
            curve, an RSA key under :data:`MIN_RSA_BITS` bits).
    """
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise ValueError(f"an RSA key of {key.key_size} bits is too short (at least 2048)")
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in _CURVES:
            raise ValueError(f"the curve {key.curve.name} is not accepted (P-256, P-384, P-521)")
        return _CURVES[key.curve.name]
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return "EdDSA"
    raise ValueError(f"a {type(key).__name__} is not a public key an accepted algorithm verifies")


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyKey:
    """One public key: its ``kid`` (None: any), the ``alg`` its JWK insists on, its type."""

    kid: str | None
    alg: str | None
    kind: str
    key: Any

    def fits(self, alg: str) -> bool:
        """Whether a token signed with ``alg`` may be verified with this key."""
        return ALGORITHMS.get(alg) == self.kind and (self.alg is None or self.alg == alg)


def keys_from_jwks(document: Any, *, source: str) -> tuple[VerifyKey, ...]:
    """The signature keys of a JWKS document (RFC 7517).

    Keys that cannot verify a token are left out, each with a log line: another
    ``use`` than ``sig``, a shared secret (``oct``), a private key, an unknown
    type or curve, a short RSA key. A set left with no keys is a valid answer
    (the issuer has withdrawn them all).

    Raises:
        ValueError: the document is no JWKS (no ``keys`` list) or holds too many
            keys; the message says which, for the log.
    """
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("it is not a JWKS (a JSON object with a 'keys' list)")
    entries: list[Any] = document["keys"]
    if len(entries) > MAX_KEYS:
        raise ValueError(f"it holds {len(entries)} keys (at most {MAX_KEYS})")
    keys = []
    for index, jwk in enumerate(entries):
        try:
            keys.append(_key_from_jwk(jwk))
        except ValueError as exc:
            logger.warning("the JWKS at %s: key %d left out: %s", source, index, exc)
    return tuple(keys)


def _key_from_jwk(jwk: Any) -> VerifyKey:
    """One JWK's key; a ValueError says why it cannot be one (never quoting it)."""
    if not isinstance(jwk, dict):
        raise ValueError("not a JSON object")
    if jwk.get("use", "sig") != "sig":
        raise ValueError(f"its use is {jwk.get('use')!r}, not 'sig'")
    if jwk.get("kty") == "oct":
        raise ValueError("a shared secret (kty 'oct') never verifies a token here")
    if "d" in jwk:
        raise ValueError("it holds a private key, which an issuer never publishes")
    kid, alg = jwk.get("kid"), jwk.get("alg")
    if kid is not None and not isinstance(kid, str):
        raise ValueError("its kid is not a string")
    if alg is not None and (not isinstance(alg, str) or alg not in ALGORITHMS):
        raise ValueError(f"its alg {str(alg)[:20]!r} is not accepted")
    try:
        parsed = PyJWK(jwk)
    except (PyJWTError, ValueError, TypeError):
        # PyJWT's messages may quote the JWK: only a reason of ours is logged.
        raise ValueError("not a usable public key") from None
    kind = key_kind(parsed.key)
    if alg is not None and ALGORITHMS[alg] != kind:
        raise ValueError(f"its alg {alg} does not fit its {kind} key")
    return VerifyKey(kid=kid, alg=alg, kind=kind, key=parsed.key)
