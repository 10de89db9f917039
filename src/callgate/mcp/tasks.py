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

A task whose call needs input from the client (a tool's question, or the
requester's approval) reports ``input_required`` with the questions in
``inputRequests``; ``tasks/update`` delivers answers (some or all of them), and
once every question is answered the call runs again with them, in the
background, still through the whole chain.

Every task lives in the store, not in this process: after a restart a completed
task keeps its result, a task waiting for input can be answered (by any
replica), and one that was running when its process died is reported
``failed`` with "outcome unknown" (never silently lost). A running task holds a
lease its runner renews; only a task whose lease ran out is given up, so
several replicas can share one store. A task cancelled on one replica is
stopped on the replica running it at its next renewal.

Without the extension the same tools run synchronously within their timeout.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.requests import Request

from callgate import access
from callgate.contract import Principal
from callgate.contract.context import background_hook
from callgate.runtime.gate import Gate
from callgate.store.base import TaskRecord, TaskStatus

__all__ = [
    "EXTENSION",
    "TASK_ASK_FIRST_TAG",
    "TASK_REQUIRED_TAG",
    "TASK_TAG",
    "TaskRunner",
    "UpdateTaskRequestParams",
    "runner_of",
]

EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TAG = "task"
"""The tag of a tool that runs as a task where the client declares the extension."""
TASK_ASK_FIRST_TAG = "task:ask-first"
"""The tag of a tool that asks the client first, in the foreground (``input_required``
rounds), and becomes a task when it calls :meth:`ToolContext.run_in_background`."""
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


class UpdateTaskRequestParams(types.InputResponseRequestParams):
    """``tasks/update`` params: the task, and answers keyed by its ``inputRequests``."""

    task_id: str


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
        call_tool: Callable[
            [ServerRequestContext[Any, Any], types.CallToolRequestParams], Awaitable[Any]
        ]
        | None = None,
        ttl: timedelta = timedelta(hours=1),
        poll_interval_ms: int = 500,
        lease: timedelta = timedelta(seconds=30),
    ) -> None:
        self._gate = gate
        self._principal = principal
        self._full = wire_to_full
        self._call_tool = call_tool
        self._ttl = ttl
        self._poll_ms = poll_interval_ms
        self._lease = lease
        self.owner = secrets.token_hex(8)
        self._running: dict[str, asyncio.Task[None]] = {}
        self._renewing: asyncio.Task[None] | None = None
        self._swept_at: datetime | None = None
        self._stopping = False

    @property
    def running_tasks(self) -> frozenset[str]:
        """The ids of the tasks whose calls run in this process now."""
        return frozenset(task_id for task_id, job in self._running.items() if not job.done())

    def install(self, server: Server[Any]) -> None:
        """Advertise the extension, run task calls and serve ``tasks/get|update|cancel``."""
        _RUNNERS[server] = self
        server.extensions[EXTENSION] = {}
        server.middleware.append(self.middleware)
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/update", UpdateTaskRequestParams, self.update)

    # -- the store ------------------------------------------------------------
    async def _store_ready(self) -> None:
        await self._gate.open()
        now = _now()
        if self._swept_at is None or now - self._swept_at > self._lease / 2:
            # Working tasks whose runner stopped renewing: it died while they ran.
            self._swept_at = now
            count = await self._gate.store.abandon_tasks(at=now, message=OUTCOME_UNKNOWN)
            if count:
                logger.warning("%d task(s) were running when their server stopped", count)

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
            or not access.check(principal, access.Action.READ_OWN, record)
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

    def _runs_as_task(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, bool] | None:
        """For a ``tools/call`` that is or may become a task: the full tool name,
        and whether it is a task from the start (else it becomes one when the
        tool says so: ``task:ask-first``). None for a plain synchronous call."""
        if ctx.method != "tools/call" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        params = ctx.params
        if not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
            return None
        full = self._full(params["name"])
        spec = self._gate.registry.get(full)
        if spec is None or not spec.tags & {TASK_TAG, TASK_REQUIRED_TAG, TASK_ASK_FIRST_TAG}:
            return None
        if not self.negotiated(ctx):
            if TASK_REQUIRED_TAG in spec.tags:
                self._require(ctx)  # it cannot run synchronously
            return None
        if TASK_ASK_FIRST_TAG in spec.tags:
            return str(full), False  # every round: it asks first, then may go long
        if "inputResponses" in params or "requestState" in params:
            return None  # a resumed round of an input_required call stays synchronous
        return str(full), True

    # -- tools/call -----------------------------------------------------------
    async def middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Turn a task-tagged ``tools/call`` into a task; pass everything else on."""
        decided = self._runs_as_task(ctx)
        if decided is None:
            return await call_next(ctx)
        full, at_once = decided
        await self._store_ready()
        if not at_once:
            return await self._ask_first(ctx, call_next, full)
        record = await self._create(ctx, full)
        self._start(record.id, lambda: call_next(ctx))
        return {"resultType": "task", **self._fields(record)}

    async def _ask_first(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, full: str
    ) -> HandlerResult:
        """Run the call in the foreground until the tool moves it to the background
        (:meth:`ToolContext.run_in_background`): its answer so far (a result, or
        ``input_required`` for the client's input) comes back as usual; once moved,
        the call goes on as a task and the client gets the task."""
        loop = asyncio.get_running_loop()
        moved = asyncio.Event()
        asked_to_move = threading.Event()  # set at once, from any thread

        def hook() -> bool:
            asked_to_move.set()
            loop.call_soon_threadsafe(moved.set)  # wakes the wait below, on its loop
            return True

        async def call() -> HandlerResult:
            return await call_next(ctx)

        with background_hook(hook):
            job: asyncio.Task[HandlerResult] = loop.create_task(call())
        waiter = loop.create_task(moved.wait())
        try:
            await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job.cancel()  # the client went away while the call was in the foreground
            raise
        finally:
            waiter.cancel()
        if job.done() and not asked_to_move.is_set():
            return job.result()  # finished (or asked the client) in the foreground
        record = await self._create(ctx, full)
        self._start(record.id, lambda: job)
        return {"resultType": "task", **self._fields(record)}

    async def _create(self, ctx: ServerRequestContext[Any, Any], full: str) -> TaskRecord:
        at = _now()
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        arguments = params.get("arguments")
        record = TaskRecord(
            id=secrets.token_urlsafe(16),
            tool=full,
            user=self._principal.user,
            tenant=self._principal.tenant,
            owner=self.owner,
            created_at=at,
            updated_at=at,
            expires_at=at + self._ttl,
            arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
            lease_until=at + self._lease,
        )
        await self._gate.store.create_task(record)
        return record

    def _start(self, task_id: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Run ``call`` as the task's job, its lease renewed while it runs."""
        with background_hook(lambda: True):  # a task's call runs in the background already
            job = asyncio.get_running_loop().create_task(self._run(task_id, call))
        self._running[task_id] = job
        job.add_done_callback(lambda _job: self._running.pop(task_id, None))
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        """Renew the leases of the jobs running here; stop a job whose task was
        ended elsewhere (cancelled through another replica)."""
        store = self._gate.store
        while self._running:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            for task_id, job in list(self._running.items()):
                try:
                    alive = await store.renew_task_lease(
                        task_id, owner=self.owner, until=_now() + self._lease
                    )
                except Exception:  # the store is down: try again next round
                    logger.warning("could not renew the lease of task %s", task_id, exc_info=True)
                    continue
                if not alive and not job.done():
                    record = await store.get_task(task_id)
                    if record is not None and record.status == "cancelled":
                        job.cancel()

    async def _run(self, task_id: str, call: Callable[[], Awaitable[Any]]) -> None:
        store = self._gate.store
        try:
            raw = await call()
        except asyncio.CancelledError:
            # tasks/cancel ended the task first (this is then a no-op); a shutdown
            # ends it in aclose; anything else cancelling the call must not leave
            # the task working forever.
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
        if isinstance(raw, BaseModel):
            raw = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
        result = dict(raw) if isinstance(raw, Mapping) else {}
        await self._settle(task_id, result)

    async def _settle(self, task_id: str, result: dict[str, Any]) -> None:
        store = self._gate.store
        meta = result.get("_meta") or {}
        call_id = meta.get(_CALL_META) if isinstance(meta, Mapping) else None
        if result.get("resultType") == "input_required":
            requests = result.get("inputRequests")
            state = result.get("requestState")
            if self._call_tool is not None and isinstance(requests, Mapping) and requests:
                # Parked until tasks/update answers; the state stays in the store.
                await store.park_task(
                    task_id,
                    at=_now(),
                    input_requests=dict(requests),
                    request_state=state if isinstance(state, str) else None,
                    call_id=call_id,
                )
                return
            message = "The tool asked for input this server cannot collect for a task."
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
        elif record.status == "input_required":
            detail["inputRequests"] = record.input_requests or {}
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
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskRequestParams
    ) -> dict[str, Any]:
        """``tasks/update``: answers to an ``input_required`` task's questions (an
        empty ack). Once every question is answered the call runs again with them."""
        record = await self._record(ctx, params.task_id)
        responses = {
            key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(value, BaseModel)
            else value
            for key, value in (params.input_responses or {}).items()
        }
        if record.status != "input_required" or self._call_tool is None:
            raise MCPError(types.INVALID_PARAMS, f"Task {record.id} is not waiting for input")
        try:
            # The lease comes with the answers: a task that works again is never
            # without one, so no sweep can mistake it for a dead runner's.
            updated = await self._gate.store.answer_task(
                record.id, responses, at=_now(), lease_until=_now() + self._lease
            )
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, f"Task {record.id}: {exc}") from None
        if updated is None:
            raise MCPError(types.INVALID_PARAMS, f"Task {record.id} is not waiting for input")
        if updated.status == "working":  # every question answered: run the call again
            resumed = types.CallToolRequestParams.model_validate(
                {
                    "name": updated.tool,
                    "arguments": updated.arguments or {},
                    "inputResponses": updated.responses or {},
                    "requestState": updated.request_state,
                }
            )
            call_tool = self._call_tool
            self._start(updated.id, lambda: call_tool(ctx, resumed))
        return {}

    async def aclose(self) -> None:
        """Stop the calls still running here; they read as failed, outcome unknown
        (at once if the store is still reachable, else when their lease runs out)."""
        self._stopping = True
        stopped = list(self._running)
        jobs = list(self._running.values())
        if self._renewing is not None:
            jobs.append(self._renewing)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        for task_id in stopped:
            try:
                await self._gate.store.finish_task(
                    task_id,
                    status="failed",
                    at=_now(),
                    message=OUTCOME_UNKNOWN,
                    error={"code": _INTERNAL_ERROR, "message": OUTCOME_UNKNOWN},
                )
            except Exception:  # closing anyway: the lease expiry covers it
                logger.warning("task %s left to its lease expiry", task_id, exc_info=True)
