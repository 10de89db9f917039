"""Long-running tools as durable tasks: the MCP Tasks extension (SEP-2663).

Where the client declares ``io.modelcontextprotocol/tasks`` (in its session
capabilities or in one request's ``_meta``) on the 2026-07-28 wire, a
``tools/call`` of a tool tagged :data:`TASK_TAG` (or
:data:`TASK_REQUIRED_TAG`) answers at once with a task
(``resultType: "task"``); the call itself (the server's round of the call, so
the whole governed chain) runs in the background, and the task keeps the
Envelope it ends with. ``tasks/get`` reports the task, with the Envelope
rendered as ``tools/call`` renders it (:func:`callgate.mcp._wire.task_outcome`):
the result inlined once ``completed`` (a tool execution error is ``completed``
with ``isError``), or a JSON-RPC error once ``failed`` (the tool crashed: an
``unrecoverable`` outcome). ``tasks/cancel`` cancels it.

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
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.requests import Request

from callgate import access
from callgate.contract import Principal
from callgate.contract.context import background_hook
from callgate.mcp import _wire
from callgate.runtime.envelope import Envelope
from callgate.runtime.gate import Gate
from callgate.store.base import TaskRecord, TaskRecords

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
_UNKNOWN = {"code": _INTERNAL_ERROR, "message": OUTCOME_UNKNOWN}

Ctx = ServerRequestContext[Any, Any]
Govern = Callable[[Ctx, types.CallToolRequestParams], Coroutine[Any, Any, _wire.Round]]
"""One round of a ``tools/call`` through the chain (the server's)."""
Answer = types.CallToolResult | types.InputRequiredResult | dict[str, Any]

logger = logging.getLogger(__name__)

_RUNNERS: weakref.WeakKeyDictionary[Server[Any], TaskRunner] = weakref.WeakKeyDictionary()


class UpdateTaskRequestParams(types.InputResponseRequestParams):
    """``tasks/update`` params: the task, and answers keyed by its ``inputRequests``."""

    task_id: str


def runner_of(server: Server[Any]) -> TaskRunner | None:
    """The task runner installed on ``server`` (to stop its tasks), if any."""
    return _RUNNERS.get(server)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskRunner:
    """Runs task-tagged ``tools/call`` requests in the background, state in the store.

    Install with :meth:`install` (the extension and the ``tasks/*`` methods); the
    server's ``tools/call`` handler asks :meth:`answer` to run each call, which
    starts a task where one is due; :meth:`aclose` stops the calls still running
    (they will read as failed with an unknown outcome, as after a crash).
    """

    def __init__(
        self,
        gate: Gate,
        *,
        principal_of: Callable[[Ctx], Principal],
        wire_to_full: Callable[[str], str | None],
        full_to_wire: Callable[[str], str],
        govern: Govern,
        ttl: timedelta = timedelta(hours=1),
        poll_interval_ms: int = 500,
        lease: timedelta = timedelta(seconds=30),
    ) -> None:
        self._gate = gate
        self._principal_of = principal_of
        self._full = wire_to_full
        self._wire_name = full_to_wire
        self._govern = govern
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
        """Advertise the extension and serve ``tasks/get|update|cancel``."""
        _RUNNERS[server] = self
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/update", UpdateTaskRequestParams, self.update)

    # -- the store ------------------------------------------------------------
    async def _store(self) -> TaskRecords:
        tasks = await self._gate.tasks()
        now = self._gate.clock.now()
        if self._swept_at is None or now - self._swept_at > self._lease / 2:
            # Working tasks whose runner stopped renewing: it died while they ran.
            self._swept_at = now
            count = await tasks.abandon_tasks(at=now, message=OUTCOME_UNKNOWN)
            if count:
                logger.warning("%d task(s) were running when their server stopped", count)
        return tasks

    async def _record(self, ctx: Ctx, task_id: str) -> TaskRecord:
        self._require(ctx)
        request = ctx.request
        if isinstance(request, Request):
            # Streamable HTTP: a routing header naming another task is refused (SEP-2243).
            header = request.headers.get(MCP_NAME_HEADER)
            if header is not None and decode_header_value(header) != task_id:
                raise _wire.header_mismatch(MCP_NAME_HEADER, "taskId")
        record = await (await self._store()).get_task(task_id)
        if (
            record is None
            or record.expires_at <= self._gate.clock.now()
            or not access.check(self._principal_of(ctx), access.Action.READ_OWN, record)
        ):
            raise _wire.invalid_params(f"Unknown task: {task_id}")
        return record

    # -- negotiation ----------------------------------------------------------
    @staticmethod
    def negotiated(ctx: Ctx) -> bool:
        """Whether this request's client declared the Tasks extension."""
        wanted = types.ClientCapabilities(extensions={EXTENSION: {}})
        return bool(ctx.session.check_client_capability(wanted))

    def _require(self, ctx: Ctx) -> None:
        if not self.negotiated(ctx):
            raise _wire.needs_extension(EXTENSION)

    def _runs_as_task(self, ctx: Ctx, params: types.CallToolRequestParams) -> bool | None:
        """For a ``tools/call`` that is or may become a task: whether it is a task
        from the start (else it becomes one when the tool says so:
        ``task:ask-first``). None for a plain synchronous call."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        full = self._full(params.name)
        spec = self._gate.tool(full) if full is not None else None
        if spec is None or not spec.tags & {TASK_TAG, TASK_REQUIRED_TAG, TASK_ASK_FIRST_TAG}:
            return None
        if not self.negotiated(ctx):
            if TASK_REQUIRED_TAG in spec.tags:
                self._require(ctx)  # it cannot run synchronously
            return None
        if TASK_ASK_FIRST_TAG in spec.tags:
            return False  # every round: it asks first, then may go long
        if params.input_responses is not None or params.request_state is not None:
            return None  # a resumed round of an input_required call stays synchronous
        return True

    # -- tools/call -----------------------------------------------------------
    async def answer(self, ctx: Ctx, params: types.CallToolRequestParams) -> Answer:
        """Run a ``tools/call``: as a task where one is due, else in the foreground."""
        at_once = self._runs_as_task(ctx, params)
        if at_once is None:
            return _wire.call_result(await self._govern(ctx, params))
        tasks = await self._store()
        if not at_once:
            return await self._ask_first(ctx, params, tasks)
        record = await self._create(ctx, tasks, params)
        self._start(record.id, lambda: self._govern(ctx, params))
        return {"resultType": "task", **self._fields(record)}

    async def _ask_first(
        self, ctx: Ctx, params: types.CallToolRequestParams, tasks: TaskRecords
    ) -> Answer:
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

        with background_hook(hook):
            job: asyncio.Task[_wire.Round] = loop.create_task(self._govern(ctx, params))
        waiter = loop.create_task(moved.wait())
        try:
            await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job.cancel()  # the client went away while the call was in the foreground
            raise
        finally:
            waiter.cancel()
        if job.done() and not asked_to_move.is_set():
            return _wire.call_result(job.result())  # finished (or asked) in the foreground
        record = await self._create(ctx, tasks, params)
        self._start(record.id, lambda: job)
        return {"resultType": "task", **self._fields(record)}

    async def _create(
        self, ctx: Ctx, tasks: TaskRecords, params: types.CallToolRequestParams
    ) -> TaskRecord:
        at = self._gate.clock.now()
        principal = self._principal_of(ctx)
        record = TaskRecord(
            id=secrets.token_urlsafe(16),
            tool=self._full(params.name) or params.name,
            user=principal.user,
            tenant=principal.tenant,
            owner=self.owner,
            created_at=at,
            updated_at=at,
            expires_at=at + self._ttl,
            arguments=dict(params.arguments or {}),
            lease_until=at + self._lease,
        )
        await tasks.create_task(record)
        return record

    def _start(self, task_id: str, call: Callable[[], Awaitable[_wire.Round]]) -> None:
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
        tasks = await self._gate.tasks()
        while self._running:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            for task_id, job in list(self._running.items()):
                try:
                    alive = await tasks.renew_task_lease(
                        task_id, owner=self.owner, until=self._gate.clock.now() + self._lease
                    )
                except Exception:  # the store is down: try again next round
                    logger.warning("could not renew the lease of task %s", task_id, exc_info=True)
                    continue
                if not alive and not job.done():
                    record = await tasks.get_task(task_id)
                    if record is not None and record.status == "cancelled":
                        job.cancel()

    async def _run(self, task_id: str, call: Callable[[], Awaitable[_wire.Round]]) -> None:
        tasks = await self._gate.tasks()
        try:
            round_ = await call()
        except asyncio.CancelledError:
            # tasks/cancel ended the task first (this is then a no-op); a shutdown
            # ends it in aclose; anything else cancelling the call must not leave
            # the task working forever.
            if not self._stopping:
                await tasks.finish_task(
                    task_id,
                    status="failed",
                    at=self._gate.clock.now(),
                    message=OUTCOME_UNKNOWN,
                    error=_UNKNOWN,
                )
            raise
        except MCPError as exc:  # refused by the protocol (an unknown tool, say)
            error = _wire.error_json(exc)
            await tasks.finish_task(
                task_id,
                status="failed",
                at=self._gate.clock.now(),
                message=error["message"],
                error=error,
            )
            return
        except Exception:
            logger.exception("task %s crashed", task_id)
            await tasks.finish_task(
                task_id,
                status="failed",
                at=self._gate.clock.now(),
                message="internal error",
                error={"code": _INTERNAL_ERROR, "message": "The task failed unexpectedly."},
            )
            return
        await self._settle(tasks, task_id, round_)

    async def _settle(self, tasks: TaskRecords, task_id: str, round_: _wire.Round) -> None:
        """End the task as its call's Envelope says, or park it for the client's input."""
        envelope = round_.envelope
        questions = round_.questions
        if questions:
            # Parked until tasks/update answers; the state stays in the store.
            state = round_.request_state() if round_.request_state is not None else None
            await tasks.park_task(
                task_id,
                at=self._gate.clock.now(),
                input_requests=questions,
                request_state=state,
                call_id=envelope.call_id,
            )
            return
        status, outcome = _wire.task_outcome(
            envelope, round_.spec, input_required=round_.input_required
        )
        await tasks.finish_task(
            task_id,
            status=status,
            at=self._gate.clock.now(),
            message=outcome["message"] if status == "failed" else None,
            call_id=envelope.call_id,
            envelope=envelope.model_dump(mode="json"),
            error=outcome if status == "failed" else None,
        )

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

    def _result(self, record: TaskRecord) -> dict[str, Any] | None:
        """A completed task's result: its Envelope as ``tools/call`` renders it."""
        if record.envelope is None:
            return record.result  # ended before tasks kept their Envelope
        envelope = Envelope.model_validate(record.envelope)
        return _wire.task_outcome(envelope, self._gate.tool(record.tool))[1]

    async def get(self, ctx: Ctx, params: types.GetTaskRequestParams) -> dict[str, Any]:
        """``tasks/get``: the task, with its result or error once it ended."""
        record = await self._record(ctx, params.task_id)
        detail = self._fields(record)
        if record.status == "completed":
            result = self._result(record)
            if result is not None:
                detail["result"] = result
        elif record.status == "input_required":
            detail["inputRequests"] = record.input_requests or {}
        elif record.status == "failed":
            detail["error"] = record.error or _UNKNOWN
        return detail

    async def cancel(self, ctx: Ctx, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        """``tasks/cancel``: stop a running task (an empty ack; idempotent)."""
        record = await self._record(ctx, params.task_id)
        tasks = await self._gate.tasks()
        if await tasks.finish_task(
            record.id,
            status="cancelled",
            at=self._gate.clock.now(),
            message="Cancelled by the client.",
        ):
            job = self._running.get(record.id)
            if job is not None:
                job.cancel()
        return {}

    async def update(self, ctx: Ctx, params: UpdateTaskRequestParams) -> dict[str, Any]:
        """``tasks/update``: answers to an ``input_required`` task's questions (an
        empty ack). Once every question is answered the call runs again with them."""
        record = await self._record(ctx, params.task_id)
        responses = {
            key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(value, BaseModel)
            else value
            for key, value in (params.input_responses or {}).items()
        }
        waiting = _wire.invalid_params(f"Task {record.id} is not waiting for input")
        if record.status != "input_required":
            raise waiting
        tasks = await self._gate.tasks()
        try:
            # The lease comes with the answers: a task that works again is never
            # without one, so no sweep can mistake it for a dead runner's.
            updated = await tasks.answer_task(
                record.id,
                responses,
                at=self._gate.clock.now(),
                lease_until=self._gate.clock.now() + self._lease,
            )
        except ValueError as exc:
            raise _wire.invalid_params(f"Task {record.id}: {exc}") from None
        if updated is None:
            raise waiting
        if updated.status == "working":  # every question answered: run the call again
            resumed = types.CallToolRequestParams.model_validate(
                {
                    # Kept under its full name; the round is made as the client names it.
                    "name": self._wire_name(updated.tool),
                    "arguments": updated.arguments or {},
                    "inputResponses": updated.responses or {},
                    "requestState": updated.request_state,
                }
            )
            govern = self._govern
            self._start(updated.id, lambda: govern(ctx, resumed))
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
                tasks = await self._gate.tasks()
                await tasks.finish_task(
                    task_id,
                    status="failed",
                    at=self._gate.clock.now(),
                    message=OUTCOME_UNKNOWN,
                    error=_UNKNOWN,
                )
            except Exception:  # closing anyway: the lease expiry covers it
                logger.warning("task %s left to its lease expiry", task_id, exc_info=True)
