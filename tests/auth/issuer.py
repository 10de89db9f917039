"""A real identity provider made in the test: keys generated with ``cryptography``,
tokens signed with PyJWT, the JWKS served over HTTP from a loopback port by a
server that counts what it is asked."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://login.acme.example"
AUDIENCE = "https://gateway.acme.example/mcp"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_pem(key: PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@dataclass
class Key:
    kid: str
    alg: str
    private: PrivateKey

    @classmethod
    def rsa(cls, kid: str) -> Key:
        return cls(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> Key:
        return cls(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.alg)
        jwk: dict[str, Any] = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.alg}


@dataclass
class Issuer:
    """Signs tokens with its current keys and publishes them as a JWKS."""

    keys: list[Key] = field(default_factory=lambda: [Key.rsa("rsa-1"), Key.ec("ec-1")])
    hits: int = 0
    body: bytes | None = None
    """What the JWKS URL answers instead of the keys (a broken issuer)."""
    status: int = 200
    send_length: bool = True
    """Whether the answer states its Content-Length (without it, it ends when the
    connection closes)."""
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def key(self, kid: str) -> Key:
        return next(key for key in self.keys if key.kid == kid)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.keys]}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice@acme.example",
            "tenant": "acme",
            "scope": "deploy:read deploy:rollback",
            "iat": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, kid: str = "rsa-1", *, key: Key | None = None, **claims: Any) -> str:
        """A token signed with one of the issuer's keys (or ``key``), naming ``kid``."""
        signer = key or self.key(kid)
        return jwt.encode(
            self.claims(**claims), signer.private, algorithm=signer.alg, headers={"kid": kid}
        )

    def count(self) -> None:
        with self._lock:
            self.hits += 1

    def answer(self) -> tuple[int, bytes]:
        if self.body is not None:
            return self.status, self.body
        return self.status, json.dumps(self.jwks()).encode()


def forged(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None = None) -> str:
    """A token made by hand: unsigned (``secret`` None) or HMAC-SHA256 with ``secret``."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    if secret is None:
        return signing_input + "."
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


class _Handler(BaseHTTPRequestHandler):
    issuer: Issuer

    def do_GET(self) -> None:
        self.issuer.count()
        status, body = self.issuer.answer()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if self.issuer.send_length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(issuer: Issuer, port: int = 0) -> Iterator[str]:
    """Serve the issuer's JWKS on a loopback port; yields its URL."""
    handler = type("Handler", (_Handler,), {"issuer": issuer})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
