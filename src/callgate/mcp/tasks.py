"""Long-running tools as durable tasks: the MCP Tasks extension (SEP-2663).

Where the client declares ``io.modelcontextprotocol/tasks`` (in its session
capabilities or in one request's ``_meta``) on the 2026-07-28 wire, a
``tools/call`` of a tool tagged :data:`TASK_TAG` (or
:data:`TASK_REQUIRED_TAG`) answers at once with a task
(``resultType: "task"``); the call itself (the server's ``tools/call`` handler,
so the whole governed chain) runs in the background. ``tasks/get`` reports the
task, with the tool's result inlined once ``completed`` (a tool execution error
is ``completed`` with ``isError``) or a JSON-RPC error once ``failed`` (the tool
crashed: an ``unrecoverable`` outcome). ``tasks/cancel`` cancels it.

Every task lives in the store, not in this process: after a restart a completed
task keeps its result, and one that was running when its process died is
reported ``failed`` with "outcome unknown" (never silently lost). That recovery
assumes one server process per store; with several replicas a task would need a
lease its runner renews (not done yet).

Without the extension the same tools run synchronously within their timeout.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from callgate.contract import Principal
from callgate.runtime.gate import Gate
from callgate.store.base import TaskRecord, TaskStatus

__all__ = ["EXTENSION", "TASK_REQUIRED_TAG", "TASK_TAG", "TaskRunner", "runner_of"]

EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TAG = "task"
"""The tag of a tool that runs as a task where the client declares the extension."""
TASK_REQUIRED_TAG = "task:required"
"""The tag of a tool that runs only as a task: at 2026-07-28, a client that did not
declare the extension gets -32021 (at 2025-11-25 it runs synchronously)."""

OUTCOME_UNKNOWN = (
    "The server stopped while this task was running: its outcome is unknown. "
    "Check the effect before calling the tool again."
)
_INTERNAL_ERROR = -32603
_CALL_META = "callgate/callId"

logger = logging.getLogger(__name__)

_RUNNERS: weakref.WeakKeyDictionary[Server[Any], TaskRunner] = weakref.WeakKeyDictionary()


def runner_of(server: Server[Any]) -> TaskRunner | None:
    """The task runner installed on ``server`` (to stop its tasks), if any."""
    return _RUNNERS.get(server)


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskRunner:
    """Runs task-tagged ``tools/call`` requests in the background, state in the store.

    Install with :meth:`install` (a middleware and the ``tasks/*`` methods);
    :meth:`aclose` stops the calls still running (they will read as failed with
    an unknown outcome, as after a crash).
    """

    def __init__(
        self,
        gate: Gate,
        *,
        principal: Principal,
        wire_to_full: Callable[[str], str],
        ttl: timedelta = timedelta(hours=1),
        poll_interval_ms: int = 500,
    ) -> None:
        self._gate = gate
        self._principal = principal
        self._full = wire_to_full
        self._ttl = ttl
        self._poll_ms = poll_interval_ms
        self.owner = secrets.token_hex(8)
        self._running: dict[str, asyncio.Task[None]] = {}
        self._recovered = False
        self._stopping = False

    def install(self, server: Server[Any]) -> None:
        """Advertise the extension, run task calls and serve ``tasks/get|update|cancel``."""
        _RUNNERS[server] = self
        server.extensions[EXTENSION] = {}
        server.middleware.append(self.middleware)
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/update", types.GetTaskRequestParams, self.update)

    # -- the store ------------------------------------------------------------
    async def _store_ready(self) -> None:
        await self._gate.open()
        if not self._recovered:
            # Active tasks of another process: it died (or stopped) while they ran.
            self._recovered = True
            count = await self._gate.store.abandon_tasks(
                owner_not=self.owner, at=_now(), message=OUTCOME_UNKNOWN
            )
            if count:
                logger.warning("%d task(s) were running when the server stopped", count)

    async def _record(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        self._require(ctx)
        request = ctx.request
        if isinstance(request, Request):
            # Streamable HTTP: a routing header naming another task is refused (SEP-2243).
            header = request.headers.get(MCP_NAME_HEADER)
            if header is not None and decode_header_value(header) != task_id:
                raise MCPError(
                    types.HEADER_MISMATCH,
                    f"{MCP_NAME_HEADER} header does not match the request body's 'taskId'",
                )
        await self._store_ready()
        record = await self._gate.store.get_task(task_id)
        principal = self._principal
        if (
            record is None
            or record.expires_at <= _now()
            or record.user != principal.user
            or record.tenant != principal.tenant
        ):
            raise MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id}")
        return record

    # -- negotiation ----------------------------------------------------------
    @staticmethod
    def negotiated(ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request's client declared the Tasks extension."""
        wanted = types.ClientCapabilities(extensions={EXTENSION: {}})
        return bool(ctx.session.check_client_capability(wanted))

    def _require(self, ctx: ServerRequestContext[Any, Any]) -> None:
        if not self.negotiated(ctx):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"this request needs the client to declare the {EXTENSION} extension",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )

    def _runs_as_task(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The full tool name when this ``tools/call`` becomes a task, else None."""
        if ctx.method != "tools/call" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        params = ctx.params
        if not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
            return None
        if "inputResponses" in params or "requestState" in params:
            return None  # a resumed round of an input_required call stays synchronous
        full = self._full(params["name"])
        spec = self._gate.registry.get(full)
        if spec is None or not spec.tags & {TASK_TAG, TASK_REQUIRED_TAG}:
            return None
        if not self.negotiated(ctx):
            if TASK_REQUIRED_TAG in spec.tags:
                self._require(ctx)  # it cannot run synchronously
            return None
        return str(full)

    # -- tools/call -----------------------------------------------------------
    async def middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Turn a task-tagged ``tools/call`` into a task; pass everything else on."""
        full = self._runs_as_task(ctx)
        if full is None:
            return await call_next(ctx)
        await self._store_ready()
        at = _now()
        record = TaskRecord(
            id=secrets.token_urlsafe(16),
            tool=full,
            user=self._principal.user,
            tenant=self._principal.tenant,
            owner=self.owner,
            created_at=at,
            updated_at=at,
            expires_at=at + self._ttl,
        )
        await self._gate.store.create_task(record)
        job = asyncio.get_running_loop().create_task(self._run(record.id, call_next, ctx))
        self._running[record.id] = job
        job.add_done_callback(lambda _job: self._running.pop(record.id, None))
        return {"resultType": "task", **self._fields(record)}

    async def _run(
        self, task_id: str, call_next: CallNext, ctx: ServerRequestContext[Any, Any]
    ) -> None:
        store = self._gate.store
        try:
            raw = await call_next(ctx)
        except asyncio.CancelledError:
            # tasks/cancel ended the task first (this is then a no-op); a shutdown
            # leaves it to the next start's recovery; anything else cancelling the
            # call must not leave the task working forever.
            if not self._stopping:
                await store.finish_task(
                    task_id,
                    status="failed",
                    at=_now(),
                    message=OUTCOME_UNKNOWN,
                    error={"code": _INTERNAL_ERROR, "message": OUTCOME_UNKNOWN},
                )
            raise
        except MCPError as exc:
            await store.finish_task(
                task_id,
                status="failed",
                at=_now(),
                message=exc.error.message,
                error={"code": exc.error.code, "message": exc.error.message},
            )
            return
        except Exception:
            logger.exception("task %s crashed", task_id)
            await store.finish_task(
                task_id,
                status="failed",
                at=_now(),
                message="internal error",
                error={"code": _INTERNAL_ERROR, "message": "The task failed unexpectedly."},
            )
            return
        result = dict(raw) if isinstance(raw, Mapping) else {}
        await self._settle(task_id, result)

    async def _settle(self, task_id: str, result: dict[str, Any]) -> None:
        store = self._gate.store
        meta = result.get("_meta") or {}
        call_id = meta.get(_CALL_META) if isinstance(meta, Mapping) else None
        if result.get("resultType") == "input_required":
            # Answering a task's questions (tasks/update) is not served yet.
            message = "The tool needs input from the user, which tasks cannot ask for yet."
            await store.finish_task(
                task_id,
                status="failed",
                at=_now(),
                message=message,
                call_id=call_id,
                error={"code": _INTERNAL_ERROR, "message": message},
            )
            return
        if call_id and await self._crashed(str(call_id)):
            text = (
                " ".join(
                    block.get("text", "")
                    for block in result.get("content", [])
                    if isinstance(block, Mapping)
                ).strip()
                or "The tool failed unexpectedly."
            )
            await store.finish_task(
                task_id,
                status="failed",
                at=_now(),
                message=text,
                call_id=call_id,
                error={"code": _INTERNAL_ERROR, "message": text},
            )
            return
        result.pop("resultType", None)
        await store.finish_task(
            task_id, status="completed", at=_now(), call_id=call_id, result=result
        )

    async def _crashed(self, call_id: str) -> bool:
        """Whether the call ended ``unrecoverable`` (a tool bug: a failed task)."""
        records = await self._gate.store.list_audit(call_id=call_id)
        return any(r.phase == "final" and r.outcome == "unrecoverable" for r in records)

    # -- tasks/* ----------------------------------------------------------------
    def _fields(self, record: TaskRecord) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "taskId": record.id,
            "status": record.status,
            "createdAt": _iso(record.created_at),
            "lastUpdatedAt": _iso(record.updated_at),
            "ttlMs": int((record.expires_at - record.created_at).total_seconds() * 1000),
            "pollIntervalMs": self._poll_ms,
        }
        if record.message:
            fields["statusMessage"] = record.message
        return fields

    async def get(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams
    ) -> dict[str, Any]:
        """``tasks/get``: the task, with its result or error once it ended."""
        record = await self._record(ctx, params.task_id)
        detail = self._fields(record)
        if record.status == "completed" and record.result is not None:
            detail["result"] = record.result
        elif record.status == "failed":
            detail["error"] = record.error or {"code": _INTERNAL_ERROR, "message": OUTCOME_UNKNOWN}
        return detail

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams
    ) -> dict[str, Any]:
        """``tasks/cancel``: stop a running task (an empty ack; idempotent)."""
        record = await self._record(ctx, params.task_id)
        status: TaskStatus = "cancelled"
        if await self._gate.store.finish_task(
            record.id, status=status, at=_now(), message="Cancelled by the client."
        ):
            job = self._running.get(record.id)
            if job is not None:
                job.cancel()
        return {}

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams
    ) -> dict[str, Any]:
        """``tasks/update``: no task of this server waits for input (not served yet)."""
        record = await self._record(ctx, params.task_id)
        raise MCPError(types.INVALID_PARAMS, f"Task {record.id} is not waiting for input")

    async def aclose(self) -> None:
        """Stop the calls still running here; they read as failed, outcome unknown,
        once a server over the same store starts."""
        self._stopping = True
        jobs = list(self._running.values())
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
