"""An in-memory :class:`~callgate.store.base.Store` for tests and benchmarks.

It keeps :class:`~callgate.store.sql.SQLStore`'s semantics (expiry, first claim
wins, UTC datetimes, JSON-only payloads, a copy on the way in and out) but
nothing outlives the process.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal

from anyio.lowlevel import checkpoint

from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.store.base import (
    ACTIVE_TASK_STATUSES,
    ApprovalRecord,
    ApprovalState,
    AuditRecord,
    HandleRecord,
    IdempotencyRecord,
    PreviewRecord,
    RunRecord,
    StoredResult,
    Taint,
    TaskRecord,
    TaskStatus,
)
from callgate.store.console_records import ConsoleSession
from callgate.store.memory_console import MemoryConsoleRecords
from callgate.store.memory_search import MemorySearchRecords

__all__ = ["MemoryStore"]


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}; use datetime.now(UTC)")
    return value.astimezone(UTC)


def _json(value: Any) -> Any:
    # A JSON round trip both copies and rejects what a SQL JSON column would.
    return json.loads(json.dumps(value))


class MemoryStore(MemorySearchRecords, MemoryConsoleRecords):
    """The :class:`~callgate.store.base.Store` in a few dicts.

    Every method checkpoints once (as a real store awaits I/O), then runs without
    awaiting, which makes each one atomic in its event loop.
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.url = "memory://"
        self.clock = clock
        """What time it is when deciding what has expired."""
        self._audit: list[AuditRecord] = []
        # Per-session counts, kept as records are appended: the duplicate-call and
        # retry checks ask on every call, and a scan of a long audit costs
        # hundreds of microseconds a call.
        self._session_calls: Counter[tuple[str, str, str | None]] = Counter()
        self._session_retries: Counter[str] = Counter()
        self._idempotency: dict[str, IdempotencyRecord] = {}
        self._results: dict[str, StoredResult] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._previews: dict[str, PreviewRecord] = {}
        self._taints: dict[str, dict[str, str]] = {}
        self._tasks: dict[str, TaskRecord] = {}
        self._runs: dict[str, RunRecord] = {}
        self._listings: dict[str, tuple[str, Any]] = {}
        self._handles: dict[str, HandleRecord] = {}
        self._vectors: dict[tuple[str, str], bytes] = {}
        self._console_sessions: dict[str, ConsoleSession] = {}

    async def __aenter__(self) -> MemoryStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Nothing to connect; the data lives as long as this object."""
        await checkpoint()

    async def close(self) -> None:
        """Nothing to release; the data stays for a later :meth:`open`."""
        await checkpoint()

    async def ping(self) -> None:
        await checkpoint()

    # audit -----------------------------------------------------------------
    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        await checkpoint()
        self._append(records)

    def append_audit_now(self, records: Sequence[AuditRecord]) -> bool:
        """Append records at once, without yielding (always possible here)."""
        self._append(records)
        return True

    def _append(self, records: Sequence[AuditRecord]) -> None:
        # Validate the whole batch first so a bad record appends nothing.
        checked = [(_utc(r.at), _json(r.detail)) for r in records]
        start = len(self._audit) + 1
        self._audit.extend(
            replace(r, at=at, dropped_fields=tuple(r.dropped_fields), detail=detail, seq=start + i)
            for i, (r, (at, detail)) in enumerate(zip(records, checked, strict=True))
        )
        for r in records:
            if r.session_id is None or r.phase != "final":
                continue
            if r.status == "ok":
                self._session_calls[(r.session_id, r.tool, r.args_hash)] += 1
            self._session_retries[r.session_id] += max(r.attempts - 1, 0)

    async def list_audit(
        self, *, tail: int | None = None, call_id: str | None = None
    ) -> list[AuditRecord]:
        await checkpoint()
        if tail is not None and tail < 0:
            raise ValueError(f"tail must be >= 0, not {tail}")
        records = [r for r in self._audit if call_id is None or r.call_id == call_id]
        if tail is not None:
            records = records[len(records) - tail :]
        return [replace(r, detail=_json(r.detail)) for r in records]

    async def count_outcomes(self, tool_prefix: str, *, since: datetime) -> tuple[int, int]:
        await checkpoint()
        finals = [
            r
            for r in self._audit
            if r.phase == "final" and r.tool.startswith(tool_prefix) and r.at >= since
        ]
        return len(finals), sum(1 for r in finals if r.status == "error")

    async def count_session_calls(self, session_id: str, tool: str, args_hash: str) -> int:
        await checkpoint()
        return self._session_calls[(session_id, tool, args_hash)]

    async def session_retries(self, session_id: str) -> int:
        await checkpoint()
        return self._session_retries[session_id]

    # idempotency -----------------------------------------------------------
    async def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        await checkpoint()
        existing = self._live(record.scope)
        if existing is not None:
            return existing
        self._idempotency[record.scope] = replace(
            record,
            created_at=_utc(record.created_at),
            expires_at=_utc(record.expires_at),
            envelope=None if record.envelope is None else _json(record.envelope),
        )
        return None

    async def complete_idempotency(
        self, scope: str, envelope: dict[str, Any], *, call_id: str | None = None
    ) -> None:
        await checkpoint()
        record = self._idempotency.get(scope)
        if record is None or (call_id is not None and record.call_id != call_id):
            raise KeyError(f"no idempotency record for scope {scope!r}")
        self._idempotency[scope] = replace(record, state="done", envelope=_json(envelope))

    async def release_idempotency(self, scope: str, *, call_id: str) -> None:
        await checkpoint()
        record = self._idempotency.get(scope)
        if record is not None and record.call_id == call_id and record.state == "pending":
            del self._idempotency[scope]

    async def get_idempotency(self, scope: str) -> IdempotencyRecord | None:
        await checkpoint()
        return self._live(scope)

    def _live(self, scope: str) -> IdempotencyRecord | None:
        record = self._idempotency.get(scope)
        if record is None or record.expires_at <= self.clock.now():
            return None
        envelope = None if record.envelope is None else _json(record.envelope)
        return replace(record, envelope=envelope)

    # spilled results --------------------------------------------------------
    async def put_result(self, result: StoredResult) -> None:
        await checkpoint()
        if result.ref in self._results:
            raise ValueError(f"result {result.ref!r} is already stored")
        # Kept as JSON text, the caller's when it has one: an immutable copy,
        # parsed into a fresh one on the way out.
        text = json.dumps(result.content) if result.text is None else result.text
        self._results[result.ref] = replace(
            result,
            content=None,
            text=text,
            created_at=_utc(result.created_at),
            expires_at=_utc(result.expires_at),
        )

    async def get_result(self, ref: str) -> StoredResult | None:
        await checkpoint()
        result = self._results.get(ref)
        if result is None or result.expires_at <= self.clock.now():
            return None
        assert result.text is not None
        return replace(result, content=json.loads(result.text))

    # approvals ---------------------------------------------------------------
    async def create_approval(self, record: ApprovalRecord) -> None:
        await checkpoint()
        if record.id in self._approvals:
            raise ValueError(f"approval {record.id!r} exists already")
        self._approvals[record.id] = _copy_approval(record)

    async def create_pending_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        await checkpoint()
        now = self.clock.now()
        request = (record.tool, record.args_hash, record.user, record.tenant)
        for existing in self._approvals.values():
            bound = (existing.tool, existing.args_hash, existing.user, existing.tenant)
            if bound == request and existing.state == "pending" and existing.expires_at > now:
                return existing
        if record.id in self._approvals:
            raise ValueError(f"approval {record.id!r} exists already")
        self._approvals[record.id] = _copy_approval(record)
        return self._approvals[record.id]

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        await checkpoint()
        return self._approvals.get(approval_id)

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
        await checkpoint()
        rows = [
            r
            for r in self._approvals.values()
            if (state is None or r.state == state)
            and (tenant is None or r.tenant == tenant)
            and (live_at is None or r.expires_at > live_at)
            and (
                expired_at is None
                or (r.state in ("pending", "approved") and r.expires_at <= expired_at)
            )
            and (settled_at is None or r.state != "pending" or r.expires_at <= settled_at)
        ]
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=not oldest_first)
        return rows[:limit]

    async def find_approval(
        self, *, tool: str, args_hash: str, user: str, tenant: str | None
    ) -> ApprovalRecord | None:
        await checkpoint()
        rows = [
            r
            for r in self._approvals.values()
            if (r.tool, r.args_hash, r.user, r.tenant) == (tool, args_hash, user, tenant)
        ]
        return max(rows, key=lambda r: (r.created_at, r.id), default=None)

    async def decide_approval(
        self,
        approval_id: str,
        *,
        state: Literal["approved", "denied"],
        decided_by: str,
        note: str | None,
        at: datetime,
    ) -> ApprovalRecord | None:
        await checkpoint()
        record = self._approvals.get(approval_id)
        if record is None or record.state != "pending" or record.expires_at <= _utc(at):
            return None
        updated = replace(
            record, state=state, decided_by=decided_by, decided_at=_utc(at), note=note
        )
        self._approvals[approval_id] = updated
        return updated

    async def consume_approval(self, approval_id: str, *, call_id: str, at: datetime) -> bool:
        await checkpoint()
        record = self._approvals.get(approval_id)
        if record is None or record.state != "approved" or record.expires_at <= _utc(at):
            return False
        self._approvals[approval_id] = replace(record, state="used", used_by_call=call_id)
        return True

    async def release_approval(self, approval_id: str, *, call_id: str) -> bool:
        await checkpoint()
        record = self._approvals.get(approval_id)
        if record is None or record.state != "used" or record.used_by_call != call_id:
            return False
        self._approvals[approval_id] = replace(record, state="approved", used_by_call=None)
        return True

    async def set_approval_result(self, approval_id: str, envelope: dict[str, Any]) -> None:
        await checkpoint()
        record = self._approvals.get(approval_id)
        if record is None:
            raise KeyError(f"no approval {approval_id!r}")
        self._approvals[approval_id] = replace(record, result=_json(envelope))

    # previews ---------------------------------------------------------------
    async def create_preview(self, record: PreviewRecord) -> None:
        await checkpoint()
        if record.id in self._previews:
            raise ValueError(f"preview {record.id!r} exists already")
        self._previews[record.id] = replace(
            record,
            arguments=_json(record.arguments),
            impact=_json(record.impact),
            created_at=_utc(record.created_at),
            expires_at=_utc(record.expires_at),
        )

    async def get_preview(self, preview_id: str) -> PreviewRecord | None:
        await checkpoint()
        return self._previews.get(preview_id)

    async def set_preview_approval(self, preview_id: str, approval_id: str) -> None:
        await checkpoint()
        record = self._previews.get(preview_id)
        if record is None:
            raise KeyError(f"no preview {preview_id!r}")
        self._previews[preview_id] = replace(record, approval_id=approval_id)

    # session taints -----------------------------------------------------------
    async def add_session_taint(
        self, session_id: str, taint: Taint, tool: str, at: datetime
    ) -> None:
        await checkpoint()
        self._taints.setdefault(session_id, {}).setdefault(taint, tool)

    async def session_taints(self, session_id: str) -> dict[str, str]:
        await checkpoint()
        return dict(self._taints.get(session_id, {}))

    # tasks --------------------------------------------------------------------
    async def create_task(self, record: TaskRecord) -> None:
        await checkpoint()
        if record.id in self._tasks:
            raise ValueError(f"task {record.id!r} exists already")
        self._tasks[record.id] = replace(
            record,
            result=_json(record.result),
            error=_json(record.error),
            arguments=_json(record.arguments),
            envelope=_json(record.envelope),
        )

    async def get_task(self, task_id: str) -> TaskRecord | None:
        await checkpoint()
        record = self._tasks.get(task_id)
        if record is None:
            return None
        return replace(
            record,
            result=_json(record.result),
            error=_json(record.error),
            envelope=_json(record.envelope),
        )

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
        await checkpoint()
        record = self._tasks.get(task_id)
        if record is None or record.status not in ACTIVE_TASK_STATUSES:
            return False
        self._tasks[task_id] = replace(
            record,
            status=status,
            updated_at=at,
            message=message,
            call_id=call_id,
            envelope=_json(envelope),
            error=_json(error),
        )
        return True

    async def park_task(
        self,
        task_id: str,
        *,
        at: datetime,
        input_requests: dict[str, Any],
        request_state: str | None,
        call_id: str | None = None,
    ) -> bool:
        await checkpoint()
        record = self._tasks.get(task_id)
        if record is None or record.status != "working":
            return False
        self._tasks[task_id] = replace(
            record,
            status="input_required",
            updated_at=at,
            call_id=call_id,
            input_requests=_json(input_requests),
            responses={},
            request_state=request_state,
            lease_until=None,
        )
        return True

    async def answer_task(
        self,
        task_id: str,
        responses: dict[str, Any],
        *,
        at: datetime,
        lease_until: datetime | None = None,
    ) -> TaskRecord | None:
        await checkpoint()
        record = self._tasks.get(task_id)
        if record is None or record.status != "input_required":
            return None
        pending = dict(record.input_requests or {})
        unknown = sorted(set(responses) - set(pending))
        if unknown:
            raise ValueError(f"not a pending input request of this task: {unknown}")
        answered = {**(record.responses or {}), **_json(responses)}
        left = {key: value for key, value in pending.items() if key not in responses}
        updated = replace(
            record,
            status="input_required" if left else "working",
            updated_at=at,
            input_requests=left,
            responses=answered,
            lease_until=lease_until,
        )
        self._tasks[task_id] = updated
        return replace(updated)

    async def renew_task_lease(self, task_id: str, *, owner: str, until: datetime) -> bool:
        await checkpoint()
        record = self._tasks.get(task_id)
        if record is None or record.status != "working":
            return False
        self._tasks[task_id] = replace(record, owner=owner, lease_until=until)
        return True

    async def abandon_tasks(self, *, at: datetime, message: str) -> int:
        await checkpoint()
        abandoned = [
            record
            for record in self._tasks.values()
            if record.status == "working"
            and (record.lease_until is None or record.lease_until < at)
        ]
        for record in abandoned:
            self._tasks[record.id] = replace(
                record,
                status="failed",
                updated_at=at,
                message=message,
                error={"code": -32603, "message": message},
            )
        return len(abandoned)

    # agent runs ---------------------------------------------------------------
    async def save_run(self, record: RunRecord) -> None:
        await checkpoint()
        existing = self._runs.get(record.id)
        self._runs[record.id] = replace(
            record,
            created_at=existing.created_at if existing is not None else record.created_at,
            state=_json(record.state),
            trace=_json(record.trace),
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        await checkpoint()
        record = self._runs.get(run_id)
        if record is None:
            return None
        return replace(record, state=_json(record.state), trace=_json(record.trace))

    # upstream listings ---------------------------------------------------------
    async def save_listing(self, name: str, key: str, listing: Any) -> None:
        await checkpoint()
        self._listings[name] = (key, _json(listing))

    async def get_listing(self, name: str, key: str) -> Any | None:
        await checkpoint()
        kept = self._listings.get(name)
        return _json(kept[1]) if kept is not None and kept[0] == key else None

    # handles ------------------------------------------------------------------
    async def create_handle(self, record: HandleRecord) -> None:
        await checkpoint()
        now = self.clock.now()
        for expired in [h.id for h in self._handles.values() if h.expires_at <= now]:
            del self._handles[expired]
        if record.id in self._handles:
            raise ValueError(f"handle {record.id!r} exists already")
        self._handles[record.id] = replace(
            record,
            data=_json(record.data),
            created_at=_utc(record.created_at),
            updated_at=_utc(record.updated_at),
            expires_at=_utc(record.expires_at),
        )

    async def get_handle(self, handle_id: str) -> HandleRecord | None:
        await checkpoint()
        record = self._live_handle(handle_id)
        return None if record is None else replace(record, data=_json(record.data))

    async def update_handle(
        self,
        handle_id: str,
        *,
        version: int,
        data: dict[str, Any],
        at: datetime,
        expires_at: datetime,
    ) -> HandleRecord | None:
        await checkpoint()
        record = self._live_handle(handle_id)
        if record is None or record.version != version:
            return None
        updated = replace(
            record,
            data=_json(data),
            updated_at=_utc(at),
            expires_at=_utc(expires_at),
            version=version + 1,
        )
        self._handles[handle_id] = updated
        return replace(updated, data=_json(updated.data))

    async def delete_handle(self, handle_id: str, *, version: int | None = None) -> bool:
        await checkpoint()
        record = self._live_handle(handle_id)
        if record is None or (version is not None and record.version != version):
            return False
        del self._handles[handle_id]
        return True

    def _live_handle(self, handle_id: str) -> HandleRecord | None:
        record = self._handles.get(handle_id)
        if record is None or record.expires_at <= self.clock.now():
            return None
        return record


def _copy_approval(record: ApprovalRecord) -> ApprovalRecord:
    return replace(
        record,
        arguments=_json(record.arguments),
        model_arguments=_json(record.model_arguments),
        impact=_json(record.impact),
        approvers=_json(record.approvers),
        created_at=_utc(record.created_at),
        expires_at=_utc(record.expires_at),
    )
