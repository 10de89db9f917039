"""Resumable SSE streams for 2025-11-25 Streamable HTTP: a bounded event store.

With an event store the SDK's transport gives every SSE event an id, opens each
POST stream with a priming event (an id, empty data, and the ``retry`` interval)
and, when a client reconnects with ``GET`` and ``Last-Event-ID``, asks the store
to replay what that stream carried after the id. :class:`MemoryEventStore` is
that store; 2026-07-28 requests are stateless and never reach it.

It lives in this process's memory, which is the right place: a 2025-11-25
session is served by the one process that created it (its transport, its
request streams and its server task are all here), so a replica that does not
hold the session could not resume it anyway.

Sessions. The SDK hands the store a stream id that is the JSON-RPC request id
(or one name for the standalone GET stream), the same in every session, and
gives it no session. :class:`SessionEvents`, an ASGI middleware, tells the store
which session a request belongs to (through a context variable that the
session's tasks inherit), so streams of different sessions never mix and an
event id replays only on its own session.

Bounds (see :class:`MemoryEventStore`): a cap on events per stream, on events
and on bytes in total (oldest first), a time to live for idle streams, and a
session's events are dropped when the client ends it (``DELETE``).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MemoryEventStore", "SessionEvents"]

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


def session_and_version(scope: Scope) -> tuple[str | None, str | None]:
    """The ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` headers of a request."""
    session: str | None = None
    version: str | None = None
    for name, value in scope["headers"]:
        if name == _SESSION_HEADER:
            session = value.decode("latin-1")
        elif name == _VERSION_HEADER:
            version = value.decode("latin-1")
    return session, version


class _SessionRef:
    """The session of one HTTP request; the opening request learns its id from
    the response, and the session's tasks (which inherit it) see it from then on."""

    __slots__ = ("session_id",)

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id


_CURRENT: ContextVar[_SessionRef | None] = ContextVar("callgate_sse_session", default=None)

# A session id once known; before that, the opening request's ref; None when no
# SessionEvents middleware runs (all events then share one space).
_SessionKey = str | _SessionRef | None


def _current_key() -> _SessionKey:
    ref = _CURRENT.get()
    if ref is None:
        return None
    return ref.session_id if ref.session_id is not None else ref


@dataclass(eq=False)
class _Stream:
    key: _SessionKey
    stream_id: StreamId
    token: str
    touched: float
    events: deque[_Event] = field(default_factory=deque)
    next_seq: int = 1
    done: bool = False  # the request's response is stored: nothing follows it


@dataclass(eq=False)
class _Event:
    stream: _Stream
    seq: int
    data: bytes | None  # the message as JSON; None for a priming event

    @property
    def id(self) -> EventId:
        return f"{self.stream.token}:{self.seq}"

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0


class MemoryEventStore(EventStore):
    """The SDK's :class:`EventStore`, in memory, bounded, one per server process.

    Event ids are ``<stream token>:<n>``: the token is 128 random bits made
    per stream (so ids never collide across streams or sessions, and cannot be
    guessed), ``n`` counts the stream's events. A replay sends the stream's
    stored messages after the id and nothing else; an unknown id, one of
    another session, or one whose stream expired replays nothing (the SDK then
    ends the GET stream). A stream whose response has been stored is complete:
    its replay ends the GET stream after the response instead of waiting for
    more.

    Bounds, all enforced as events are stored (oldest events go first):

    - ``max_events_per_stream`` events per stream;
    - ``max_events`` events and ``max_bytes`` bytes of JSON in total (the
      newest event is always kept, even if alone it exceeds ``max_bytes``);
    - a stream with no new event for ``ttl`` seconds is dropped (by default
      the SDK's session idle timeout, after which the session is gone too);
    - a session's streams are dropped when it is deleted (:meth:`forget_session`,
      called by :class:`SessionEvents`).

    If the caps dropped some events a client missed, the rest are replayed
    (the response, being the newest, goes last).

    Args:
        max_events_per_stream: events kept per stream.
        max_events: events kept in total.
        max_bytes: bytes of stored JSON kept in total.
        ttl: seconds a stream is kept after its last event.
        clock: monotonic seconds (tests pass their own).

    Raises:
        ValueError: a bound that is not positive.
    """

    def __init__(
        self,
        *,
        max_events_per_stream: int = 500,
        max_events: int = 10_000,
        max_bytes: int = 32 * 1024 * 1024,
        ttl: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min(max_events_per_stream, max_events, max_bytes) < 1 or not ttl > 0:
            raise ValueError("event store bounds must be positive")
        self.max_events_per_stream = max_events_per_stream
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.ttl = ttl
        self._clock = clock
        self._events: OrderedDict[EventId, _Event] = OrderedDict()  # oldest first
        self._bytes = 0
        self._streams: dict[_SessionKey, dict[StreamId, _Stream]] = {}
        self._by_token: dict[str, _Stream] = {}
        self._idle: OrderedDict[_Stream, None] = OrderedDict()  # least recently touched first

    # No __len__: the SDK tests the store for truth, and an empty one must count.
    @property
    def stored_events(self) -> int:
        """The number of events held."""
        return len(self._events)

    @property
    def stored_bytes(self) -> int:
        """The bytes of JSON held."""
        return self._bytes

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep ``message`` (None: a priming event) as the next event of
        ``stream_id`` in the current session, and return its id."""
        now = self._clock()
        self._expire(now)
        key = _current_key()
        streams = self._streams.setdefault(key, {})
        stream = streams.get(stream_id)
        if stream is None or stream.done:  # a request id used again starts afresh
            if stream is not None:
                self._drop(stream)
            stream = _Stream(key, stream_id, secrets.token_urlsafe(16), now)
            streams[stream_id] = stream
            self._by_token[stream.token] = stream
        data = None
        if message is not None:
            data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        event = _Event(stream, stream.next_seq, data)
        stream.next_seq += 1
        stream.events.append(event)
        stream.touched = now
        stream.done = stream_id != GET_STREAM_KEY and isinstance(
            message, JSONRPCResponse | JSONRPCError
        )
        self._idle[stream] = None
        self._idle.move_to_end(stream)
        self._events[event.id] = event
        self._bytes += event.size
        if len(stream.events) > self.max_events_per_stream:
            self._evict(stream.events[0])
        while len(self._events) > 1 and (
            len(self._events) > self.max_events or self._bytes > self.max_bytes
        ):
            self._evict(next(iter(self._events.values())))
        return event.id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the current session's events after ``last_event_id`` on its stream.

        Returns:
            The stream's id, for the SDK to go on forwarding its live events;
            None when the id is unknown here (nothing was sent) or the stream is
            complete.
        """
        self._expire(self._clock())
        token, _, seq = last_event_id.rpartition(":")
        stream = self._by_token.get(token)
        # Another session's stream answers exactly like an unknown one.
        if stream is None or not seq.isdecimal() or stream.key != _current_key():
            return None
        after = int(seq)
        # A copy: the store may change while the callback waits on the client.
        missed = [event for event in stream.events if event.seq > after]
        for event in missed:
            if event.data is not None:
                message = jsonrpc_message_adapter.validate_json(event.data)
                await send_callback(EventMessage(message, event.id))
        return None if stream.done else stream.stream_id

    def forget_session(self, session_id: str) -> None:
        """Drop every stream of ``session_id`` (the session has ended)."""
        for stream in list(self._streams.get(session_id, {}).values()):
            self._drop(stream)

    def _bind(self, ref: _SessionRef, session_id: str) -> None:
        """The opening request ``ref`` created ``session_id``: its events are that session's."""
        ref.session_id = session_id
        pending = self._streams.pop(ref, {})
        streams = self._streams.setdefault(session_id, {})
        for stream in pending.values():
            stream.key = session_id
            streams[stream.stream_id] = stream

    def _discard(self, ref: _SessionRef) -> None:
        """The opening request ``ref`` created no session: forget what it stored."""
        for stream in list(self._streams.get(ref, {}).values()):
            self._drop(stream)

    def _evict(self, event: _Event) -> None:
        stream = event.stream
        # Per-stream order is global order, so the oldest event overall is its
        # stream's oldest too.
        stream.events.popleft()
        del self._events[event.id]
        self._bytes -= event.size
        if not stream.events:
            self._drop(stream)

    def _drop(self, stream: _Stream) -> None:
        for event in stream.events:
            del self._events[event.id]
            self._bytes -= event.size
        stream.events.clear()
        self._idle.pop(stream, None)
        self._by_token.pop(stream.token, None)
        streams = self._streams.get(stream.key)
        if streams is not None and streams.get(stream.stream_id) is stream:
            del streams[stream.stream_id]
            if not streams:
                del self._streams[stream.key]

    def _expire(self, now: float) -> None:
        while self._idle:
            stream = next(iter(self._idle))
            if now - stream.touched < self.ttl:
                return
            self._drop(stream)


class SessionEvents:
    """ASGI middleware that tells a :class:`MemoryEventStore` which session each
    request belongs to, and when a session ends.

    A request with ``Mcp-Session-Id`` belongs to that session (the SDK has
    already checked the id against the session's transport before the store
    is used); the request that opens a session learns its id from the
    response headers. A successful ``DELETE`` drops the session's events.
    2026-07-28 requests pass straight through.
    """

    def __init__(self, app: ASGIApp, *, store: MemoryEventStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id, version = session_and_version(scope)
        if version in MODERN_PROTOCOL_VERSIONS:  # stateless: nothing is stored
            await self.app(scope, receive, send)
            return
        ref = _SessionRef(session_id)
        status = 0

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if session_id is None and status < 400:
                    for name, value in message.get("headers", ()):
                        if name.lower() == _SESSION_HEADER:
                            self.store._bind(ref, value.decode("latin-1"))
            await send(message)

        token = _CURRENT.set(ref)
        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            _CURRENT.reset(token)
            if ref.session_id is None:
                self.store._discard(ref)
            elif session_id is not None and scope["method"] == "DELETE" and status == 200:
                self.store.forget_session(session_id)
