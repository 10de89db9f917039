"""The SQL store's reads for the web console and the CLI: the audit filtered and
paged, per-tool durations, runs and tasks listed; and the console's sessions.

A mixin of :class:`~callgate.store.sql.SQLStore`; it needs only the store's
transactions (``_begin``). See :class:`~callgate.store.console_records.ConsoleRecords`.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Table, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.store.base import AuditRecord, RunRecord, TaskRecord
from callgate.store.console_records import (
    MAX_FIGURE_RECORDS,
    AuditQuery,
    ConsoleSession,
    DurationRow,
    Scope,
)
from callgate.store.tables import agent_runs, as_utc, audit, console_sessions, tasks

__all__ = ["SQLConsoleRecords", "audit_statement", "scope_conditions"]


def scope_conditions(table: Table, scope: Scope) -> list[ColumnElement[bool]]:
    """The WHERE conditions that keep ``table``'s rows to ``scope``."""
    return [
        table.c[name].is_(None) if value is None else table.c[name] == value
        for name, value in scope.pins().items()
    ]


def audit_statement(query: AuditQuery) -> Any:
    """The SELECT :meth:`SQLConsoleRecords.search_audit` runs (benchmarks EXPLAIN it)."""
    if query.limit < 1:
        raise ValueError(f"limit must be positive, not {query.limit}")
    where = scope_conditions(audit, query.scope)
    where.extend(audit.c[name] == value for name, value in query.equalities().items())
    if query.since is not None:
        where.append(audit.c.at >= as_utc(query.since))
    if query.until is not None:
        where.append(audit.c.at < as_utc(query.until))
    if query.since is not None and query.until is not None:
        where.extend(_seq_bounds(as_utc(query.since), as_utc(query.until)))
    if query.before is not None:
        where.append(audit.c.seq < query.before)
    return select(audit).where(*where).order_by(audit.c.seq.desc()).limit(query.limit)


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


def _window(since: datetime, until: datetime | None) -> tuple[Any, list[ColumnElement[bool]]]:
    inner = audit.alias("w")
    window = [inner.c.at >= since] + ([] if until is None else [inner.c.at < until])
    # seq + 0: the planners would otherwise answer min/max by walking the primary
    # key from one end and filtering on at (most of the table for a recent window).
    return inner.c.seq + 0, window


def _lowest_seq(since: datetime, until: datetime | None = None) -> Any:
    seq, window = _window(since, until)
    return select(func.min(seq)).where(*window).scalar_subquery()


def _highest_seq(since: datetime, until: datetime) -> Any:
    seq, window = _window(since, until)
    return select(func.max(seq)).where(*window).scalar_subquery()


class SQLConsoleRecords:
    """The console's queries on the store's connections."""

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def search_audit(self, query: AuditQuery) -> list[AuditRecord]:
        stmt = audit_statement(query)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [_audit_record(row._asdict()) for row in rows]

    async def audit_durations(
        self, scope: Scope, *, since: datetime, limit: int = MAX_FIGURE_RECORDS
    ) -> list[DurationRow]:
        stmt = (
            select(audit.c.tool, audit.c.at, audit.c.status, audit.c.outcome, audit.c.duration_ms)
            .where(audit.c.at >= as_utc(since), audit.c.phase == "final")
            # Implied by the time; lets a tenant's read stop at the day's first record.
            .where(audit.c.seq >= _lowest_seq(as_utc(since)))
            .where(*scope_conditions(audit, scope))
            .order_by(audit.c.at.desc())
            .limit(limit)
        )
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            DurationRow(tool=tool, at=at, status=status, outcome=outcome, duration_ms=duration)
            for tool, at, status, outcome, duration in rows
        ]

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
