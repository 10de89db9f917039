"""``GET /healthz`` of ``callgate serve``: what a load balancer or an orchestrator
probes, without credentials.

It answers ``200`` with ``{"status": "ok"}`` when the store answered a trivial
query within :data:`PING_TIMEOUT` seconds and every upstream is ready;
``200`` with ``"degraded"`` when the store answered but an upstream is not
ready (the gateway still serves everything else, and that upstream's tools
answer ``transient``); ``503`` with ``"down"`` when the store did not answer
(no call can be governed without it). The body names each upstream's state and
nothing else: no URL, no error text, no secret.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from starlette.routing import Route

    from callgate.runtime.gate import Gate

__all__ = ["HEALTH_PATH", "PING_TIMEOUT", "health_route"]

HEALTH_PATH = "/healthz"
PING_TIMEOUT = 2.0
"""Seconds the store has to answer a health check."""

logger = logging.getLogger(__name__)


def health_route(gate: Gate) -> Route:
    """The ``/healthz`` route for ``gate`` (see the module docs)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from callgate.cli.upstreams import upstream_states

    async def health(_request: Request) -> JSONResponse:
        store = "ok"
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await gate.ping()
        except Exception as exc:  # whatever the driver raises: the store is not answering
            logger.warning("health check: the store did not answer: %s", type(exc).__name__)
            store = "unreachable"
        upstreams = upstream_states(gate)
        if store != "ok":
            status, code = "down", 503
        elif any(state != "ready" for state in upstreams.values()):
            status, code = "degraded", 200
        else:
            status, code = "ok", 200
        body = {"status": status, "store": store, "upstreams": upstreams}
        return JSONResponse(body, status_code=code, headers={"cache-control": "no-store"})

    return Route(HEALTH_PATH, health, methods=["GET"])
