"""Who is calling, and what a tool may learn about the call it serves."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol, TypeAlias, TypeVar, get_args

import anyio.from_thread

logger = logging.getLogger(__name__)


@dataclass(kw_only=True, frozen=True)
class Principal:
    """The authenticated caller on whose behalf a tool runs.

    Set by the server from authentication, never by the model. ``attributes``
    holds further trusted values (project, locale, ...) that tools can receive
    through trusted fields.
    """

    user: str
    tenant: str | None = None
    scopes: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        user: str,
        tenant: str | None = None,
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "scopes", frozenset(scopes))
        object.__setattr__(self, "roles", frozenset(roles))
        object.__setattr__(self, "attributes", dict(attributes or {}))

    def as_cel(self) -> dict[str, Any]:
        """The principal as policy conditions see it."""
        return {
            "user": self.user,
            "tenant": self.tenant or "",
            "scopes": sorted(self.scopes),
            "roles": sorted(self.roles),
            "attributes": dict(self.attributes),
        }


@dataclass(kw_only=True, frozen=True)
class TrustedField:
    """Marks a parameter the server fills in; the model never sees or sets it.

    ``source`` names where the value comes from (``tenant``, ``user``,
    ``scopes``, ``session_id`` or a key of ``Principal.attributes`` / the gate's
    context). By default the parameter's own name is used, with ``tenant_id``
    and ``user_id`` meaning the principal's tenant and user.
    """

    source: str | None = None


T = TypeVar("T")

Trusted: TypeAlias = Annotated[T, TrustedField()]
"""``tenant_id: Trusted[str]``: a trusted field filled from the principal."""


LogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""The syslog levels MCP log messages use, least severe first."""

LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)


class ToolSink(Protocol):
    """Where a running tool's progress and log messages go (e.g. an MCP client).

    Passed by whoever runs the call (``Gate.call(..., sink=...)``). Delivery is
    best effort: a sink that raises does not fail the tool.
    """

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The tool has done ``progress`` (of ``total``, when known)."""
        ...

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        """The tool logs ``message`` (with JSON-able ``data``) at ``level``."""
        ...


async def _deliver(what: str, send: Callable[[], Awaitable[None]]) -> None:
    try:
        await send()
    except Exception:  # best effort: a gone client must not fail the tool
        logger.warning("could not deliver a tool's %s", what, exc_info=True)


@dataclass(kw_only=True, frozen=True)
class ToolContext:
    """What a tool function receives if it declares a ``ToolContext`` parameter.

    Progress and log messages reach the caller (an MCP client: notifications/progress
    and notifications/message) when it passed a sink; otherwise they go nowhere.
    Async tools await :meth:`report_progress` and :meth:`log`; sync tools, which run
    in a worker thread, use :meth:`report_progress_sync` and :meth:`log_sync`.
    """

    call_id: str
    trace_id: str
    tool: str
    principal: Principal
    session_id: str | None
    idempotency_key: str | None
    deadline: datetime
    """When the gate will stop waiting for the tool (UTC)."""
    attempt: int
    """1 on the first try, higher on retries."""
    sink: ToolSink | None = field(default=None, repr=False, compare=False)
    """Where progress and log messages go; None drops them."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far the tool is (``progress`` of ``total``, if known).

        Progress must increase from one report to the next; a report that does
        not may be dropped.
        """
        sink = self.sink
        if sink is not None:
            await _deliver("progress", lambda: sink.progress(progress, total, message))

    async def log(self, level: LogLevel, message: str, data: Any = None) -> None:
        """Send a log message to the caller (who may filter by level).

        Raises:
            ValueError: ``level`` is not one of :data:`LOG_LEVELS`.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
        sink = self.sink
        if sink is not None:
            await _deliver("log message", lambda: sink.log(level, message, data))

    def report_progress_sync(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """:meth:`report_progress` for a sync tool (called from its worker thread)."""
        if self.sink is not None:
            _from_thread(lambda: self.report_progress(progress, total, message))

    def log_sync(self, level: LogLevel, message: str, data: Any = None) -> None:
        """:meth:`log` for a sync tool (called from its worker thread).

        Raises:
            ValueError: ``level`` is not one of :data:`LOG_LEVELS`.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
        if self.sink is not None:
            _from_thread(lambda: self.log(level, message, data))


def _from_thread(send: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        anyio.from_thread.run(send)
    except Exception:  # not in a worker thread, or the loop is gone: best effort
        logger.warning("could not deliver a sync tool's message", exc_info=True)
