"""What authenticating a call costs: ``TokenVerifier.verify`` with a warm JWKS cache.

    python benchmarks/auth.py [--rounds 7] [--calls 3000] [--quick]

Side by side in one run, round by round in a shuffled order (each row's figure is
the median of its rounds' mean per call):

- **local principal**: ``callgate.config.local_principal(gate, defaults)`` with
  the same user, tenant, scopes and roles the tokens carry: what a call costs for
  its identity where nobody authenticates (stdio, loopback HTTP without
  ``[auth]``); the baseline of the ratios;
- **RS256** (2048-bit RSA) and **ES256** (P-256) tokens through
  ``TokenVerifier.verify``: the header read, the key found in the cache, PyJWT's
  signature and claim checks, the claims made a ``Principal``;
- **PyJWT decode alone** for the same tokens (signature and claims, no key
  lookup, no principal): the floor, to show what the verifier adds to the library.

The JWKS is served by the tests' local issuer (``tests/auth/issuer.py``) from a
loopback HTTP server, fetched once before timing; the number of fetches is
printed (it must stay 1: nothing is fetched while timing). Verification results
are never cached, so every call pays the signature check. Target: under 150 µs
per verification, judged on CPU time (the process's, per call): wall-clock time
is printed too, but on a shared machine it also counts time spent waiting for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import jwt

from callgate import Gate
from callgate.auth import AuthSettings, TokenVerifier
from callgate.config import PrincipalDefaults, local_principal

# One local issuer for the tests and this benchmark: the tests check what it serves.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import machine
from tests.auth.issuer import AUDIENCE, ISSUER, Issuer, serving

TARGET_US = 150.0
SCOPES = ("deploy:read", "deploy:rollback", "orders:read", "orders:write", "audit:read")
ROLES = ("oncall", "approver")


def claims() -> dict[str, object]:
    """A token's claims as an identity provider issues them (about 1 KB signed)."""
    return {
        "sub": "alice@acme.example",
        "tenant": "acme",
        "scope": " ".join(SCOPES),
        "roles": list(ROLES),
        "client_id": "agent-host",
        "jti": "5f0c7a1e-3b7d-4d1a-9a1c-2f64e7c1b9d3",
    }


async def per_call(call: Callable[[], Awaitable[object]], calls: int) -> tuple[float, float]:
    """Mean wall-clock and CPU seconds per call over ``calls`` calls."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls, (time.process_time() - cpu) / calls


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000, help="calls per row per round")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 200: a smoke test")
    args = parser.parse_args()
    rounds, calls = (2, 200) if args.quick else (args.rounds, args.calls)

    issuer = Issuer()
    tokens = {kid: issuer.token(kid, **claims()) for kid in ("rsa-1", "ec-1")}
    gate = Gate(store="memory://")
    defaults = PrincipalDefaults(
        user="alice@acme.example", tenant="acme", scopes=SCOPES, roles=ROLES
    )

    with serving(issuer) as url:
        verifier = TokenVerifier(AuthSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url))
        for token in tokens.values():  # warm: the JWKS is fetched here, once
            principal = await verifier.verify(token)
        assert principal == local_principal(gate, defaults, attributes=principal.attributes)
        keys = {kid: issuer.key(kid).private.public_key() for kid in tokens}

        async def local() -> object:
            return local_principal(gate, defaults)

        def verify(token: str) -> Callable[[], Awaitable[object]]:
            return lambda: verifier.verify(token)

        def decode(kid: str) -> Callable[[], Awaitable[object]]:
            alg = issuer.key(kid).alg

            async def call() -> object:
                return jwt.decode(
                    tokens[kid], keys[kid], algorithms=[alg], audience=AUDIENCE, issuer=ISSUER
                )

            return call

        rows: dict[str, Callable[[], Awaitable[object]]] = {
            "local principal (no authentication)": local,
            "RS256: TokenVerifier.verify": verify(tokens["rsa-1"]),
            "ES256: TokenVerifier.verify": verify(tokens["ec-1"]),
            "RS256: PyJWT decode alone": decode("rsa-1"),
            "ES256: PyJWT decode alone": decode("ec-1"),
        }
        for call in rows.values():  # one untimed pass: imports, caches
            await per_call(call, max(10, calls // 10))
        seen: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for _ in range(rounds):
            order = list(rows)
            random.shuffle(order)
            for name in order:
                seen[name].append(await per_call(rows[name], calls))
        await verifier.aclose()

    def cpu(name: str) -> float:
        return statistics.median(c for _, c in seen[name])

    base = cpu("local principal (no authentication)")
    print(f"machine: {machine()}")
    print(f"PyJWT {jwt.__version__}; {rounds} rounds of {calls} calls per row; ", end="")
    print(f"JWKS fetches: {issuer.hits}")
    print()
    print(
        "| path | CPU µs per call (median) | wall µs per call (median) | fastest round wall µs "
        "| CPU vs local principal | under 150 µs (CPU) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, figures in seen.items():
        walls = [wall for wall, _ in figures]
        verdict = (
            "-" if name.startswith("local") else "yes" if cpu(name) * 1e6 < TARGET_US else "no"
        )
        print(
            f"| {name} | {cpu(name) * 1e6:,.1f} | {statistics.median(walls) * 1e6:,.1f} | "
            f"{min(walls) * 1e6:,.1f} | {cpu(name) / base:,.1f}x | {verdict} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
