"""The state of one call as it moves through the chain, and the gate's limits."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from callgate.contract import (
    FULL_NAMES,
    Principal,
    ToolNames,
    ToolSink,
    ToolSpec,
    rename_in_text,
)
from callgate.errors import ErrorKind, InvalidArgument, default_next_step
from callgate.runtime.envelope import Decision, Envelope, ErrorInfo, Status, Timing
from callgate.runtime.redaction import redact

if TYPE_CHECKING:
    from callgate.runtime.services import InFlight, Services
    from callgate.store import PreviewRecord


@dataclass(kw_only=True, frozen=True)
class Limits:
    """Bounds the gate enforces on every call.

    Raises:
        InvalidArgument: a bound that cannot work (a timeout not positive, fewer
            threads per tool than one, a result budget below its floor).
    """

    default_timeout: float = 30.0
    """Seconds a tool may run when its contract names no timeout."""
    max_timeout: float = 300.0
    """Hard maximum: no contract or caller can ask for more."""
    max_attempts: int = 3
    """Tries per call for transient failures of retry-safe tools (1 = no retry)."""
    session_retry_budget: int = 10
    """Retries a session may spend in all (needs a session id)."""
    backoff_base: float = 0.05
    backoff_max: float = 2.0
    duplicate_call_limit: int = 3
    """Successful calls of one tool with the same arguments per session before the
    next identical one is refused (0 disables)."""
    max_result_tokens: int = 4000
    """Estimated tokens of payload the model receives at most; the rest is kept
    in the store and readable by cursor."""
    max_result_bytes: int = 8 * 1024 * 1024
    """Largest result (as JSON text) a call may return: a result over it is neither
    kept in the store nor shown (see docs/chain.md, Shaping)."""
    idempotency_ttl: timedelta = timedelta(hours=24)
    approval_ttl: timedelta = timedelta(hours=24)
    """How long a parked call waits for a human, and an approval stays usable."""
    result_ttl: timedelta = timedelta(hours=24)
    max_argument_bytes: int = 1_000_000
    """Largest arguments accepted, measured as JSON text: beyond it a call is
    refused before validation (a ``construction`` error), never stored or echoed."""
    backlog_limit: int = 10_000
    """Writes (final audit records, idempotency answers) kept in memory while the
    store does not answer; beyond it they are dropped and logged as errors."""
    tool_threads: int = 8
    """Worker threads one sync tool (or resource, prompt, change helper) may hold,
    running or abandoned after a timeout: further calls wait for one, and once as
    many are stuck, new calls are refused as not responding. Also the number of
    stray async tasks (ignoring cancellation) a tool may have before it is refused."""
    max_threads: int = 40
    """Worker threads all sync tools of the gate may hold together."""

    def __post_init__(self) -> None:
        if self.default_timeout <= 0 or self.max_timeout <= 0:
            raise InvalidArgument("timeouts must be positive")
        if self.max_attempts < 1:
            raise InvalidArgument("max_attempts must be at least 1")
        if self.max_result_tokens < 50:
            raise InvalidArgument("max_result_tokens must be at least 50")
        if self.max_result_bytes < self.max_result_tokens * 4:
            raise InvalidArgument("max_result_bytes must hold at least max_result_tokens * 4 bytes")
        if self.max_argument_bytes < 1_000:
            raise InvalidArgument("max_argument_bytes must be at least 1,000")
        if self.backlog_limit < 1:
            raise InvalidArgument("backlog_limit must be at least 1")
        if self.tool_threads < 1 or self.max_threads < self.tool_threads:
            raise InvalidArgument("tool_threads must be at least 1 and at most max_threads")


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
    call_id: str = field(default_factory=lambda: new_id("call"))
    trace_id: str = field(default_factory=lambda: os.urandom(16).hex())
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
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
    intent_written: bool = False
    idempotency_scope: str | None = None
    """Set only on the call that registered the key's in-flight entry."""
    idempotency_owner: bool = False
    inflight: InFlight | None = None

    def __post_init__(self) -> None:
        self.tool_name = bounded_name(self.tool_name)

    def shown(self, name: str) -> str:
        """The caller's name for the full tool name ``name``, for model-facing texts."""
        return self.names.shown(name)

    def how_to_check(self) -> str:
        """How the model learns whether this call's change happened, after an
        unknown outcome: the change's status tool, else a read."""
        if self.spec is not None and self.spec.change is not None:
            return f"call {self.shown(self.spec.change.status_tool)} with the same preview_id"
        return "check the current state (with a read or status tool)"

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

        For the apply of a previewed change: the previewed arguments and the id.
        """
        if self.preview is not None and self.spec is not None and self.spec.change is not None:
            return {**self.preview.arguments, "preview_id": self.preview.id}
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
            ),
        )
