"""What the web console (and the CLI) read from the store beyond single records:
the audit filtered and paged, per-tool figures, runs and tasks listed, and the
console's sign-in sessions.

Part of :class:`~callgate.store.base.Store` (which extends this protocol). Which
records a principal may see is decided by :func:`callgate.access.record_scope`;
the store only applies the :class:`Scope` it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

if TYPE_CHECKING:  # base extends this protocol
    from callgate.store.base import (
        AuditRecord,
        IdempotencyRecord,
        RunRecord,
        StoredResult,
        TaskRecord,
    )

__all__ = [
    "FIGURE_WINDOWS",
    "AuditQuery",
    "ConsoleRecords",
    "ConsoleSession",
    "ReadRecords",
    "Scope",
    "SessionKind",
    "ToolFigures",
    "ToolWindows",
    "nearest_rank",
]

FIGURE_WINDOWS: Final[Mapping[str, timedelta]] = MappingProxyType(
    {"hour": timedelta(hours=1), "day": timedelta(days=1)}
)
"""The windows of :meth:`ConsoleRecords.tool_figures` (the fields of
:class:`ToolWindows`), each ending now."""


@dataclass(kw_only=True, frozen=True)
class Scope:
    """Whose records a reader may see: made by :func:`callgate.access.record_scope`.

    ``every_tenant`` (an admin) sees all; otherwise only records of ``tenant``
    (None: records without a tenant), and, when ``user`` is set, only that
    user's.
    """

    every_tenant: bool = False
    tenant: str | None = None
    user: str | None = None

    def pins(self) -> dict[str, str | None]:
        """The fields a record must equal to be in this scope (``tenant`` None:
        a record without a tenant); nothing for every tenant."""
        if self.every_tenant:
            return {}
        pinned: dict[str, str | None] = {"tenant": self.tenant}
        if self.user is not None:
            pinned["user"] = self.user
        return pinned

    def holds(self, record: Any) -> bool:
        """Whether ``record`` (anything with ``tenant`` and ``user``) is in this scope."""
        return all(getattr(record, name) == value for name, value in self.pins().items())


@dataclass(kw_only=True, frozen=True)
class AuditQuery:
    """A filter over the audit, newest first, a page at a time.

    Every field narrows; None leaves it open. ``before`` is the cursor: the
    ``seq`` of the previous page's last record; a page goes on after it, in the
    query's order (see :attr:`by_time`).
    """

    scope: Scope
    tenant: str | None = None
    """An admin's narrowing to one tenant (ignored unless the scope is every tenant)."""
    user: str | None = None
    tool: str | None = None
    status: str | None = None
    """``ok``, ``error``, ``pending_approval``, ... (the record's status)."""
    outcome: str | None = None
    """``ok`` or an error kind (``validation``, ``permission``, ...)."""
    risk: str | None = None
    trace_id: str | None = None
    call_id: str | None = None
    phase: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    before: int | None = None
    limit: int = 50

    @property
    def by_time(self) -> bool:
        """Whether pages are ordered by time (``at``, then ``seq``, descending)
        rather than by ``seq`` alone: for one time bound, ``since`` or ``until``.

        ``seq`` follows ``at`` closely but not strictly (a backlog commits late),
        so a ``seq`` order under a time bound can only be read from an index of
        ``seq``, filtering on ``at``: with ``until`` alone, from the newest record
        back to ``until``, as far as the audit is long. In time order, the
        ``(at, seq)`` and ``(tenant, at, seq)`` indexes start the page at the
        bound. A window (both bounds) keeps the ``seq`` order: it is read between
        the lowest and highest ``seq`` of its records.
        """
        return (self.since is None) != (self.until is None)

    def equalities(self) -> dict[str, str]:
        """The filters that ask a field to equal a value (the scope aside); an admin's
        ``tenant`` only when the scope is every tenant."""
        wanted = {name: getattr(self, name) for name in _EQUALITIES}
        if not self.scope.every_tenant:
            del wanted["tenant"]
        return {name: value for name, value in wanted.items() if value is not None}


_EQUALITIES = (
    "tenant",
    "user",
    "tool",
    "status",
    "outcome",
    "risk",
    "trace_id",
    "call_id",
    "phase",
)


def nearest_rank(count: int, percent: int) -> int:
    """The 1-based rank, among ``count`` (1 or more) ordered values, of the
    ``percent`` (1 to 100) percentile by nearest rank: ``ceil(percent / 100 * count)``.

    In integer arithmetic so that SQL computes the same rank (the SQL store picks
    the rows of these ranks in its query; the memory store indexes a sorted list).
    """
    return (percent * count + 99) // 100


@dataclass(kw_only=True, frozen=True)
class ToolFigures:
    """One tool's ``final`` records over one window: how many, the errors by kind,
    and the p50/p95 duration (nearest rank) of those that have a duration."""

    calls: int = 0
    errors: tuple[tuple[str, int], ...] = ()
    """``(kind, count)`` of the records with status ``error``, the kind being the
    outcome (``error`` when it has none); most frequent first, then by kind."""
    p50_ms: float | None = None
    p95_ms: float | None = None
    """None when no record of the window has a duration."""

    @classmethod
    def of(
        cls, *, calls: int, errors: Mapping[str, int], p50_ms: float | None, p95_ms: float | None
    ) -> ToolFigures:
        """Figures with ``errors`` put in their order (kinds counted 0 left out)."""
        ordered = sorted(((k, n) for k, n in errors.items() if n), key=lambda e: (-e[1], e[0]))
        return cls(calls=calls, errors=tuple(ordered), p50_ms=p50_ms, p95_ms=p95_ms)

    @property
    def error_count(self) -> int:
        """Errors of every kind."""
        return sum(n for _, n in self.errors)

    @property
    def error_rate(self) -> float:
        """Errors per call (0 without calls)."""
        return self.error_count / self.calls if self.calls else 0.0


@dataclass(kw_only=True, frozen=True)
class ToolWindows:
    """One tool's figures over each of :data:`FIGURE_WINDOWS`."""

    hour: ToolFigures = field(default_factory=ToolFigures)
    day: ToolFigures = field(default_factory=ToolFigures)


SessionKind = Literal["login", "session"]
"""``login``: a one-time sign-in link not yet used; ``session``: a signed-in browser."""


@dataclass(kw_only=True, frozen=True)
class ConsoleSession:
    """A console sign-in: ``id`` is the SHA-256 (hex) of the secret the browser
    holds (the link's token, or the session cookie), never the secret itself."""

    id: str
    kind: SessionKind
    principal: dict[str, Any]
    """``{"user", "tenant", "scopes", "roles"}``: who signed in, as authenticated."""
    csrf: str
    """The token every state-changing form of this session must carry."""
    created_at: datetime
    expires_at: datetime
    detail: dict[str, Any] = field(default_factory=dict)
    """How the session was made (``{"via": "link"}``, ``{"via": "bearer"}``)."""


class ConsoleRecords(Protocol):
    """The console's reads, and its sessions."""

    async def search_audit(self, query: AuditQuery) -> list[AuditRecord]:
        """Records matching ``query``, newest first (descending ``seq``; by time,
        descending ``(at, seq)``, when :attr:`AuditQuery.by_time`), at most
        ``query.limit``; with ``query.before``, those after that record in this
        order (by time: none when no record has that ``seq``).

        Raises:
            ValueError: ``limit`` is not positive, or a time is naive.
        """
        ...

    async def tool_figures(self, scope: Scope, *, now: datetime) -> dict[str, ToolWindows]:
        """Per tool, the figures of the ``final`` records in ``scope`` over the last
        hour and the last day before ``now`` (a record at a window's start is in
        it); only tools with a record in the day. Every record counts: no sample.

        Raises:
            ValueError: ``now`` is naive.
        """
        ...

    async def list_runs(
        self, scope: Scope, *, before: datetime | None = None, limit: int = 50
    ) -> list[RunRecord]:
        """Agent and code-mode runs in ``scope``, newest first (by ``created_at``),
        created before ``before`` when given, at most ``limit``."""
        ...

    async def list_tasks(self, scope: Scope, *, limit: int = 50) -> list[TaskRecord]:
        """Background calls (MCP tasks) in ``scope``, newest first, at most ``limit``."""
        ...

    async def create_console_session(self, record: ConsoleSession) -> None:
        """Keep a new sign-in (link or session); expired ones are purged here."""
        ...

    async def get_console_session(self, session_id: str, *, at: datetime) -> ConsoleSession | None:
        """The ``session`` with this id, unless it expired before ``at``."""
        ...

    async def take_console_login(self, login_id: str, *, at: datetime) -> ConsoleSession | None:
        """Use a one-time ``login`` link: it is deleted and returned, once, unless
        it expired before ``at``. Two callers racing for it: one gets it."""
        ...

    async def delete_console_session(self, session_id: str) -> None:
        """Sign out: the session is gone (a missing one is no error)."""
        ...


class ReadRecords(ConsoleRecords, Protocol):
    """The part of the store the console reads (``Gate.records()``): its own
    queries and sessions, and single runs, kept results and idempotency records."""

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def get_result(self, ref: str) -> StoredResult | None: ...

    async def get_idempotency(self, scope: str) -> IdempotencyRecord | None: ...
