"""Stage 7: run the tool: idempotency, approval, duplicate limit, intent record,
timeout, retries.

What runs is the tool's handler, or the one an earlier stage bound the call to
(``Call.handler``: a previewed change's apply function), after the check that
stage asked for (``Call.before_run``); nothing here knows why.
"""

from __future__ import annotations

import asyncio
import random
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from callgate.contract import ToolContext, ToolSink
from callgate.contract.context import (
    ClientCannot,
    ClientRequests,
    Elicitation,
    InputRequired,
    LogLevel,
    Root,
)
from callgate.errors import ErrorKind, ToolError, TransientError, WaitingForApproval
from callgate.runtime import approvals, idempotency
from callgate.runtime.call import Call
from callgate.runtime.deadline import Deadline
from callgate.runtime.envelope import (
    ApprovalRequest,
    Envelope,
    ErrorInfo,
    InputRequest,
    Status,
)
from callgate.runtime.invoke import run_tool
from callgate.runtime.recording import audit_record
from callgate.runtime.runner import NotStarted, Overran, Unresponsive


async def execute(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    services = call.services

    if call.idempotency_key:
        early = await idempotency.begin(call)
        if early is not None:
            return early

    # Only the call that owns this run may use an approval (exactly once).
    parked = await approvals.consume(call)
    if parked is not None:
        return parked

    if call.before_run is not None:
        refused = await call.before_run(call)
        if refused is not None:
            return refused

    limit = services.limits.duplicate_call_limit
    if call.session_id and limit and call.args_hash and not call.repeatable:
        seen = await services.store.count_session_calls(call.session_id, spec.name, call.args_hash)
        if seen >= limit:
            return call.fail(
                ErrorKind.BUSINESS_STATE,
                f"{call.shown(spec.name)} was already called {seen} times in this session with "
                "exactly these arguments and succeeded; calling it again will not give a "
                "different answer.",
                next_step="Use the result you already have, or change the arguments.",
            )

    # A side-effecting call leaves an intent record before it runs, so a crash
    # between here and the outcome shows as 'outcome unknown', never as silence.
    if not spec.effective_annotations.read_only:
        await services.committer.append(audit_record(call, phase="intent"))
        call.intent_written = True

    timeout = call.effective_timeout()
    loop = asyncio.get_running_loop()
    # Each attempt gets the tool's timeout; the call as a whole, retries and
    # backoff included, never runs past the gate's hard maximum.
    hard_deadline = loop.time() + services.limits.max_timeout
    session_spent: int | None = None
    while True:
        call.attempts += 1
        attempt_timeout = min(timeout, hard_deadline - loop.time())
        outcome = await _attempt(
            call, attempt_timeout, reported=timeout, hard_deadline=hard_deadline
        )
        if isinstance(outcome, Envelope):
            return outcome  # waits for the client: not a failure, never retried
        if not isinstance(outcome, _Failure):
            call.payload = outcome
            return None
        retry = (
            outcome.kind is ErrorKind.TRANSIENT
            and spec.retry_safe
            and not outcome.stuck
            and call.attempts < services.limits.max_attempts
        )
        if retry and call.session_id:
            # The session budget is read only when a retry is wanted: most calls never pay.
            if session_spent is None:
                session_spent = await services.store.session_retries(call.session_id)
            retry = session_spent + call.attempts - 1 < services.limits.session_retry_budget
            if not retry:
                call.detail["retry"] = "session retry budget spent"
        delay = min(
            services.limits.backoff_max,
            max(
                outcome.retry_after or 0.0, services.limits.backoff_base * 2 ** (call.attempts - 1)
            ),
        ) * random.uniform(0.5, 1.0)
        if retry and loop.time() + delay + MIN_ATTEMPT >= hard_deadline:
            retry = False
            call.detail["retry"] = "no time left under the hard maximum"
        if not retry:
            return outcome.envelope(call)
        await asyncio.sleep(delay)


class _Failure:
    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        next_step: str | None = None,
        retry_after: float | None = None,
        detail_ref: str | None = None,
        stuck: bool = False,
        missing_capability: str | None = None,
    ) -> None:
        self.stuck = stuck
        self.missing_capability = missing_capability
        """The tool's work still runs (a thread, or a task that ignored its
        cancellation): another attempt would add to it."""
        self.kind = kind
        self.message = message
        self.next_step = next_step
        self.retry_after = retry_after
        self.detail_ref = detail_ref

    def envelope(self, call: Call) -> Envelope:
        return call.fail(
            self.kind,
            self.message,
            next_step=self.next_step,
            retryable=self.kind is ErrorKind.TRANSIENT,
            detail_ref=self.detail_ref,
            missing_capability=self.missing_capability,
        )


def _asking(call: Call, requests: Mapping[str, Mapping[str, Any]]) -> Envelope:
    """The tool asked its client something that must be answered first."""
    assert call.spec is not None
    call.detail["asked"] = sorted(requests)
    return call.envelope(
        Status.PENDING_INPUT,
        input=InputRequest(requests={key: dict(value) for key, value in requests.items()}),
        error=ErrorInfo(
            kind=ErrorKind.BUSINESS_STATE,
            message_for_model=f"Nothing was done yet: {call.shown(call.spec.name)} needs "
            "an answer from the client first.",
            next_step="Answer the client's question; the call is then made again with the answer.",
        ),
    )


def _waiting(call: Call, exc: WaitingForApproval) -> Envelope:
    """The tool's work waits for a person's decision on a call it made (code mode)."""
    approval = exc.approval
    if not isinstance(approval, ApprovalRequest):
        approval = ApprovalRequest.model_validate(approval)
    call.detail["waits_for"] = approval.approval_id
    return call.envelope(
        Status.PENDING_APPROVAL,
        approval=approval,
        error=ErrorInfo(
            kind=ErrorKind.BUSINESS_STATE,
            message_for_model=call.in_callers_names(exc.message) or "",
            next_step=call.in_callers_names(exc.next_step),
        ),
    )


MIN_ATTEMPT = 0.05
"""Seconds an attempt needs at least to be worth starting."""


class _ExtendingSink:
    """The tool's sink, plus: each progress report extends the attempt's deadline.

    A tool that keeps reporting progress is working, not hung: its deadline
    moves to a full timeout after the report, never past the call's hard maximum
    (``ToolContext.deadline`` still shows the first one). The count of extensions
    is kept in the audit detail (``deadline_extended``).
    """

    def __init__(self, inner: ToolSink | None, extend: Callable[[], None]) -> None:
        self._inner = inner
        self._extend = extend

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._extend()
        if self._inner is not None:
            await self._inner.progress(progress, total, message)

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        if self._inner is not None:
            await self._inner.log(level, message, data)


class _ExtendingClientSink(_ExtendingSink):
    """:class:`_ExtendingSink` for a sink that can also ask the client."""

    def __init__(self, inner: ToolSink, client: ClientRequests, extend: Callable[[], None]) -> None:
        super().__init__(inner, extend)
        self._client = client

    async def elicit(self, message: str, schema: Mapping[str, Any], key: str | None) -> Elicitation:
        return await self._client.elicit(message, schema, key)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        return await self._client.sample(messages, max_tokens, system_prompt, temperature, key)

    async def list_roots(self, key: str | None) -> list[Root]:
        return await self._client.list_roots(key)


def _extending(sink: ToolSink | None, extend: Callable[[], None]) -> ToolSink:
    # A check on the sink's class, not isinstance: ABCs cache issubclass per class,
    # while isinstance against a runtime-checkable Protocol walks its members on
    # every call (7-8 µs, on every governed call).
    if sink is not None and issubclass(type(sink), ClientRequests):
        return _ExtendingClientSink(sink, cast(ClientRequests, sink), extend)
    return _ExtendingSink(sink, extend)


async def _attempt(call: Call, timeout: float, *, reported: float, hard_deadline: float) -> Any:
    spec = call.spec
    assert spec is not None
    deadline = Deadline(timeout, limit=hard_deadline)

    def extend() -> None:
        if deadline.extend(reported):
            call.detail["deadline_extended"] = call.detail.get("deadline_extended", 0) + 1

    ctx = ToolContext(
        call_id=call.call_id,
        trace_id=call.trace_id,
        tool=spec.name,
        principal=call.principal,
        session_id=call.session_id,
        idempotency_key=call.idempotency_key,
        deadline=call.now() + timedelta(seconds=timeout),
        attempt=call.attempts,
        sink=_extending(call.sink, extend),
        handle_store=call.services.store,
        names=call.names,
    )
    handler = call.handler or spec.handler
    try:
        return await run_tool(call, spec.name, handler, call.prepared, call.injected, ctx, deadline)
    except Unresponsive as exc:
        return _Failure(
            ErrorKind.TRANSIENT,
            f"{call.shown(spec.name)} is not responding: {exc.stuck} earlier calls are "
            "still running.",
            next_step="Wait a few minutes before trying again; if it persists, tell the user "
            "the tool is unresponsive.",
            retry_after=None,
            stuck=True,
        )
    except InputRequired as exc:
        if exc.requests:  # raised by the sink for its questions (else: a tool's own error)
            return _asking(call, exc.requests)
        call.detail.setdefault("errors", []).append(f"{type(exc).__name__}: {exc.message}")
        return _Failure(exc.kind, exc.message)
    except WaitingForApproval as exc:
        return _waiting(call, exc)
    except ToolError as exc:
        call.detail.setdefault("errors", []).append(f"{type(exc).__name__}: {exc.message}")
        return _Failure(
            exc.kind,
            call.in_callers_names(exc.message) or "",
            next_step=call.in_callers_names(exc.next_step),
            retry_after=exc.retry_after if isinstance(exc, TransientError) else None,
            missing_capability=exc.capability if isinstance(exc, ClientCannot) else None,
        )
    except NotStarted:
        call.detail.setdefault("errors", []).append(f"not started within {timeout:g}s")
        return _Failure(
            ErrorKind.TRANSIENT,
            f"{call.shown(spec.name)} is busy with other calls and could not start within {reported:g} "
            "seconds; nothing was done.",
            next_step="Try again in a moment.",
        )
    except TimeoutError as exc:
        call.detail.setdefault("errors", []).append(f"timeout after {timeout:g}s")
        timeout = reported
        within = f"within {timeout:g} seconds"
        if call.detail.get("deadline_extended"):
            limit = call.services.limits.max_timeout
            within = (
                f"in time ({timeout:g} seconds after its last progress report, {limit:g} at most)"
            )
        if spec.retry_safe:
            return _Failure(
                ErrorKind.TRANSIENT,
                f"{call.shown(spec.name)} did not answer {within}.",
                stuck=isinstance(exc, Overran) and exc.stray,
                next_step="Try again in a moment; if it keeps timing out, narrow the request.",
            )
        return _Failure(
            ErrorKind.UNKNOWN_OUTCOME,
            f"{call.shown(spec.name)} did not answer {within}. The change may or may not "
            "have been made.",
            next_step=f"Do not retry. First {call.how_to_check()} to see whether the change happened.",
        )
    except Exception as exc:
        call.detail["exception"] = {
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc)[:2000],
            "traceback": traceback.format_exc(limit=30)[-8000:],
        }
        return _Failure(
            ErrorKind.UNRECOVERABLE,
            f"{call.shown(spec.name)} failed with an internal error (reference {call.call_id}).",
            next_step="Do not retry. Tell the user the action could not be completed and "
            f"give them the reference {call.call_id}.",
            detail_ref=call.call_id,
        )
