"""The Streamable HTTP edge in front of the SDK's transport: request bodies,
duplicate request ids, and session ids on error responses.

:class:`HttpEdge` is an ASGI middleware around the whole app:

- **Request bodies are read here, within a time limit**, before the SDK sees
  the request. A body that stalls gets ``408`` (and the connection closed)
  instead of holding a request open for as long as the client likes; a client
  that disconnects before its body is complete is one log line, not a
  traceback (the SDK logs a ``ClientDisconnect`` with its stack and answers a
  peer that is gone); a body over the SDK's size limit gets ``413`` as the
  SDK would answer it.
- **A request id already in flight on a 2025-11-25 session is refused**
  (``400``, JSON-RPC ``-32600``). The specification forbids reusing an id in a
  session, and the SDK keys a request's response stream by its id, so the
  second request would take over the first one's stream and leave it open
  forever.
- **No ``Mcp-Session-Id`` on an error response.** The SDK opens a session for
  any request without one (a ``GET`` included), answers the error, discards
  the session, and still names it in the response; a client that uses that id
  gets ``404``. A session id belongs only on the response that created it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import anyio
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from callgate.mcp._events import session_and_version

__all__ = ["DEFAULT_BODY_TIMEOUT", "HttpEdge"]

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a client has to send a whole request body."""

_SESSION_HEADER = b"mcp-session-id"

logger = logging.getLogger(__name__)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"application/json",
    close: bool = False,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _rpc_error(code: int, message: str, request_id: object = None) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    ).encode()


def _without_session_id(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in headers if name.lower() != _SESSION_HEADER]


class HttpEdge:
    """ASGI middleware: body read limits, duplicate ids, session ids on errors
    (see the module docs).

    Args:
        app: the Streamable HTTP app.
        body_timeout: seconds a client has to send a whole request body.
        max_body: the largest body accepted, in bytes (the SDK's limit).

    Raises:
        ValueError: a limit that is not positive.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ) -> None:
        if not body_timeout > 0 or max_body < 1:
            raise ValueError("body_timeout and max_body must be positive")
        self.app = app
        self.body_timeout = body_timeout
        self.max_body = max_body
        self._in_flight: dict[str, set[str]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_safely(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                message = {**message, "headers": _without_session_id(message.get("headers", ()))}
            await send(message)

        if scope["method"] != "POST":
            await self.app(scope, receive, send_safely)
            return
        body = await self._read_body(scope, receive, send)
        if body is None:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        key = self._request_key(scope, body)
        if key is None:
            await self.app(scope, replay, send_safely)
            return
        session, request_id, raw_id = key
        ids = self._in_flight.setdefault(session, set())
        if request_id in ids:
            logger.warning(
                "refused a request from %s: id %r is already in flight on its session",
                _client(scope),
                request_id[:64],
            )
            message = f"Invalid Request: a request with id {raw_id!r} is already in flight"
            await _answer(send_safely, 400, _rpc_error(INVALID_REQUEST, message, raw_id))
            return
        ids.add(request_id)
        try:
            await self.app(scope, replay, send_safely)
        finally:
            ids.discard(request_id)
            if not ids and self._in_flight.get(session) is ids:
                del self._in_flight[session]

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the request has been answered (or its
        client is gone)."""
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.body_timeout) as waited:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    logger.warning(
                        "%s disconnected before sending the whole request body", _client(scope)
                    )
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    await _answer(send, 413, b"Request body too large", content_type=b"text/plain")
                    return None
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
        assert waited.cancelled_caught
        logger.warning(
            "%s did not send its request body within %g seconds: 408",
            _client(scope),
            self.body_timeout,
        )
        message_text = (
            f"Request Timeout: the request body did not arrive within {self.body_timeout:g} seconds"
        )
        await _answer(send, 408, _rpc_error(INVALID_REQUEST, message_text), close=True)
        return None

    @staticmethod
    def _request_key(scope: Scope, body: bytes) -> tuple[str, str, object] | None:
        """(session, request id as the SDK keys it, the id) of a 2025-11-25
        request on a session; None for anything else."""
        session, version = session_and_version(scope)
        if session is None or version in MODERN_PROTOCOL_VERSIONS:
            return None
        try:
            message = json.loads(body)
        except ValueError:
            return None  # the SDK answers the parse error
        if not isinstance(message, dict) or "method" not in message:
            return None
        raw_id = message.get("id")
        if not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
            return None
        # The SDK's stream key: str(id), so 1 and "1" are one stream too.
        return session, str(raw_id), raw_id
