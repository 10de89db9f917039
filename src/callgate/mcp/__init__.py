"""Serve callgate's governed tools over MCP (the official ``mcp`` SDK)."""

from callgate.mcp._events import MemoryEventStore
from callgate.mcp._http import DEFAULT_BODY_TIMEOUT
from callgate.mcp._names import DEFAULT_SEPARATOR
from callgate.mcp.server import (
    LOOPBACK_HOSTS,
    MCP_PATH,
    build_server,
    default_principal,
    run_stdio,
    streamable_http_app,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_SEPARATOR",
    "LOOPBACK_HOSTS",
    "MCP_PATH",
    "MemoryEventStore",
    "build_server",
    "default_principal",
    "run_stdio",
    "streamable_http_app",
]
