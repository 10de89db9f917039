"""Resource reads and prompt gets: audited like calls, their functions run like tools.

Reads do not pass the governed chain: they change nothing, so there is nothing
to decide, retry or make idempotent. Two things are the same as for a call,
and are done by the same code:

- **who read what is audited**: each read is a :class:`~callgate.runtime.call.Call`
  (``tool`` ``resource:<uri>`` or ``prompt:<name>``, risk ``read``) whose outcome
  is an Envelope, recorded by :func:`callgate.runtime.recording.audit_record`;
  its answer leaves only once the record is durable;
- **the function runs on the gate's runner**: under the gate's default timeout,
  the function's own caps (threads, stray work), answered at the deadline
  whatever it does, its late end recorded as a ``late`` record of the read.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Literal

from callgate.contract import Principal
from callgate.errors import ErrorKind
from callgate.runtime.call import Call, hash_json, new_id
from callgate.runtime.deadline import Deadline
from callgate.runtime.envelope import Decision, Envelope, Status
from callgate.runtime.recording import audit_record
from callgate.runtime.runner import LateEnd
from callgate.runtime.services import Services
from callgate.store import AuditPhase, AuditRecord
from callgate.store.failures import StoreUnavailable, describe, is_unavailable

__all__ = ["Read", "Reads"]

ReadKind = Literal["resource", "prompt"]


class Read:
    """One resource read or prompt get, filled in as it goes.

    ``outcome`` is what the audit records: ``Status.OK``, ``Status.PENDING_INPUT``
    (the client was asked first) or the error kind (``CONSTRUCTION`` for an
    unknown one, ``PERMISSION`` for one the principal may not see).
    """

    def __init__(self, call: Call, kind: ReadKind, name: str) -> None:
        self.call = call
        self.kind = kind
        self.name = name
        self.outcome: Status | ErrorKind | None = None
        self.reason: str | None = None
        """Why it was refused (operator-facing; the client is told less)."""

    @property
    def call_id(self) -> str:
        return self.call.call_id

    @property
    def detail(self) -> dict[str, Any]:
        """Operator-only facts for the audit record (the toolbox, the URI template)."""
        return self.call.detail

    @property
    def arguments(self) -> Mapping[str, Any]:
        return self.call.arguments

    @arguments.setter
    def arguments(self, value: Mapping[str, Any]) -> None:
        # Only their hash is kept: a template's variables, a prompt's arguments.
        self.call.arguments = dict(value)
        self.call.args_hash = hash_json(self.call.arguments)

    def allow(self) -> None:
        """The principal may see what it asked for (visibility checked)."""
        self.call.decision = Decision(effect="allow")

    def refused(self, kind: ErrorKind, reason: str) -> None:
        """The read ends as ``kind`` for ``reason``; a ``PERMISSION`` refusal is a deny."""
        self.outcome, self.reason = kind, reason
        if kind is ErrorKind.PERMISSION:
            self.call.decision = Decision(effect="deny", reason=reason)

    def envelope(self, outcome: Status | ErrorKind | None = None) -> Envelope:
        """The read's outcome (or ``outcome``) as an Envelope, for its audit record."""
        outcome = outcome or self.outcome or ErrorKind.UNRECOVERABLE
        decision = self.call.decision
        if decision is not None and self.reason and decision.reason is None:
            # The audit keeps why a read that was allowed still failed (a timeout).
            self.call.decision = Decision(effect=decision.effect, reason=self.reason)
        if isinstance(outcome, Status):
            return self.call.envelope(outcome)
        return self.call.fail(outcome, self.reason or outcome.value)


class Reads:
    """The gate's side of serving resources and prompts (see the module docs)."""

    def __init__(self, services: Services, *, busy: AbstractContextManager[None]) -> None:
        self._services = services
        self._busy = busy

    @property
    def timeout(self) -> float:
        """Seconds a resource or prompt function may run: the gate's default timeout."""
        limits = self._services.limits
        return min(limits.default_timeout, limits.max_timeout)

    def start(
        self,
        kind: ReadKind,
        name: str,
        *,
        principal: Principal,
        session_id: str | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> Read:
        """A new read of ``name`` (the URI read, not its template; or the prompt's name)."""
        call = Call(
            services=self._services,
            tool_name=f"{kind}:{name}",
            raw_arguments=None,
            principal=principal,
            session_id=session_id,
            call_id=new_id("read"),
            trace_id=os.urandom(16).hex(),
            kind=kind,
        )
        read = Read(call, kind, name)
        read.arguments = arguments or {}
        return read

    def runner(self, read: Read, key: str, deadline: Deadline) -> Callable[..., Any]:
        """How ``read``'s function runs: on the gate's runner under ``key``'s caps,
        answered at ``deadline``; a late end is recorded as its ``late`` record.

        Returns a :data:`~callgate.contract.resources.FunctionRunner`.
        """
        runner = self._services.runner

        async def on_late(late: LateEnd) -> None:
            outcome = Status.OK if late.ended == "returned" else late.kind or ErrorKind.TRANSIENT
            await self._append(self._record(read, "late", outcome, {"late": late.facts()}))

        async def run(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
            return await runner.run(
                key,
                functools.partial(fn, **kwargs),
                is_async=inspect.iscoroutinefunction(fn),
                deadline=deadline,
                detail=read.detail,
                on_late=on_late,
            )

        return run

    async def record(self, read: Read) -> AuditRecord:
        """Append the read's ``final`` audit record; once durable, return it.

        Raises:
            StoreUnavailable: the store did not answer; the record is kept and
                written once it does (``Gate.reconcile``): the reader is told to
                try again (a read is not served unaudited), never driver text.
        """
        return await self._append(self._record(read, "final", None, None))

    def _record(
        self,
        read: Read,
        phase: AuditPhase,
        outcome: Status | ErrorKind | None,
        detail: dict[str, Any] | None,
    ) -> AuditRecord:
        record = audit_record(read.call, phase=phase, envelope=read.envelope(outcome))
        return record if detail is None else replace(record, detail=detail)

    async def _append(self, record: AuditRecord) -> AuditRecord:
        services = self._services
        # Counted as running, so closing the gate waits for the record to be written.
        with self._busy:
            try:
                await services.committer.append(record)
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                services.backlog.keep_audit(record, why=exc)
                raise StoreUnavailable(
                    f"the store did not answer ({describe(exc)}); the record is kept"
                ) from exc
        return record
