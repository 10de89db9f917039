"""The SQL store's records of the human loop: approvals, previews, session taints, tasks.

A mixin of :class:`~callgate.store.sql.SQLStore`, kept apart to keep each module
about one thing; it needs only the store's transactions (``_begin``) and dialect.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import fields, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, Table, Update, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.clock import Clock
from callgate.store.base import (
    ACTIVE_TASK_STATUSES,
    ApprovalRecord,
    ApprovalState,
    PreviewRecord,
    Taint,
    TaskRecord,
    TaskStatus,
)
from callgate.store.tables import approvals, as_utc, previews, session_taints, tasks

_INTERNAL_ERROR = -32603  # JSON-RPC "internal error": how an abandoned task failed


class HumanLoopRecords:
    """Approvals, previews, session taints and tasks on the store's connections."""

    _dialect: str
    clock: Clock

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT that knows ON CONFLICT (both backends spell it alike)."""
        if self._dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    # approvals ---------------------------------------------------------------
    async def create_approval(self, record: ApprovalRecord) -> None:
        """Insert a new approval.

        Raises:
            ValueError: An approval with this ``id`` exists already.
        """
        row = _approval_row(record)
        await self._insert_once(approvals, row, f"approval {record.id!r} exists already")

    async def create_pending_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """File ``record`` unless a live pending approval is bound to the same request.

        One write transaction looks and inserts: SQLite runs it under the
        database's write lock (``BEGIN IMMEDIATE``), PostgreSQL under an advisory
        lock on the request, so two replicas filing at once find each other's
        row. (A unique index cannot say "live": a pending approval past its
        expiry stays ``pending`` and must not block a new one.)

        Raises:
            ValueError: An approval with this ``id`` exists already.
        """
        now = self.clock.now()
        tool, args_hash, user, tenant = record.tool, record.args_hash, record.user, record.tenant
        live = (
            select(approvals)
            .where(
                *_same_request(tool, args_hash, user, tenant),
                approvals.c.state == "pending",
                approvals.c.expires_at > now,
            )
            .order_by(*self._newest_first())
            .limit(1)
        )
        row = _approval_row(record)
        async with self._begin(write=True) as conn:
            if self._dialect == "postgresql":
                request = json.dumps([tool, args_hash, user, tenant])
                await self._pg_lock(conn, f"approval:{request}")
            existing = (await conn.execute(live)).first()
            if existing is not None:
                return ApprovalRecord(**existing._asdict())
            inserted = await conn.execute(
                self._insert(approvals)
                .values(row)
                .on_conflict_do_nothing(index_elements=[approvals.c.id])
                .returning(approvals.c.id)
            )
            if inserted.first() is None:
                raise ValueError(f"approval {record.id!r} exists already")
        return record

    async def _pg_lock(self, conn: AsyncConnection, name: str) -> None:
        raise NotImplementedError  # provided by SQLStore

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """The record, whatever its state or expiry; None if unknown."""
        stmt = select(approvals).where(approvals.c.id == approval_id)
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else ApprovalRecord(**row._asdict())

    async def list_approvals(
        self,
        *,
        state: ApprovalState | None = None,
        tenant: str | None = None,
        limit: int = 100,
        live_at: datetime | None = None,
        expired_at: datetime | None = None,
        settled_at: datetime | None = None,
        oldest_first: bool = False,
    ) -> list[ApprovalRecord]:
        """Newest first (by ``created_at``, then ``id``; ``oldest_first``: the
        reverse), optionally filtered; see :meth:`Store.list_approvals`."""
        stmt = select(approvals).order_by(*self._newest_first(reverse=oldest_first)).limit(limit)
        if live_at is not None:
            stmt = stmt.where(approvals.c.expires_at > as_utc(live_at))
        if expired_at is not None:
            stmt = stmt.where(
                approvals.c.state.in_(("pending", "approved")),
                approvals.c.expires_at <= as_utc(expired_at),
            )
        if settled_at is not None:
            stmt = stmt.where(
                or_(approvals.c.state != "pending", approvals.c.expires_at <= as_utc(settled_at))
            )
        if state is not None:
            stmt = stmt.where(approvals.c.state == state)
        if tenant is not None:
            stmt = stmt.where(approvals.c.tenant == tenant)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return [ApprovalRecord(**row._asdict()) for row in rows]

    async def find_approval(
        self, *, tool: str, args_hash: str, user: str, tenant: str | None
    ) -> ApprovalRecord | None:
        """The newest approval bound to exactly this call (any state)."""
        stmt = (
            select(approvals)
            .where(*_same_request(tool, args_hash, user, tenant))
            .order_by(*self._newest_first())
            .limit(1)
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else ApprovalRecord(**row._asdict())

    async def decide_approval(
        self,
        approval_id: str,
        *,
        state: Literal["approved", "denied"],
        decided_by: str,
        note: str | None,
        at: datetime,
    ) -> ApprovalRecord | None:
        """Move a ``pending``, unexpired approval to ``state`` atomically.

        One conditional UPDATE: across processes and replicas, exactly one of
        several concurrent deciders matches the row.

        Returns:
            The updated record, or None when it was not pending (already
            decided, used, expired or unknown).
        """
        at = as_utc(at)
        stmt = (
            update(approvals)
            .where(
                approvals.c.id == approval_id,
                approvals.c.state == "pending",
                approvals.c.expires_at > at,
            )
            .values(state=state, decided_by=decided_by, decided_at=at, note=note)
            .returning(*approvals.c)
        )
        async with self._begin(write=True) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else ApprovalRecord(**row._asdict())

    async def consume_approval(self, approval_id: str, *, call_id: str, at: datetime) -> bool:
        """Move an ``approved``, unexpired approval to ``used`` atomically; True
        for exactly one caller, across processes and replicas."""
        stmt = (
            update(approvals)
            .where(
                approvals.c.id == approval_id,
                approvals.c.state == "approved",
                approvals.c.expires_at > as_utc(at),
            )
            .values(state="used", used_by_call=call_id)
        )
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def release_approval(self, approval_id: str, *, call_id: str) -> bool:
        """Give back an approval ``call_id`` used without effect (``used`` -> ``approved``)."""
        stmt = (
            update(approvals)
            .where(
                approvals.c.id == approval_id,
                approvals.c.state == "used",
                approvals.c.used_by_call == call_id,
            )
            .values(state="approved", used_by_call=None)
        )
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def set_approval_result(self, approval_id: str, envelope: dict[str, Any]) -> None:
        """Keep the Envelope of the call that ran once approved.

        Raises:
            KeyError: No approval has this id.
        """
        stmt = update(approvals).where(approvals.c.id == approval_id).values(result=envelope)
        await self._update_one(stmt, f"no approval {approval_id!r}")

    def _newest_first(self, *, reverse: bool = False) -> tuple[Any, ...]:
        # Ties on created_at fall back to the id in code point order on both
        # backends (PostgreSQL would otherwise use the database's locale).
        by_id = approvals.c.id.collate("C") if self._dialect == "postgresql" else approvals.c.id
        if reverse:
            return approvals.c.created_at.asc(), by_id.asc()
        return approvals.c.created_at.desc(), by_id.desc()

    # previews ---------------------------------------------------------------
    async def create_preview(self, record: PreviewRecord) -> None:
        """Insert a preview.

        Raises:
            ValueError: A preview with this ``id`` exists already.
        """
        row = {f.name: getattr(record, f.name) for f in fields(PreviewRecord)}
        row["created_at"] = as_utc(record.created_at)
        row["expires_at"] = as_utc(record.expires_at)
        await self._insert_once(previews, row, f"preview {record.id!r} exists already")

    async def get_preview(self, preview_id: str) -> PreviewRecord | None:
        """The preview, even if expired (callers check ``expires_at``); None if unknown."""
        stmt = select(previews).where(previews.c.id == preview_id)
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else PreviewRecord(**row._asdict())

    async def set_preview_approval(self, preview_id: str, approval_id: str) -> None:
        """Link the approval filed for applying this preview.

        Raises:
            KeyError: No preview has this id.
        """
        stmt = update(previews).where(previews.c.id == preview_id).values(approval_id=approval_id)
        await self._update_one(stmt, f"no preview {preview_id!r}")

    # session taints -----------------------------------------------------------
    async def add_session_taint(
        self, session_id: str, taint: Taint, tool: str, at: datetime
    ) -> None:
        """Note that the session's context now holds ``taint`` (first tool kept)."""
        row = {"session_id": session_id, "taint": taint, "tool": tool, "first_at": as_utc(at)}
        stmt = (
            self._insert(session_taints)
            .values(row)
            .on_conflict_do_nothing(
                index_elements=[session_taints.c.session_id, session_taints.c.taint]
            )
        )
        async with self._begin(write=True) as conn:
            await conn.execute(stmt)

    async def _read_fast(
        self, sql: str, parameters: tuple[Any, ...]
    ) -> list[tuple[Any, ...]] | None:
        raise NotImplementedError  # provided by SQLStore

    async def session_taints(self, session_id: str) -> dict[str, str]:
        """``{taint: first tool that brought it}`` for the session."""
        fast = await self._read_fast(
            "SELECT taint, tool FROM session_taints WHERE session_id = ?", (session_id,)
        )
        if fast is not None:
            return {str(taint): str(tool) for taint, tool in fast}
        stmt = select(session_taints.c.taint, session_taints.c.tool).where(
            session_taints.c.session_id == session_id
        )
        async with self._begin(write=False) as conn:
            return dict((await conn.execute(stmt)).all())

    # tasks --------------------------------------------------------------------
    async def create_task(self, record: TaskRecord) -> None:
        """Insert a task.

        Raises:
            ValueError: A task with this ``id`` exists already.
        """
        row = {f.name: getattr(record, f.name) for f in fields(TaskRecord)}
        for name in ("created_at", "updated_at", "expires_at", "lease_until"):
            if row[name] is not None:
                row[name] = as_utc(row[name])
        await self._insert_once(tasks, row, f"task {record.id!r} exists already")

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task whatever its state (callers check ``expires_at``); None if unknown."""
        stmt = select(tasks).where(tasks.c.id == task_id)
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else TaskRecord(**row._asdict())

    async def finish_task(
        self,
        task_id: str,
        *,
        status: TaskStatus,
        at: datetime,
        message: str | None = None,
        call_id: str | None = None,
        envelope: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Move an active task to ``status`` atomically; True for exactly one caller."""
        stmt = (
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status.in_(ACTIVE_TASK_STATUSES))
            .values(
                status=status,
                updated_at=as_utc(at),
                message=message,
                call_id=call_id,
                envelope=envelope,
                error=error,
            )
        )
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def park_task(
        self,
        task_id: str,
        *,
        at: datetime,
        input_requests: dict[str, Any],
        request_state: str | None,
        call_id: str | None = None,
    ) -> bool:
        """Move a ``working`` task to ``input_required`` with its questions."""
        stmt = (
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == "working")
            .values(
                status="input_required",
                updated_at=as_utc(at),
                call_id=call_id,
                input_requests=input_requests,
                responses={},
                request_state=request_state,
                lease_until=None,
            )
        )
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def answer_task(
        self,
        task_id: str,
        responses: dict[str, Any],
        *,
        at: datetime,
        lease_until: datetime | None = None,
    ) -> TaskRecord | None:
        """Record answers to an ``input_required`` task's questions, atomically.

        Read, then write only if nobody wrote meanwhile (``updated_at`` unchanged):
        concurrent answers are retried, never lost or applied twice.

        Raises:
            ValueError: a key is not one of the task's pending questions.
        """
        for _ in range(20):
            current = await self.get_task(task_id)
            if current is None or current.status != "input_required":
                return None
            pending = dict(current.input_requests or {})
            unknown = sorted(set(responses) - set(pending))
            if unknown:
                raise ValueError(f"not a pending input request of this task: {unknown}")
            left = {key: value for key, value in pending.items() if key not in responses}
            answered = {**(current.responses or {}), **responses}
            stamp = max(as_utc(at), current.updated_at + timedelta(microseconds=1))
            stmt = (
                update(tasks)
                .where(
                    tasks.c.id == task_id,
                    tasks.c.status == "input_required",
                    tasks.c.updated_at == current.updated_at,
                )
                .values(
                    status="input_required" if left else "working",
                    updated_at=stamp,
                    input_requests=left,
                    responses=answered,
                    lease_until=None if lease_until is None else as_utc(lease_until),
                )
            )
            async with self._begin(write=True) as conn:
                if (await conn.execute(stmt)).rowcount == 1:
                    return replace(
                        current,
                        status="input_required" if left else "working",
                        updated_at=stamp,
                        input_requests=left,
                        responses=answered,
                        lease_until=lease_until,
                    )
        raise RuntimeError(f"task {task_id!r}: too many concurrent answers")

    async def renew_task_lease(self, task_id: str, *, owner: str, until: datetime) -> bool:
        """Extend a ``working`` task's lease; False once it is not working."""
        stmt = (
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == "working")
            .values(owner=owner, lease_until=as_utc(until))
        )
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def abandon_tasks(self, *, at: datetime, message: str) -> int:
        """Fail every ``working`` task whose lease ran out (its runner died); how many."""
        stmt = (
            update(tasks)
            .where(
                tasks.c.status == "working",
                or_(tasks.c.lease_until.is_(None), tasks.c.lease_until < as_utc(at)),
            )
            .values(
                status="failed",
                updated_at=as_utc(at),
                message=message,
                error={"code": _INTERNAL_ERROR, "message": message},
            )
        )
        async with self._begin(write=True) as conn:
            return int((await conn.execute(stmt)).rowcount)

    # shared write helpers -----------------------------------------------------
    async def _insert_once(self, table: Table, row: dict[str, Any], exists: str) -> None:
        """Insert ``row`` unless its primary key is taken; raise ValueError(exists) if so."""
        stmt = (
            self._insert(table)
            .values(row)
            .on_conflict_do_nothing(index_elements=list(table.primary_key.columns))
            .returning(*table.primary_key.columns)
        )
        async with self._begin(write=True) as conn:
            if (await conn.execute(stmt)).first() is None:
                raise ValueError(exists)

    async def _update_one(self, stmt: Update, missing: str) -> None:
        """Run an UPDATE of one row by key; raise KeyError(missing) if none matched."""
        async with self._begin(write=True) as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise KeyError(missing)


def _approval_row(record: ApprovalRecord) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(ApprovalRecord)}
    row["created_at"] = as_utc(record.created_at)
    row["expires_at"] = as_utc(record.expires_at)
    if record.decided_at is not None:
        row["decided_at"] = as_utc(record.decided_at)
    return row


def _same_request(
    tool: str, args_hash: str, user: str, tenant: str | None
) -> tuple[ColumnElement[bool], ...]:
    """The approvals bound to exactly this request."""
    return (
        approvals.c.tool == tool,
        approvals.c.args_hash == args_hash,
        approvals.c.user == user,
        # `== None` renders IS NULL: a tenantless call matches tenantless rows.
        approvals.c.tenant == tenant,
    )
