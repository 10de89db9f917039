"""One upstream MCP server, kept connected: started, watched, restarted.

A :class:`Connection` owns a supervisor task that holds the SDK's ``Client``
open (``async with`` must enter and exit in one task), lists the upstream's
tools, and waits for one of: the connection lost (a stdio server's stdout
closed; an HTTP upstream failing :data:`BREAKER_THRESHOLD` calls in a row, the
circuit breaker), a ``list_changed`` from the upstream, or the gateway closing.
A lost connection is re-established with exponential backoff (the probe is a
fresh connect and listing); while it is down, calls are refused at once with
the time of the next try, and the other upstreams are not affected.

Calls are made from the callers' tasks on the supervisor's session. Nothing
here knows about the chain: :mod:`callgate.gateway.proxy` maps outcomes to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from callgate import __version__
from callgate.contract.toolbox import ListingKeeper
from callgate.errors import RuntimeFailure
from callgate.gateway._oauth import ClientCredentials
from callgate.gateway._stdio import stdio_transport
from callgate.gateway._transports import (
    CountingTransport,
    QuietRefusals,
    errlog,
    is_transport_failure,
    safe_reason,
    watched,
)
from callgate.gateway.listing import Listing, fetch_listing
from callgate.gateway.settings import Resolved, UpstreamSettings

__all__ = [
    "BREAKER_THRESHOLD",
    "Connection",
    "Forwarding",
    "State",
    "UpstreamLost",
    "UpstreamUnavailable",
]

logger = logging.getLogger(__name__)
logging.getLogger("mcp.client.streamable_http").addFilter(QuietRefusals())

BREAKER_THRESHOLD = 3
"""Transport failures in a row after which an upstream counts as down."""
BACKOFF_FIRST = 0.5
"""Seconds before the first try to reach an upstream again; doubled on each
failure up to the upstream's ``reconnect_max``."""
RECONNECT_WAIT = 2.0
"""Seconds a call waits for a session being re-established (at start-up: the
upstream's ``connect_timeout``)."""
STABLE = 5.0
"""Seconds a session must have lived for its loss to be reconnected without backoff."""


class State(StrEnum):
    STARTING = "starting"
    READY = "ready"
    DOWN = "down"
    CLOSED = "closed"


class UpstreamUnavailable(RuntimeFailure):
    """The upstream is not connected: nothing was sent."""

    def __init__(self, upstream: str, reason: str, retry_in: float | None) -> None:
        super().__init__(reason)
        self.upstream = upstream
        self.reason = reason
        self.retry_in = retry_in


class UpstreamLost(RuntimeFailure):
    """The connection failed while a request was out: it may have reached the upstream."""

    def __init__(self, upstream: str, reason: str) -> None:
        super().__init__(reason)
        self.upstream = upstream
        self.reason = reason


@dataclass
class Stats:
    """What ``callgate upstreams`` shows of one upstream."""

    calls: int = 0
    failures: int = 0
    connects: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    protocol: str | None = None
    server: str | None = None
    next_retry_at: float | None = None
    """Monotonic time of the next reconnect, while down."""
    tools: int = 0
    tools_kept: bool = False
    """The tools served are the kept listing's: the upstream has not answered yet."""
    renamed: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class Forwarding:
    """Where an upstream's requests and messages for a running call go."""

    progress: ProgressFnT
    log: Callable[[str, Any], Awaitable[None]]
    elicit: Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]
    sample: Callable[
        [types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | types.ErrorData]
    ]


_current: contextvars.ContextVar[Forwarding | None] = contextvars.ContextVar(
    "callgate_upstream_call", default=None
)


class Connection:
    """The supervisor of one upstream (see the module docs).

    Args:
        settings: the upstream's configuration.
        resolved: its environment, headers and credential, read at build time.
        on_listing: called with what the upstream serves after each (re)listing.
    """

    def __init__(
        self,
        settings: UpstreamSettings,
        resolved: Resolved,
        *,
        on_listing: Callable[[Listing], None],
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._resolved = resolved
        self._on_listing = on_listing
        self.state = State.STARTING
        self.stats = Stats()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._lost_reason: str | None = None
        self._relist = False
        self._closing = False
        self._failures_in_row = 0
        self._in_flight: dict[int, Forwarding] = {}
        self._backoff = min(BACKOFF_FIRST, settings.reconnect_max)
        self._was_ready = False
        self._ready_at = 0.0
        self._kept: ListingKeeper | None = None
        self._refused: str | None = None
        """The last 401/403 of an HTTP upstream (what the error then says)."""
        self._transport: CountingTransport | None = None
        self._pending = 0
        """Requests out on the session now (to tell whose connection was refused)."""

    @property
    def secrets(self) -> frozenset[str]:
        """The values read from the environment for this upstream (to scrub)."""
        return self._resolved.secrets

    # lifecycle -----------------------------------------------------------------
    async def start(self, kept: ListingKeeper | None = None) -> None:
        """Start the supervisor and wait for the first listing, at most
        ``startup_wait`` seconds: a slow upstream never holds the gateway up.

        With ``kept``, the upstream's last listing is served from it until the
        upstream answers (its calls answer ``transient`` meanwhile), and every new
        listing is kept there.
        """
        self._kept = kept
        if kept is not None and self._task is None:
            await self._restore(kept)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"callgate upstream {self.name}"
            )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.startup_wait):
                await self._ready.wait()

    @property
    def key(self) -> str:
        """Which configuration a kept listing is for: where the upstream is."""
        return hashlib.sha256(self.settings.target.encode()).hexdigest()[:16]

    async def _restore(self, kept: ListingKeeper) -> None:
        try:
            data = await kept.get_listing(self.name, self.key)
            if data is not None:
                self._on_listing(Listing.from_json(data))
                self.stats.tools_kept = True
        except Exception:  # a store or a kept listing that fails: start without it
            logger.warning(
                "upstream %s: its kept listing could not be read", self.name, exc_info=True
            )

    async def _keep(self, listing: Listing) -> None:
        if self._kept is None:
            return
        try:
            await self._kept.save_listing(self.name, self.key, listing.to_json())
        except Exception:  # keeping it is a help, not a condition of serving
            logger.warning("upstream %s: its listing could not be kept", self.name, exc_info=True)

    async def aclose(self) -> None:
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.state = State.CLOSED

    async def wait_ready(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        return self.state is State.READY

    def lost(self, reason: str) -> None:
        """Mark the session dead: no call is sent on it any more, and the
        supervisor closes it and connects anew."""
        if self.state is State.READY and self._lost_reason is None:
            self._lost_reason = reason
            # Down while the dead session is taken apart; starting once a new one is tried.
            self.state = State.DOWN
            self.stats.next_retry_at = time.monotonic()
            self._ready.clear()
            self._wake.set()

    def relist(self) -> None:
        """The upstream said its tools changed: list them again."""
        self._relist = True
        self._wake.set()

    async def _supervise(self) -> None:
        while not self._closing:
            self.state = State.STARTING
            self._was_ready = False
            self._refused = None
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # any failure to connect or while connected
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                reason = safe_reason(exc, self._resolved.secrets)
                if self._refused is not None:
                    reason = f"the upstream refused the gateway's credential ({self._refused})"
                self._record_error(reason)
            if self._closing:
                break
            self._ready.clear()
            if self._was_ready and time.monotonic() - self._ready_at > STABLE:
                # A session that worked a while and died is re-established at once;
                # the backoff is for an upstream that does not come up (or keeps dying).
                continue
            self.state = State.DOWN
            delay = self._backoff
            self._backoff = min(self.settings.reconnect_max, self._backoff * 2)
            self.stats.next_retry_at = time.monotonic() + delay
            logger.warning(
                "upstream %s is down (%s); reconnecting in %.1f s",
                self.name,
                self.stats.last_error,
                delay,
            )
            await asyncio.sleep(delay)
        self.state = State.CLOSED

    async def _session(self) -> None:
        async with self._client_for() as client:
            self._client = client
            self._lost_reason = None
            try:
                await self._list(client)
                self.stats.connects += 1
                self.stats.protocol = client.protocol_version
                info = client.server_info
                self.stats.server = f"{info.name} {info.version}" if info is not None else None
                self.stats.next_retry_at = None
                self._failures_in_row = 0
                self._backoff = min(BACKOFF_FIRST, self.settings.reconnect_max)
                self.state = State.READY
                self._was_ready = True
                self._ready_at = time.monotonic()
                self._ready.set()
                async with anyio.create_task_group() as tg:
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        tg.start_soon(self._listen, client)
                    while not self._closing:
                        await self._wake.wait()
                        self._wake.clear()
                        if self._lost_reason is not None:
                            reason = self._lost_reason
                            raise ConnectionError(reason)
                        if self._relist:
                            self._relist = False
                            await self._list(client)
                    tg.cancel_scope.cancel()
            finally:
                self._client = None
                self._ready.clear()
                if self.state is State.READY:
                    self.state = State.STARTING

    async def _listen(self, client: Client) -> None:
        """2026-07-28 upstreams announce changes on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(
                tools_list_changed=True, resources_list_changed=True, prompts_list_changed=True
            ) as subscription:
                async for _event in subscription:
                    self.relist()
        except Exception:  # a server without the stream: changes are not announced
            logger.debug("upstream %s: no subscriptions/listen stream", self.name, exc_info=True)

    async def _list(self, client: Client) -> None:
        pinned = self.settings.protocol in MODERN_PROTOCOL_VERSIONS
        listing = await fetch_listing(client, timeout=self.settings.connect_timeout, pinned=pinned)
        self._on_listing(listing)
        self.stats.tools_kept = False
        await self._keep(listing)

    def _record_error(self, reason: str) -> None:
        self.stats.last_error = reason
        self.stats.last_error_at = time.time()

    # the client ------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _client_for(self) -> AsyncIterator[Client]:
        settings = self.settings
        lost = asyncio.Event()
        if settings.command is not None:
            params = StdioServerParameters(
                command=settings.command,
                args=list(settings.args),
                env=dict(self._resolved.env) or None,
                cwd=settings.cwd,
            )
            stdio = stdio_transport(
                params,
                max_answer_bytes=settings.max_answer_bytes,
                errlog=errlog(),
                upstream=self.name,
            )
            transport: Any = watched(stdio, lost)
            http: httpx2.AsyncClient | None = None
        else:
            assert settings.url is not None
            headers = dict(self._resolved.headers)
            auth: httpx2.Auth | None = None
            if self._resolved.token is not None:
                headers["Authorization"] = f"Bearer {self._resolved.token}"
            elif settings.auth is not None and self._resolved.client_secret is not None:
                auth = ClientCredentials(settings.auth, self._resolved.client_secret)

            async def note_refusal(response: httpx2.Response) -> None:
                if response.status_code in (401, 403):
                    challenge = response.headers.get("www-authenticate", "")[:200]
                    self._refused = f"HTTP {response.status_code}" + (
                        f", {challenge}" if challenge else ""
                    )

            self._transport = CountingTransport(max_answer_bytes=settings.max_answer_bytes)
            http = httpx2.AsyncClient(
                transport=self._transport,
                headers=headers,
                auth=auth,
                timeout=httpx2.Timeout(settings.connect_timeout, read=None),
                event_hooks={"response": [note_refusal]},
            )
            transport = streamable_http_client(
                settings.url, http_client=http, max_sse_event_size=settings.max_answer_bytes
            )
        mode = "auto" if settings.protocol == "auto" else settings.protocol
        if mode == "2025-11-25":
            mode = "legacy"
        client = Client(
            transport,
            mode=mode,
            client_info=types.Implementation(name="callgate-gateway", version=__version__),
            message_handler=self._on_message,
            logging_callback=self._on_log,
            elicitation_callback=self._on_elicit,
            sampling_callback=self._on_sample,
            log_level="info",
            cache=None,
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                # asyncio's timeout, not anyio's scope: the client's task groups
                # outlive this block, and an anyio scope must enclose them.
                async with asyncio.timeout(settings.connect_timeout):
                    await stack.enter_async_context(client)

                async def watch() -> None:
                    await lost.wait()
                    self.lost("the upstream process exited")

                watcher = asyncio.get_running_loop().create_task(watch())
                try:
                    yield client
                finally:
                    watcher.cancel()
        finally:
            if http is not None:
                await http.aclose()

    # calls -------------------------------------------------------------------------
    def unavailable(self) -> UpstreamUnavailable:
        retry_in = None
        if self.stats.next_retry_at is not None:
            retry_in = max(0.0, self.stats.next_retry_at - time.monotonic())
        if self.state is State.STARTING:
            reason = "it is starting"
        elif self.state is State.CLOSED:
            reason = "the gateway is shutting down"
        else:
            reason = "it is not answering"
        return UpstreamUnavailable(self.name, reason, retry_in)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        forwarding: Forwarding,
        *,
        wait: float,
    ) -> types.CallToolResult:
        """Call tool ``name`` of the upstream.

        Args:
            wait: seconds to wait for a connection that is being (re)established.

        Raises:
            UpstreamUnavailable: not connected (nothing was sent).
            UpstreamLost: the connection failed with the request out.
            MCPError: the upstream answered with a protocol error.
        """
        result: types.CallToolResult = await self.request(
            lambda client: client.call_tool(name, arguments, progress_callback=forwarding.progress),
            forwarding,
            wait=wait,
        )
        if result.is_error:
            self.stats.failures += 1
        return result

    async def request(
        self,
        send: Callable[[Client], Awaitable[Any]],
        forwarding: Forwarding | None,
        *,
        wait: float,
    ) -> Any:
        """Send one request on the current session (see :meth:`call` for the errors);
        ``forwarding`` receives what the upstream sends back while it runs."""
        client = self._client
        if client is None or self.state is not State.READY:
            if self.stats.connects or self.stats.last_error:
                # A new session after a lost or failed one: worth a short wait, not
                # a long one (the full wait is for the first try at start-up).
                wait = min(wait, RECONNECT_WAIT)
            if self.state is State.STARTING and await self.wait_ready(wait):
                client = self._client
            if client is None or self.state is not State.READY:
                raise self.unavailable()
        self.stats.calls += 1
        key = id(forwarding)
        if forwarding is not None:
            self._in_flight[key] = forwarding
        token = _current.set(forwarding)
        transport = self._transport
        refused = transport.refused if transport is not None else 0
        self._pending += 1
        try:
            result = await send(client)
        except Exception as exc:
            self.stats.failures += 1
            reason = safe_reason(exc, self._resolved.secrets)
            self._record_error(reason)
            if transport is not None and transport.refused > refused and self._pending == 1:
                # The only request out, and the server refused the connection: it
                # never reached the upstream, so nothing can have happened there.
                self.lost(reason)
                raise UpstreamUnavailable(self.name, "it refused the connection", None) from None
            if is_transport_failure(exc):
                self._failures_in_row += 1
                closed = isinstance(exc, MCPError) and exc.code in (
                    CONNECTION_CLOSED,
                    INVALID_REQUEST,
                )
                if closed or self._failures_in_row >= BREAKER_THRESHOLD:
                    self.lost(reason)
                raise UpstreamLost(self.name, reason) from None
            raise
        finally:
            self._pending -= 1
            _current.reset(token)
            self._in_flight.pop(key, None)
        self._failures_in_row = 0
        return result

    # what the upstream sends back ---------------------------------------------------
    def _forwarding(self) -> Forwarding | None:
        """The call an upstream request belongs to: the caller's task at 2026-07-28
        (``input_required`` rounds run there), else the one call in flight."""
        current = _current.get()
        if current is not None:
            return current
        if len(self._in_flight) == 1:
            return next(iter(self._in_flight.values()))
        return None

    async def _on_message(self, message: Any) -> None:
        # 2025-11-25 upstreams announce changes with a notification.
        if isinstance(
            message,
            (
                types.ToolListChangedNotification,
                types.ResourceListChangedNotification,
                types.PromptListChangedNotification,
            ),
        ):
            self.relist()

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        target = self._forwarding()
        if target is not None:
            await target.log(params.level, params.data)
        else:  # not one call's: the gateway's own log keeps it
            text = params.data if isinstance(params.data, str) else repr(params.data)
            for secret in self._resolved.secrets:
                text = text.replace(secret, "[secret]")
            logger.info("upstream %s says (%s): %s", self.name, params.level, text[:2000])

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        target = self._forwarding()
        if target is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message="callgate: this question cannot be matched to one call; "
                "elicitation is forwarded only while one call to this server is running",
            )
        return await target.elicit(params)

    async def _on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        target = self._forwarding()
        if target is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message="callgate: this sampling request cannot be matched to one call",
            )
        return await target.sample(params)
