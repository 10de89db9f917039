"""The in-memory store's console reads and sessions, with the semantics of
:class:`~callgate.store.sql_console.SQLConsoleRecords` (see
:class:`~callgate.store.console_records.ConsoleRecords`).
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from anyio.lowlevel import checkpoint

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
from callgate.store.tables import as_utc


def _matches(record: AuditRecord, query: AuditQuery) -> bool:
    if not query.scope.holds(record):
        return False
    if any(getattr(record, name) != value for name, value in query.equalities().items()):
        return False
    if query.since is not None and record.at < as_utc(query.since):
        return False
    return query.until is None or record.at < as_utc(query.until)


def _figures(records: Sequence[AuditRecord]) -> ToolFigures:
    errors = Counter(r.outcome or "error" for r in records if r.status == "error")
    durations = sorted(r.duration_ms for r in records if r.duration_ms is not None)

    def percentile(percent: int) -> float | None:
        return durations[nearest_rank(len(durations), percent) - 1] if durations else None

    return ToolFigures.of(
        calls=len(records), errors=errors, p50_ms=percentile(50), p95_ms=percentile(95)
    )


class MemoryConsoleRecords:
    """The console's reads over the store's lists and dicts."""

    _audit: list[AuditRecord]
    _runs: dict[str, RunRecord]
    _tasks: dict[str, TaskRecord]
    _console_sessions: dict[str, ConsoleSession]

    async def search_audit(self, query: AuditQuery) -> list[AuditRecord]:
        await checkpoint()
        if query.limit < 1:
            raise ValueError(f"limit must be positive, not {query.limit}")
        if query.by_time:
            found = self._by_time(query)
        else:
            newest = (
                r for r in reversed(self._audit) if query.before is None or r.seq < query.before
            )
            found = list(itertools.islice((r for r in newest if _matches(r, query)), query.limit))
        return [replace(r, detail=copy.deepcopy(r.detail)) for r in found]

    def _by_time(self, query: AuditQuery) -> list[AuditRecord]:
        found = [r for r in self._audit if _matches(r, query)]
        if query.before is not None:
            cursor = next((r for r in self._audit if r.seq == query.before), None)
            if cursor is None:
                return []
            found = [r for r in found if (r.at, r.seq) < (cursor.at, cursor.seq)]
        found.sort(key=lambda r: (r.at, r.seq), reverse=True)
        return found[: query.limit]

    async def tool_figures(self, scope: Scope, *, now: datetime) -> dict[str, ToolWindows]:
        await checkpoint()
        starts = {name: as_utc(now) - span for name, span in FIGURE_WINDOWS.items()}
        earliest = min(starts.values())
        by_tool: dict[str, list[AuditRecord]] = defaultdict(list)
        for r in self._audit:
            if r.phase == "final" and r.at >= earliest and scope.holds(r):
                by_tool[r.tool].append(r)
        return {
            tool: ToolWindows(
                **{
                    name: _figures([r for r in records if r.at >= start])
                    for name, start in starts.items()
                }
            )
            for tool, records in by_tool.items()
        }

    async def list_runs(
        self, scope: Scope, *, before: datetime | None = None, limit: int = 50
    ) -> list[RunRecord]:
        await checkpoint()
        runs = [
            r
            for r in self._runs.values()
            if scope.holds(r) and (before is None or r.created_at < before)
        ]
        runs.sort(key=lambda r: r.id)
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return [copy.deepcopy(r) for r in runs[:limit]]

    async def list_tasks(self, scope: Scope, *, limit: int = 50) -> list[TaskRecord]:
        await checkpoint()
        found = [t for t in self._tasks.values() if scope.holds(t)]
        found.sort(key=lambda t: t.id)
        found.sort(key=lambda t: t.created_at, reverse=True)
        return [copy.deepcopy(t) for t in found[:limit]]

    async def create_console_session(self, record: ConsoleSession) -> None:
        await checkpoint()
        for key, kept in list(self._console_sessions.items()):
            if kept.expires_at < record.created_at:
                del self._console_sessions[key]
        self._console_sessions[record.id] = copy.deepcopy(record)

    async def get_console_session(self, session_id: str, *, at: datetime) -> ConsoleSession | None:
        await checkpoint()
        record = self._console_sessions.get(session_id)
        if record is None or record.kind != "session" or record.expires_at <= at:
            return None
        return copy.deepcopy(record)

    async def take_console_login(self, login_id: str, *, at: datetime) -> ConsoleSession | None:
        await checkpoint()
        record = self._console_sessions.get(login_id)
        if record is None or record.kind != "login" or record.expires_at <= at:
            return None
        del self._console_sessions[login_id]
        return record

    async def delete_console_session(self, session_id: str) -> None:
        await checkpoint()
        self._console_sessions.pop(session_id, None)
