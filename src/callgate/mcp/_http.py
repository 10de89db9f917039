"""The Streamable HTTP edge in front of the SDK's transport: who is calling,
request bodies, duplicate request ids, and session ids on error responses.
:func:`streamable_http_app` puts the app together.

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

:class:`Authentication`, another middleware outside it, says who each request
comes from (see its docs): the caller is a fact of each HTTP request, not of
the server, and reaches the handlers as the :class:`Caller` of the request's
ASGI scope (:func:`caller_of`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from callgate.console.auth import Authenticate, Unauthenticated, authenticate_request
from callgate.contract import Principal
from callgate.mcp._events import MemoryEventStore, SessionEvents, session_and_version

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "LOOPBACK_HOSTS",
    "MCP_PATH",
    "Authentication",
    "Caller",
    "Challenge",
    "HttpEdge",
    "bearer_challenge",
    "caller_of",
    "current_caller",
    "streamable_http_app",
]

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a client has to send a whole request body."""
MCP_PATH = "/mcp"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
SSE_RETRY_MS = 1000
"""How long a client whose SSE stream dropped waits before it reconnects (milliseconds)."""

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
    headers: Iterable[tuple[bytes, str]] = (),
) -> None:
    sent = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    sent += [(name, value.encode("latin-1", "replace")) for name, value in headers]
    if close:
        sent.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": sent})
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


# -- who is calling ------------------------------------------------------------

_CALLER_KEY = "callgate.caller"
_CURRENT: ContextVar[Caller | None] = ContextVar("callgate_mcp_caller", default=None)


@dataclass(eq=False)
class Caller:
    """The authenticated caller of one HTTP request, kept in its ASGI scope.

    Attributes:
        principal: who the request comes from (as the authenticate function built it).
        needed_scopes: set while the request is answered when its call lacked
            scopes and the answer may say so in HTTP (see :meth:`challenge`).
    """

    principal: Principal
    needed_scopes: tuple[str, ...] | None = None

    def challenge(self, scopes: Iterable[str]) -> None:
        """Answer this request ``403`` with an ``insufficient_scope`` challenge
        naming ``scopes`` (only a plain JSON answer not started yet can be)."""
        self.needed_scopes = tuple(sorted(scopes))


def caller_of(request: object) -> Caller | None:
    """The authenticated caller of the HTTP request a handler serves (the SDK's
    ``ctx.request``); None for stdio, in-memory and unauthenticated HTTP serving."""
    if not isinstance(request, Request):
        return None
    caller = request.scope.get(_CALLER_KEY)
    return caller if isinstance(caller, Caller) else None


def current_caller() -> Caller | None:
    """The caller of the HTTP request this task is serving, for code that runs in
    the request's own task and has no request context (the SDK's lookup of a
    tool's input schema for 2026-07-28 ``Mcp-Param`` headers). A 2025-11-25
    session's handlers run in the session's task, not the request's: they use
    :func:`caller_of`."""
    return _CURRENT.get()


class Challenge(Protocol):
    """Makes the ``WWW-Authenticate`` header of a refused request (RFC 6750)."""

    def __call__(
        self,
        *,
        error: str | None = None,
        description: str | None = None,
        scope: str | None = None,
    ) -> str: ...


def _quoted(value: str) -> str:
    # RFC 6750 allows neither '"' nor '\\' in a value, and printable ASCII only.
    safe = value.replace('"', "'").replace("\\", "/")
    return '"' + "".join(c if " " <= c <= "~" else "?" for c in safe) + '"'


def bearer_challenge(
    *, error: str | None = None, description: str | None = None, scope: str | None = None
) -> str:
    """The default challenge: ``Bearer realm="callgate"`` and what went wrong."""
    params: list[tuple[str, str | None]] = [
        ("realm", "callgate"),
        ("error", error),
        ("error_description", description),
        ("scope", scope),
    ]
    return "Bearer " + ", ".join(f"{name}={_quoted(v)}" for name, v in params if v is not None)


def _identity(principal: Principal) -> str:
    # What a 2025-11-25 session is bound to: the user of the tenant (a refreshed
    # token of the same person keeps the session, whatever its scopes).
    return json.dumps([principal.tenant, principal.user])


class Authentication:
    """ASGI middleware: every request names its caller, or is refused ``401``.

    ``authenticate`` (the approvals API's seam, :mod:`callgate.console.auth`)
    maps the request's headers to a :class:`~callgate.Principal`; the body is
    never read here. Without valid credentials the request gets ``401`` with a
    ``WWW-Authenticate`` header made by ``challenge`` and a JSON-RPC error body,
    and nothing reaches the SDK: ``POST``, ``GET`` (the SSE stream) and
    ``DELETE`` alike. An authenticate function that fails (its identity
    provider unreachable, say) gets ``503``, never a pass.

    With a caller, the request goes on with:

    - the :class:`Caller` in its scope (:func:`caller_of`), which the server
      uses for everything it does for the request;
    - ``scope["user"]`` as the SDK's ``AuthenticatedUser``, whose subject is
      the caller's tenant and user: the SDK binds a 2025-11-25 session to the
      subject that created it and answers any other one ``404 Session not
      found``, as if the session did not exist;
    - a ``403`` with an ``insufficient_scope`` challenge naming the scopes when
      the server called :meth:`Caller.challenge` before the answer started.

    Args:
        app: the Streamable HTTP app.
        authenticate: the request -> its principal (see :data:`Authenticate`).
        challenge: the ``WWW-Authenticate`` value for a refusal.
        public: routes served without credentials (the protected resource
            metadata, say).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticate: Authenticate,
        challenge: Challenge = bearer_challenge,
        public: Sequence[Route] = (),
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.challenge = challenge
        self.public = tuple(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(
            route.matches(scope)[0] is Match.FULL for route in self.public
        ):
            await self.app(scope, receive, send)
            return
        try:
            # No receive channel: an authenticate function reads headers only.
            principal = await authenticate_request(self.authenticate, Request(scope))
        except Unauthenticated as exc:
            logger.info(
                "refused a %s request from %s: %s", scope["method"], _client(scope), exc.description
            )
            header = self.challenge(
                error=exc.error, description=exc.description if exc.error else None
            )
            message = f"Unauthorized: {exc.description}"
            await _answer(
                send,
                401,
                _rpc_error(INVALID_REQUEST, message),
                headers=[(b"www-authenticate", header)],
            )
            return
        except Exception:
            logger.exception("could not authenticate a request from %s", _client(scope))
            message = "The server could not check the request's credentials; try again later."
            await _answer(send, 503, _rpc_error(INTERNAL_ERROR, message))
            return
        caller = Caller(principal)
        scopes = sorted(principal.scopes)
        scope[_CALLER_KEY] = caller
        scope["auth"] = AuthCredentials(scopes)
        # The raw token is nobody's business past this point: it is not kept.
        scope["user"] = AuthenticatedUser(
            AccessToken(token="", client_id="", scopes=scopes, subject=_identity(principal))
        )

        async def send_challenged(message: Message) -> None:
            if message["type"] == "http.response.start" and caller.needed_scopes is not None:
                message = self._forbidden(message, caller.needed_scopes)
            await send(message)

        token = _CURRENT.set(caller)
        try:
            await self.app(scope, receive, send_challenged)
        finally:
            _CURRENT.reset(token)

    def _forbidden(self, start: Message, scopes: tuple[str, ...]) -> Message:
        """``start`` as a ``403`` with the ``insufficient_scope`` challenge, when it
        starts a plain JSON answer (an SSE stream answers as it can)."""
        headers = list(start.get("headers", ()))
        content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
        if not content_type.startswith(b"application/json"):
            return start
        header = self.challenge(
            error="insufficient_scope",
            description=f"the call needs the scopes {' '.join(scopes)}",
            scope=" ".join(scopes),
        )
        headers.append((b"www-authenticate", header.encode("latin-1", "replace")))
        return {**start, "status": 403, "headers": headers}


# -- the app ---------------------------------------------------------------------


def _security(host: str) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding, for loopback and other hosts."""
    if host in LOOPBACK_HOSTS:
        return TransportSecuritySettings(
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return TransportSecuritySettings(
        allowed_hosts=[host, f"{host}:*"],
        allowed_origins=[f"http://{host}:*", f"https://{host}:*", f"https://{host}"],
    )


def streamable_http_app(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    resumable: bool = True,
    event_store: MemoryEventStore | None = None,
    retry_ms: int = SSE_RETRY_MS,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    authenticate: Authenticate | None = None,
    challenge: Challenge = bearer_challenge,
    routes: Sequence[Route] = (),
) -> Starlette:
    """An ASGI app serving ``server`` over Streamable HTTP at ``/mcp``.

    Requests whose Host or Origin header does not name ``host`` (or loopback,
    when ``host`` is loopback) are refused, against DNS rebinding. Run the
    app's lifespan (uvicorn does) before serving requests.

    With ``authenticate`` every request to the endpoint must carry credentials
    it accepts (else ``401`` with ``WWW-Authenticate``), and is served for the
    principal it returns; see :class:`~callgate.mcp._http.Authentication`.
    Without it every request is served for the server's fixed principal.

    2025-11-25 SSE streams are resumable: each POST stream opens with a
    priming event (an id, empty data, ``retry: retry_ms``), every event has an
    id, and a client whose stream dropped gets what it missed by reconnecting
    with ``GET`` and ``Last-Event-ID`` on the same session (see
    :mod:`callgate.mcp._events`).

    Args:
        server: the MCP server to serve.
        host: the host clients name (Host and Origin checks).
        resumable: False serves SSE streams without event ids (nothing stored).
        event_store: where the events are kept, to size it; by default a
            :class:`MemoryEventStore` with its default bounds, for this app only.
        retry_ms: how long a client waits before reconnecting (the SSE ``retry``
            field), in milliseconds.
        body_timeout: seconds a client has to send a request's whole body
            (``408`` after that). Request bodies, duplicate request ids and
            session ids on error responses are handled by
            :class:`~callgate.mcp._http.HttpEdge`.
        authenticate: the request -> its caller (the approvals API's seam,
            :data:`callgate.console.Authenticate`): sync or async, None or
            :class:`~callgate.console.auth.Unauthenticated` for no valid
            credentials. None: no authentication.
        challenge: the ``WWW-Authenticate`` value of a refusal, from its
            ``error``, ``description`` and ``scope`` (keywords); by default
            ``Bearer realm="callgate"`` and those.
        routes: more routes, served without credentials (e.g. the protected
            resource metadata at ``/.well-known/oauth-protected-resource``).

    Raises:
        ValueError: no ``authenticate`` for a server built without a principal
            (no request could be served).
    """
    # A server of build_server's without a principal serves authenticated callers only.
    if authenticate is None and getattr(server, "fixed_principal", ...) is None:
        raise ValueError(
            "this server has no principal of its own: serve it with authenticate=..., "
            "or build it with principal=..."
        )
    store = None
    if resumable:
        store = event_store if event_store is not None else MemoryEventStore()
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=_security(host),
        event_store=store,
        retry_interval=retry_ms if store is not None else None,
        custom_starlette_routes=list(routes) or None,
    )
    if store is not None:
        app.add_middleware(SessionEvents, store=store)
    # Added after, so it runs before: before the SDK reads a body or opens a session.
    app.add_middleware(HttpEdge, body_timeout=body_timeout)
    if authenticate is not None:
        # Outermost: a request without credentials has its body left unread.
        app.add_middleware(
            Authentication, authenticate=authenticate, challenge=challenge, public=routes
        )
    return app
