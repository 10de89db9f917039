"""The SQL store's reads for the web console and the CLI: the audit filtered and
paged, per-tool figures, runs and tasks listed; and the console's sessions.

A mixin of :class:`~callgate.store.sql.SQLStore`; it needs only the store's
transactions (``_begin``). See :class:`~callgate.store.console_records.ConsoleRecords`.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.store.base import AuditRecord, RunRecord, TaskRecord
from callgate.store.console_records import (
    FIGURE_WINDOWS,
    AuditQuery,
    ConsoleSession,
    Scope,
    ToolFigures,
    ToolWindows,
    nearest_rank,
)
from callgate.store.tables import agent_runs, as_utc, audit, console_sessions, tasks

__all__ = [
    "SQLConsoleRecords",
    "audit_statement",
    "scope_conditions",
    "tool_figures_statement",
]

PERCENTILES = (50, 95)


def scope_conditions(table: Table, scope: Scope) -> list[ColumnElement[bool]]:
    """The WHERE conditions that keep ``table``'s rows to ``scope``."""
    return _pinned(table, scope.pins())


def _pinned(table: Table, pins: Mapping[str, Any]) -> list[ColumnElement[bool]]:
    return [
        table.c[name].is_(None) if value is None else table.c[name] == value
        for name, value in pins.items()
    ]


def audit_statement(query: AuditQuery) -> Any:
    """The SELECT :meth:`SQLConsoleRecords.search_audit` runs (benchmarks EXPLAIN it)."""
    if query.limit < 1:
        raise ValueError(f"limit must be positive, not {query.limit}")
    where = scope_conditions(audit, query.scope)
    wanted = query.equalities()
    narrow = any(name not in _FEW_VALUES for name in wanted)
    where.extend(
        _unindexed(audit.c[name]) == value
        if narrow and name in _FEW_VALUES
        else audit.c[name] == value
        for name, value in wanted.items()
    )
    if query.since is not None:
        where.append(audit.c.at >= as_utc(query.since))
    if query.since is not None and query.until is not None:
        where.append(audit.c.at < as_utc(query.until))
        where.extend(_seq_bounds(as_utc(query.since), as_utc(query.until)))
    order = [audit.c.seq.desc()]
    if query.by_time:
        order.insert(0, audit.c.at.desc())
        if query.until is not None:
            where.append(_before_in_time(as_utc(query.until), query.before))
        elif query.before is not None:
            where.append(_before_in_time(None, query.before))
    elif query.before is not None:
        where.append(audit.c.seq < query.before)
    return select(audit).where(*where).order_by(*order).limit(query.limit)


def _before_in_time(until: datetime | None, before: int | None) -> ColumnElement[bool]:
    """Records before ``until`` (if given) and, given a cursor, before the record
    ``before`` in time order: ``(at, seq) <`` the lower of ``(until, 0)`` and the
    cursor's ``(at, seq)`` (NULL, so nothing, when there is no record ``before``).

    One row-value bound, not ``at < until`` beside the cursor's: given both,
    SQLite bounded its walk of ``(at, seq)`` by ``until`` and filtered its way
    down to the cursor, one page longer with every page (18 ms on the 2,000th
    page of 50; a tenth of a millisecond this way, whatever the page).
    """
    if before is None:
        assert until is not None
        return audit.c.at < until
    cursor = audit.alias("cursor")
    at = select(cursor.c.at).where(cursor.c.seq == before).scalar_subquery()
    if until is None:
        return tuple_(audit.c.at, audit.c.seq) < tuple_(at, before)
    past = at >= until
    bound = (case((past, until), else_=at), case((past, 0), else_=before))
    return tuple_(audit.c.at, audit.c.seq) < tuple_(*bound)


_FEW_VALUES = frozenset({"status", "risk", "phase"})
"""Columns of a handful of values: their ``(column, seq)`` indexes find a value
that few records have (or none) without reading the audit, but beside a filter
of many values (a tool, a user) they are the wrong index, and SQLite, which
keeps no statistics unless ``ANALYZE`` runs, cannot tell (it read a tool's
errors through the index of every error: 35 ms instead of 10)."""


def _unindexed(column: Any) -> Any:
    """``column || ''``: the same value, which no index of ``column`` serves."""
    return column.concat("")


def _seq_bounds(since: datetime, until: datetime) -> list[ColumnElement[bool]]:
    """``seq`` between the lowest and the highest ``seq`` of the records at or after
    ``since`` and before ``until``: implied by the time window, and what lets a time
    filter read a page newest first.

    ``seq`` follows ``at`` closely but not strictly (a record's time is its call's,
    its ``seq`` its commit's; a backlog commits late), and no planner knows they
    go together: given a window in the past, SQLite read every record of the
    window and sorted them, PostgreSQL walked back from the newest record to the
    window (hundreds of milliseconds at a million records; docs/console-queries.md).
    Each bound reads the window's entries of the ``(at, seq)`` index and nothing
    else, so its cost grows with the window, not with the audit.
    """
    return [audit.c.seq >= _lowest_seq(since, until), audit.c.seq <= _highest_seq(since, until)]


def _window(
    since: datetime | ColumnElement[datetime], until: datetime | None
) -> tuple[Any, list[ColumnElement[bool]]]:
    inner = audit.alias("w")
    window = [inner.c.at >= since] + ([] if until is None else [inner.c.at < until])
    # seq + 0: the planners would otherwise answer min/max by walking the primary
    # key from one end and filtering on at (most of the table for a recent window).
    return inner.c.seq + 0, window


def _lowest_seq(since: datetime | ColumnElement[datetime], until: datetime | None = None) -> Any:
    seq, window = _window(since, until)
    return select(func.min(seq)).where(*window).scalar_subquery()


def _highest_seq(since: datetime, until: datetime) -> Any:
    seq, window = _window(since, until)
    return select(func.max(seq)).where(*window).scalar_subquery()


def tool_figures_statement(scope: Scope, now: datetime) -> Any:
    """The SELECT :meth:`SQLConsoleRecords.tool_figures` runs, its values bound
    (benchmarks EXPLAIN it). See :func:`_figures_statement`."""
    stmt, values = _figures_query(scope, now)
    return stmt.params(values)


def _figures_query(scope: Scope, now: datetime) -> tuple[Any, dict[str, Any]]:
    now = as_utc(now)
    pins = scope.pins()
    values: dict[str, Any] = {
        "hour": now - FIGURE_WINDOWS["hour"],
        "day": now - FIGURE_WINDOWS["day"],
    }
    values.update((f"pin_{name}", value) for name, value in pins.items() if value is not None)
    shape = tuple((name, value is None) for name, value in pins.items())
    return _figures_statement(shape), values


@functools.lru_cache(maxsize=16)
def _figures_statement(shape: tuple[tuple[str, bool], ...]) -> Any:
    """The figures' SELECT for a scope of this shape (the pinned fields, and
    whether each is pinned to None), with ``:hour``, ``:day`` and ``:pin_<field>``
    to bind: built once, as it takes longer to build than SQLite to run at a
    small day. It returns O(tools) rows, of two parts (``part``):

    - ``calls``: per tool and error kind (``kind`` None: not an error), the
      records of the hour (``hour_n``) and of the day (``day_n``);
    - ``rank``: the records whose duration is at a percentile's nearest rank
      (:func:`~callgate.store.console_records.nearest_rank`) among the tool's
      durations of the day (``day_rank`` of ``day_n``) or of the hour
      (``hour_rank`` of ``hour_n``, None for a record before the hour).

    The day's records are read once (a CTE used twice, which both SQLite and
    PostgreSQL materialize), and sorted once by tool and duration: the hour's
    ranks are running counts of the hour's records in the day's order. Every
    record counts; nothing is sampled.
    """
    hour, day = bindparam("hour", type_=audit.c.at.type), bindparam("day", type_=audit.c.at.type)
    # scope_conditions, with the scope's values bound at execution.
    where = _pinned(
        audit, {name: None if is_none else bindparam(f"pin_{name}") for name, is_none in shape}
    )
    records = (
        select(
            audit.c.tool,
            case((audit.c.status == "error", func.coalesce(audit.c.outcome, "error"))).label(
                "kind"
            ),
            case((audit.c.at >= hour, 1), else_=0).label("recent"),
            audit.c.duration_ms,
        )
        # phase unindexed: a day's final records are most of the day's records,
        # read through (at, seq) or by seq; through (phase, seq), SQLite fetched
        # each row out of order (twice the time).
        .where(audit.c.at >= day, _unindexed(audit.c.phase) == "final")
        # Implied by the time; lets a tenant's read stop at the day's first record.
        .where(audit.c.seq >= _lowest_seq(day), *where)
        .cte("day_records")
    )
    calls = select(
        literal_column("'calls'").label("part"),
        records.c.tool,
        records.c.kind,
        func.sum(records.c.recent).label("hour_n"),
        func.count().label("day_n"),
        cast(null(), Integer).label("hour_rank"),
        cast(null(), Integer).label("day_rank"),
        cast(null(), Float).label("duration_ms"),
    ).group_by(records.c.tool, records.c.kind)
    # One order for all four (one sort), in two frames: up to the row (ROWS, not
    # the default RANGE, so tied durations get successive ranks) and the whole
    # tool. Functions of one window definition are computed in one pass.
    order: Any = {"partition_by": records.c.tool, "order_by": records.c.duration_ms}
    running, whole = {**order, "rows": (None, 0)}, {**order, "rows": (None, None)}
    ranked = (
        select(
            records.c.tool,
            records.c.recent,
            records.c.duration_ms,
            func.sum(records.c.recent).over(**whole).label("hour_n"),
            func.count().over(**whole).label("day_n"),
            func.sum(records.c.recent).over(**running).label("hour_rank"),
            func.row_number().over(**running).label("day_rank"),
        )
        .where(records.c.duration_ms.is_not(None))
        .subquery("ranked")
    )
    in_hour = ranked.c.recent == 1
    ranks = select(
        literal_column("'rank'"),
        ranked.c.tool,
        cast(null(), String),
        case((in_hour, ranked.c.hour_n)),
        ranked.c.day_n,
        case((in_hour, ranked.c.hour_rank)),
        ranked.c.day_rank,
        ranked.c.duration_ms,
    ).where(
        or_(
            _at_percentile(ranked.c.day_rank, ranked.c.day_n),
            and_(in_hour, _at_percentile(ranked.c.hour_rank, ranked.c.hour_n)),
        )
    )
    return union_all(calls, ranks)


def _at_percentile(rank: Any, count: Any) -> ColumnElement[bool]:
    # nearest_rank in SQL: integer division on both backends.
    return or_(*(rank == (count * percent + 99) // 100 for percent in PERCENTILES))


@dataclass
class _Tally:
    calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    percentiles: dict[int, float] = field(default_factory=dict)

    def figures(self) -> ToolFigures:
        return ToolFigures.of(
            calls=self.calls,
            errors=self.errors,
            p50_ms=self.percentiles.get(50),
            p95_ms=self.percentiles.get(95),
        )


def _tool_figures(rows: Any) -> dict[str, ToolWindows]:
    tallies: dict[str, dict[str, _Tally]] = defaultdict(lambda: defaultdict(_Tally))
    for part, tool, kind, hour_n, day_n, hour_rank, day_rank, duration in rows:
        windows = tallies[tool]
        if part == "calls":
            for name, n in (("hour", hour_n), ("day", day_n)):
                windows[name].calls += n
                if kind is not None:
                    windows[name].errors[kind] += n
            continue
        for name, rank, n in (("hour", hour_rank, hour_n), ("day", day_rank, day_n)):
            for percent in PERCENTILES:
                if rank is not None and rank == nearest_rank(n, percent):
                    windows[name].percentiles[percent] = duration
    return {
        tool: ToolWindows(**{name: windows[name].figures() for name in FIGURE_WINDOWS})
        for tool, windows in tallies.items()
    }


class SQLConsoleRecords:
    """The console's queries on the store's connections."""

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def search_audit(self, query: AuditQuery) -> list[AuditRecord]:
        stmt = audit_statement(query)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [_audit_record(row._asdict()) for row in rows]

    async def tool_figures(self, scope: Scope, *, now: datetime) -> dict[str, ToolWindows]:
        stmt, values = _figures_query(scope, now)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt, values)).all()
        return _tool_figures(rows)

    async def list_runs(
        self, scope: Scope, *, before: datetime | None = None, limit: int = 50
    ) -> list[RunRecord]:
        stmt = select(agent_runs).where(*scope_conditions(agent_runs, scope))
        if before is not None:
            stmt = stmt.where(agent_runs.c.created_at < as_utc(before))
        stmt = stmt.order_by(agent_runs.c.created_at.desc(), agent_runs.c.id).limit(limit)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [RunRecord(**row._asdict()) for row in rows]

    async def list_tasks(self, scope: Scope, *, limit: int = 50) -> list[TaskRecord]:
        stmt = (
            select(tasks)
            .where(*scope_conditions(tasks, scope))
            .order_by(tasks.c.created_at.desc(), tasks.c.id)
            .limit(limit)
        )
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [TaskRecord(**row._asdict()) for row in rows]

    # sessions ------------------------------------------------------------------
    async def create_console_session(self, record: ConsoleSession) -> None:
        row = {f.name: getattr(record, f.name) for f in fields(ConsoleSession)}
        row["created_at"] = as_utc(record.created_at)
        row["expires_at"] = as_utc(record.expires_at)
        async with self._begin(write=True) as conn:
            await conn.execute(
                delete(console_sessions).where(console_sessions.c.expires_at < row["created_at"])
            )
            await conn.execute(insert(console_sessions).values(row))

    async def get_console_session(self, session_id: str, *, at: datetime) -> ConsoleSession | None:
        stmt = select(console_sessions).where(
            console_sessions.c.id == session_id,
            console_sessions.c.kind == "session",
            console_sessions.c.expires_at > as_utc(at),
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else ConsoleSession(**row._asdict())

    async def take_console_login(self, login_id: str, *, at: datetime) -> ConsoleSession | None:
        # DELETE ... RETURNING: of two racing requests, only one deletes the row.
        stmt = (
            delete(console_sessions)
            .where(
                console_sessions.c.id == login_id,
                console_sessions.c.kind == "login",
                console_sessions.c.expires_at > as_utc(at),
            )
            .returning(*console_sessions.c)
        )
        async with self._begin(write=True) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else ConsoleSession(**row._asdict())

    async def delete_console_session(self, session_id: str) -> None:
        async with self._begin(write=True) as conn:
            await conn.execute(delete(console_sessions).where(console_sessions.c.id == session_id))


def _audit_record(values: dict[str, Any]) -> AuditRecord:
    values["dropped_fields"] = tuple(values["dropped_fields"])
    return AuditRecord(**values)
