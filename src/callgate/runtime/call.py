"""The state of one call as it moves through the chain."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from callgate.contract import (
    FULL_NAMES,
    Principal,
    ToolNames,
    ToolSink,
    ToolSpec,
    rename_in_text,
)
from callgate.contract.spec import ToolHandler
from callgate.errors import ErrorKind, default_next_step
from callgate.runtime.envelope import Decision, Envelope, ErrorInfo, Status, Timing
from callgate.runtime.redaction import redact

if TYPE_CHECKING:
    from callgate.runtime.services import InFlight, Services
    from callgate.store import PreviewRecord


_PRINCIPAL_SOURCES = {"tenant_id": "tenant", "tenant": "tenant", "user_id": "user", "user": "user"}


MAX_NAME_CHARS = 200
"""Longest tool name echoed and stored as sent (a real one is at most 128)."""


def bounded_name(name: str) -> str:
    """``name``, or its first ``MAX_NAME_CHARS`` characters and its length.

    What a caller sends as a tool name is echoed to the model and stored in the
    audit's ``tool`` column; a three-million-character name must do neither in
    full. No real name is that long, so the cut one still resolves to nothing.
    """
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(name.encode(errors="replace")).hexdigest()[:12]
    return f"{name[:MAX_NAME_CHARS]}... ({len(name):,} characters, sha256 {digest})"


def new_id(prefix: str) -> str:
    # 128 random bits like uuid4, at a quarter of the cost (two per call).
    return f"{prefix}_{os.urandom(16).hex()}"


def hash_json(value: Any) -> str:
    """Stable hash of a JSON-able value (key order does not matter)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


@dataclass(kw_only=True)
class Call:
    """Mutable state of one governed call; each stage reads and fills parts of it."""

    services: Services
    tool_name: str
    raw_arguments: Any
    principal: Principal
    session_id: str | None = None
    idempotency_key: str | None = None
    timeout: float | None = None
    sink: ToolSink | None = None
    """Where the running tool's progress and log messages go (its ToolContext)."""
    names: ToolNames = FULL_NAMES
    """How the caller names tools: ``tool_name`` is its name, and every text
    written for it names tools with :meth:`shown`."""
    kind: Literal["tool", "resource", "prompt"] = "tool"
    """What is called: a tool (through the chain), or a resource read or prompt
    get (audited alike, see :mod:`callgate.runtime.reads`)."""
    call_id: str = field(default_factory=lambda: new_id("call"))
    trace_id: str = field(default_factory=lambda: os.urandom(16).hex())
    started_at: datetime = field(init=False)
    t0: float = field(default_factory=time.perf_counter)

    spec: ToolSpec | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    """Validated model-filled arguments (JSON form)."""
    prepared: Any = None
    injected: dict[str, Any] = field(default_factory=dict)
    dropped_fields: list[str] = field(default_factory=list)
    secret_fields: frozenset[str] = frozenset()
    """Trusted fields holding secrets: redacted wherever inputs are kept or shown."""
    args_hash: str | None = None
    decision: Decision | None = None
    refused_by: str | None = None
    """The stage that ended the call with an error before policy decided (resolve,
    authorize, validate, inject): the audit's decision is ``refused:<stage>``."""
    attempts: int = 0
    payload: Any = None
    detail: dict[str, Any] = field(default_factory=dict)
    """Operator-only facts for the audit record."""
    impact: Any = None
    """For the apply of a previewed change: the preview's impact (seen by policy)."""
    preview: PreviewRecord | None = None
    approval_to_consume: str | None = None
    """An approved approval for this exact call, used once the call owns its run."""
    approval_id: str | None = None
    """The approval this call ran under (its Envelope is kept on the approval)."""
    handler: ToolHandler | None = None
    """What the execute stage runs, when not the tool's own handler (the apply of a
    previewed change runs its apply function)."""
    before_run: Callable[[Call], Awaitable[Envelope | None]] | None = None
    """A check the call that owns the run makes just before the tool runs (after
    the idempotency key is claimed and the approval used); an Envelope ends it."""
    repeatable: bool = False
    """Exempt from the duplicate-call limit: calling it again is how a model
    recovers (a new preview), or how it checks (a status)."""
    bound_arguments: dict[str, Any] | None = None
    """Inputs the call is bound to, when not its own (an apply: the previewed ones)."""
    check_with: str | None = None
    """How the model learns whether this call's change happened (see :meth:`how_to_check`)."""
    intent_written: bool = False
    idempotency_scope: str | None = None
    """Set only on the call that registered the key's in-flight entry."""
    idempotency_owner: bool = False
    inflight: InFlight | None = None

    now: Callable[[], datetime] = field(init=False, repr=False)
    """The gate's time (its clock), for what expires."""

    def __post_init__(self) -> None:
        self.tool_name = bounded_name(self.tool_name)
        self.now = self.services.clock.now
        self.started_at = self.now()

    def shown(self, name: str) -> str:
        """The caller's name for the full tool name ``name``, for model-facing texts."""
        return self.names.shown(name)

    def how_to_check(self) -> str:
        """How the model learns whether this call's change happened, after an
        unknown outcome: ``check_with`` (a change's status tool), else a read."""
        return self.check_with or "check the current state (with a read or status tool)"

    def effective_timeout(self) -> float:
        """The tool's (or the caller's) timeout, never above the gate's hard maximum."""
        limits = self.services.limits
        wanted = (
            self.timeout or (self.spec.timeout if self.spec else None) or limits.default_timeout
        )
        return min(wanted, limits.max_timeout)

    def in_callers_names(self, text: str | None) -> str | None:
        """A text written with full tool names (a tool's own error message: "find
        the id with ops.campaigns_find") with every tool named as the caller sees it."""
        if text is None or self.names is FULL_NAMES:
            return text
        known = [spec.name for spec in self.services.registry.specs()]
        return rename_in_text(text, known, self.names)

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    def full_arguments(self) -> dict[str, Any]:
        """Model arguments plus injected trusted values: exactly what the tool gets.

        For a call bound to other inputs (the apply of a previewed change): those.
        """
        if self.bound_arguments is not None:
            return dict(self.bound_arguments)
        return {**self.arguments, **self.injected}

    def shown_arguments(self) -> dict[str, Any]:
        """:meth:`full_arguments` as people may see and stores may keep them
        (secret fields redacted); the argument hash is computed over this form."""
        return redact(self.full_arguments(), self.secret_fields)

    def trusted_value(self, source: str) -> Any:
        """The server-side value for a trusted field's ``source``, or None when
        the caller has none: the principal's tenant, user, scopes, roles or
        attributes, the session, else the gate's context (secrets included)."""
        principal = self.principal
        attr = _PRINCIPAL_SOURCES.get(source)
        if attr == "tenant":
            return principal.tenant
        if attr == "user":
            return principal.user
        if source == "scopes":
            return sorted(principal.scopes)
        if source == "roles":
            return sorted(principal.roles)
        if source == "session_id":
            return self.session_id
        if source in principal.attributes:
            return principal.attributes[source]
        return self.services.context.get(source)

    def envelope(
        self,
        status: Status,
        *,
        payload: Any = None,
        error: ErrorInfo | None = None,
        **extra: Any,
    ) -> Envelope:
        return Envelope(
            tool=self.spec.name if self.spec else self.tool_name,
            tool_version=self.spec.version if self.spec else None,
            call_id=self.call_id,
            trace_id=self.trace_id,
            status=status,
            payload=payload,
            error=error,
            timing=Timing(
                started_at=self.started_at,
                duration_ms=round(self.elapsed_ms, 3),
                attempts=self.attempts,
            ),
            decision=self.decision,
            idempotency_key=self.idempotency_key,
            **extra,
        )

    def fail(
        self,
        kind: ErrorKind,
        message: str,
        *,
        next_step: str | None = None,
        retryable: bool = False,
        detail_ref: str | None = None,
        missing_capability: str | None = None,
        missing_scopes: tuple[str, ...] = (),
    ) -> Envelope:
        """An error Envelope with the model-facing message and its next step."""
        return self.envelope(
            Status.ERROR,
            error=ErrorInfo(
                kind=kind,
                message_for_model=message,
                retryable=retryable,
                next_step=next_step or default_next_step(kind),
                detail_ref=detail_ref,
                missing_capability=missing_capability,
                missing_scopes=missing_scopes,
            ),
        )
