"""What the gateway's upstream connections stand on: stdio and HTTP transports
watched for their end, transport failures told apart from answers, answers over
an upstream's ``max_answer_bytes`` refused while they are read, and reasons for
people with no secret in them.

An answer refused for its size reaches the caller of ``Client`` as an
:class:`~mcp.MCPError` whose text :func:`too_large` recognises: over stdio the
gateway's own transport (:mod:`callgate.gateway._stdio`) answers the request
with it; over HTTP the SDK turns the error a capped body raises into its own
(``Failed to parse JSON response: ...``), and an SSE event over the limit into
``SSE stream failed: Server-sent event exceeded the N byte limit.``. An upstream
could word an error of its own the same way; it would gain nothing by it (the
call fails as any call whose answer cannot be read).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import httpx2
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

__all__ = [
    "CountingTransport",
    "QuietRefusals",
    "TooLarge",
    "errlog",
    "is_transport_failure",
    "safe_reason",
    "too_large",
    "too_large_text",
    "watched",
]


@dataclass(kw_only=True, frozen=True)
class TooLarge:
    """An upstream's answer refused for its size."""

    seen: int
    """Bytes of it seen: it was at least this large."""
    limit: int
    """The upstream's ``max_answer_bytes``."""


_TOO_LARGE = re.compile(r"answer of at least (\d+) bytes is over max_answer_bytes \((\d+)\)")
_SSE_TOO_LARGE = re.compile(r"^SSE stream failed: Server-sent event exceeded the (\d+) byte limit")


def too_large_text(seen: int, limit: int) -> str:
    """The error text of an answer refused for its size (:func:`too_large` reads it)."""
    return (
        f"callgate: the upstream's answer of at least {seen} bytes is over "
        f"max_answer_bytes ({limit}); it was not read"
    )


def too_large(exc: BaseException) -> TooLarge | None:
    """How large the answer was, when ``exc`` is the error of one refused for its size."""
    if not isinstance(exc, MCPError):
        return None
    if exc.code in (INTERNAL_ERROR, PARSE_ERROR) and (found := _TOO_LARGE.search(exc.message)):
        return TooLarge(seen=int(found[1]), limit=int(found[2]))
    if exc.code == CONNECTION_CLOSED and (found := _SSE_TOO_LARGE.match(exc.message)):
        limit = int(found[1])
        return TooLarge(seen=limit + 1, limit=limit)
    return None


def is_transport_failure(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        if too_large(exc) is not None:  # an answer came, only too large: the session is fine
            return False
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
    reached it then), and refusing a body over ``max_answer_bytes``.

    A body (not an event stream: the SDK bounds each of its events, see
    :func:`too_large`) whose ``Content-Length`` is over the limit is refused at
    its first read, before a byte of it is read; one without raises once the
    bytes read pass the limit. The bytes counted are those on the wire, so the
    upstream is asked for them uncompressed (``Accept-Encoding: identity``): a
    small compressed body could otherwise unpack to any size.
    """

    refused = 0

    def __init__(self, *, max_answer_bytes: int | None = None) -> None:
        super().__init__()
        self.max_answer_bytes = max_answer_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        limit = self.max_answer_bytes
        if limit is not None:
            request.headers["Accept-Encoding"] = "identity"
        try:
            response = await super().handle_async_request(request)
        except httpx2.ConnectError:
            self.refused += 1
            raise
        content_type = response.headers.get("content-type", "").lower()
        if limit is not None and not content_type.startswith("text/event-stream"):
            length = response.headers.get("content-length", "")
            declared = int(length) if length.isdigit() else None
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Capped(response.stream, limit, declared)
        return response


class _Capped(httpx2.AsyncByteStream):
    """A response body that raises once it is over ``limit`` bytes.

    The error is the SDK's ``httpx2.StreamError`` itself, not a class of callgate's:
    its ``_handle_json_response`` catches that one and answers the request with a
    JSON-RPC error carrying the text (:func:`too_large` reads it back).
    """

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, declared: int | None) -> None:
        self._inner = inner
        self._limit = limit
        self._declared = declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._limit:
            raise httpx2.StreamError(too_large_text(self._declared, self._limit))
        seen = 0
        async for part in self._inner:
            seen += len(part)
            if seen > self._limit:
                raise httpx2.StreamError(too_large_text(seen, self._limit))
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class QuietRefusals(logging.Filter):
    """Drops the SDK's traceback for an HTTP answer refused for its size (the SDK
    logs every unreadable answer with its stack; the gateway logs this one as one
    line, naming the upstream and the limit)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, httpx2.StreamError) and _TOO_LARGE.search(str(exc)))


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
