"""What replicas of one ``callgate serve`` deployment must share, read from the
environment in this one place.

Two secrets of the MCP server are random per process unless given: the key its
2026-07-28 stateless session ids are derived with (so the duplicate-call
limit, the retry budget and the lethal-trifecta guard count one principal's
calls together) and the key that seals ``requestState`` (so an
``input_required`` round asked by one replica can be answered through
another). Replicas behind one load balancer must agree on both: they derive
them from ``$CALLGATE_SERVER_SECRET``, set to the same value on each.

``$CALLGATE_TASK_LEASE`` (seconds, default 30) is how long a running task's
lease lasts: how soon a task of a replica that died reads as failed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from callgate.cli._common import CliError

if TYPE_CHECKING:
    from callgate.contract import Principal

__all__ = ["LEASE_ENV", "MIN_SECRET_CHARS", "SECRET_ENV", "server_options", "shares_secrets"]

SECRET_ENV = "CALLGATE_SERVER_SECRET"
LEASE_ENV = "CALLGATE_TASK_LEASE"
MIN_SECRET_CHARS = 32


def _derived(secret: str, purpose: str) -> bytes:
    # One secret, a key per use: a session id never helps to forge a state.
    return hmac.new(secret.encode(), f"callgate/{purpose}".encode(), hashlib.sha256).digest()


def shares_secrets() -> bool:
    """Whether ``$CALLGATE_SERVER_SECRET`` is set (replicas then agree)."""
    return bool(os.environ.get(SECRET_ENV))


def server_options(who: Principal) -> dict[str, Any]:
    """``build_server`` options from the environment: the shared keys and the
    task lease (none of them when the variables are not set).

    Raises:
        CliError: the secret is shorter than :data:`MIN_SECRET_CHARS`, or the
            lease is not a positive number of seconds.
    """
    options: dict[str, Any] = {}
    secret = os.environ.get(SECRET_ENV)
    if secret:
        if len(secret) < MIN_SECRET_CHARS:
            raise CliError(
                f"{SECRET_ENV} must be at least {MIN_SECRET_CHARS} characters "
                f"(it has {len(secret)}); make one with: "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        from mcp.server.request_state import RequestStateSecurity

        binding = json.dumps([who.tenant, who.user])
        options["session_key"] = _derived(secret, "sessions")
        options["request_state"] = RequestStateSecurity(
            keys=[_derived(secret, "request-state")], bind_principal=lambda _ctx: binding
        )
    lease = os.environ.get(LEASE_ENV)
    if lease:
        try:
            seconds = float(lease)
        except ValueError:
            seconds = 0.0
        if not seconds > 0:
            raise CliError(f"{LEASE_ENV} must be a positive number of seconds, not {lease!r}")
        options["task_lease"] = timedelta(seconds=seconds)
    return options
