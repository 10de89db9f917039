"""Serve callgate's governed tools over MCP (the official ``mcp`` SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from callgate._lazy import lazy_exports

if TYPE_CHECKING:
    from callgate.mcp._events import MemoryEventStore
    from callgate.mcp._http import (
        DEFAULT_BODY_TIMEOUT,
        LOOPBACK_HOSTS,
        MCP_PATH,
        bearer_challenge,
        streamable_http_app,
    )
    from callgate.mcp._names import DEFAULT_SEPARATOR
    from callgate.mcp.server import build_server, default_principal, run_stdio

# Imported on first use: ``callgate --help`` reads the defaults of ``serve``
# (from ``_names``) without the MCP SDK.
_HOMES = {
    "MemoryEventStore": "callgate.mcp._events",
    "DEFAULT_BODY_TIMEOUT": "callgate.mcp._http",
    "DEFAULT_SEPARATOR": "callgate.mcp._names",
    "LOOPBACK_HOSTS": "callgate.mcp._http",
    "MCP_PATH": "callgate.mcp._http",
    "bearer_challenge": "callgate.mcp._http",
    "build_server": "callgate.mcp.server",
    "default_principal": "callgate.mcp.server",
    "run_stdio": "callgate.mcp.server",
    "streamable_http_app": "callgate.mcp._http",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_SEPARATOR",
    "LOOPBACK_HOSTS",
    "MCP_PATH",
    "MemoryEventStore",
    "bearer_challenge",
    "build_server",
    "default_principal",
    "run_stdio",
    "streamable_http_app",
]
