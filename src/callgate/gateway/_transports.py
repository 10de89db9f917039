"""What the gateway's upstream connections stand on: stdio and HTTP transports
watched for their end, transport failures told apart from answers, and reasons
for people with no secret in them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import httpx2
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST

__all__ = ["CountingTransport", "errlog", "is_transport_failure", "safe_reason", "watched"]


def is_transport_failure(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return True
        if exc.code == INVALID_REQUEST and "Session terminated" in str(exc):
            return True
        return exc.code == INTERNAL_ERROR and "error response" in str(exc)
    return isinstance(
        exc,
        (
            httpx2.TransportError,
            OSError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
        ),
    )


def safe_reason(exc: BaseException, secrets: frozenset[str]) -> str:
    """A one-line reason for people (``callgate upstreams``, logs): never a secret."""
    if isinstance(exc, MCPError):
        text = f"MCP error {exc.code}: {exc}"
    elif isinstance(exc, ExceptionGroup):
        return safe_reason(exc.exceptions[0], secrets)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for secret in secrets:
        text = text.replace(secret, "[secret]")
    return text.splitlines()[0][:300] if text else type(exc).__name__


class CountingTransport(httpx2.AsyncHTTPTransport):
    """The HTTP transport, counting connections the upstream refused (no request
    reached it then)."""

    refused = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await super().handle_async_request(request)
        except httpx2.ConnectError:
            self.refused += 1
            raise


def errlog() -> TextIO:
    """Where a stdio upstream's stderr goes: the gateway's, when that is a real
    file (a test runner or an embedding program may have replaced it)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - one for the process, never closed
    return _DEVNULL


_DEVNULL: TextIO | None = None


@contextlib.asynccontextmanager
async def watched(
    inner: contextlib.AbstractAsyncContextManager[Any], lost: asyncio.Event
) -> AsyncIterator[Any]:
    """``inner``'s streams, with ``lost`` set once the server's output ends (it exited)."""
    async with inner as (read, write):
        send, receive = anyio.create_memory_object_stream[Any](16)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                lost.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()
