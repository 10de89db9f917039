"""The Envelope: one result shape for every tool and every upstream."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from callgate.errors import ErrorKind
from callgate.runtime.shaping import dumps


class Status(StrEnum):
    OK = "ok"
    ERROR = "error"
    PENDING_APPROVAL = "pending_approval"
    PENDING_INPUT = "pending_input"
    TASK = "task"


class ErrorInfo(BaseModel):
    """What went wrong, written for the model, and what to do next.

    A pending call (``pending_approval``, ``pending_input``) carries one too: the
    explanation the model reads ("Nothing was executed: ..."), though nothing failed.
    """

    model_config = ConfigDict(frozen=True)

    kind: ErrorKind
    message_for_model: str
    retryable: bool = False
    next_step: str | None = None
    detail_ref: str | None = None
    """Where operators find the details (the audit record's call id)."""
    missing_capability: str | None = None
    """The capability of the caller's client the tool needed and the client lacks
    (``elicitation``, ``sampling``, ``roots``): the tool raised ``ClientCannot``."""
    missing_scopes: tuple[str, ...] = ()
    """The scopes the caller lacks for this tool, in order, when that is why the
    call was refused (a ``permission`` error): what a client steps up to."""


class ApprovalRequest(BaseModel):
    """The approval a parked call waits for (``Status.PENDING_APPROVAL``)."""

    model_config = ConfigDict(frozen=True)

    approval_id: str
    state: str = "pending"
    reason: str
    expires_at: datetime


class InputRequest(BaseModel):
    """What a call waits for from the caller's client (``Status.PENDING_INPUT``).

    The tool asked its client something (``ToolContext.elicit``, ``sample``,
    ``list_roots``) that must first be answered: the call is made again with the
    answers, and the tool runs again from the start.
    """

    model_config = ConfigDict(frozen=True)

    requests: dict[str, dict[str, Any]]
    """The questions by key, each as the request the client answers (its JSON:
    ``{"method": "elicitation/create", "params": {...}}``)."""


class Truncation(BaseModel):
    """An explicit notice that the payload is not the whole result."""

    model_config = ConfigDict(frozen=True)

    shown: int
    total: int
    unit: str
    """``items`` (of a list) or ``chars`` (of the JSON text)."""
    cursor: str | None
    notice: str


class Timing(BaseModel):
    model_config = ConfigDict(frozen=True)

    started_at: datetime
    duration_ms: float
    attempts: int = 1


class Decision(BaseModel):
    """What policy decided and why."""

    model_config = ConfigDict(frozen=True)

    effect: str
    """``allow``, ``deny``, ``require_approval``, ``approved`` (an approval was used)
    or ``auto_approved``. Absent from the Envelope when the call ended before policy."""
    reason: str | None = None
    rule: str | None = None


class Envelope(BaseModel):
    """The result of one governed call, whatever happened."""

    model_config = ConfigDict(frozen=True)

    tool: str
    tool_version: str | None = None
    call_id: str
    trace_id: str
    status: Status
    payload: Any = None
    error: ErrorInfo | None = None
    raw_ref: str | None = None
    truncated: Truncation | None = None
    timing: Timing | None = None
    decision: Decision | None = None
    approval: ApprovalRequest | None = None
    """With ``pending_approval``: the approval the call waits for."""
    input: InputRequest | None = None
    """With ``pending_input``: what the caller's client is asked first."""
    idempotency_key: str | None = None
    replayed: bool = False
    """True when this Envelope was stored earlier and returned again for the
    same idempotency key (the tool did not run again)."""

    # (payload, its JSON text) once measured by the shape stage: the wire reuses
    # the text. Kept with the payload object itself, so a copy with another
    # payload never shows this one's text.
    _payload_text: tuple[Any, str] | None = PrivateAttr(default=None)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def payload_json(self) -> str:
        """The payload as compact JSON text (see :func:`callgate.runtime.shaping.dumps`),
        serialized at most once per Envelope."""
        cached = self._payload_text
        if cached is not None and cached[0] is self.payload:
            return cached[1]
        text = dumps(self.payload)
        self._payload_text = (self.payload, text)
        return text

    def with_payload_json(self, text: str) -> Envelope:
        """This Envelope, knowing ``text`` is its payload's JSON (from :meth:`payload_json`'s
        encoder): the shape stage hands over the text it measured."""
        self._payload_text = (self.payload, text)
        return self

    def payload_text(self) -> str:
        """The payload as the model reads it: a string as it is, anything else as
        compact JSON (:meth:`payload_json`)."""
        return self.payload if isinstance(self.payload, str) else self.payload_json()

    def explanation(self) -> str:
        """For any status but ``ok``: the message the model reads, its next step,
        and the approval the call waits on."""
        lines: list[str] = []
        if self.error is not None:
            lines.append(self.error.message_for_model)
            if self.error.next_step:
                lines.append(f"Next step: {self.error.next_step}")
        else:
            lines.append(f"The call ended with status {self.status.value}.")
        if self.approval is not None:
            lines.append(f"approval_id: {self.approval.approval_id}")
        return "\n".join(lines)

    def for_model(self) -> str:
        """The one text a model reads for this Envelope, whoever shows it (the
        agent loop, an MCP client): the payload with the truncation notice on a
        line of its own, or :meth:`explanation`."""
        if self.status is not Status.OK:
            return self.explanation()
        text = self.payload_text()
        if self.truncated is not None:
            text = f"{text}\n{self.truncated.notice}"
        return text
