"""The fixed error taxonomy, and exceptions tool authors raise to use it.

Every failure of a call maps to exactly one :class:`ErrorKind`. A tool raises
one of the exceptions below with a message written *for the model*: what went
wrong and what to do next. Anything else a tool raises is ``unrecoverable`` and
its text never reaches the model.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    CONSTRUCTION = "construction"
    """Bad or missing arguments, unknown tool or id: fix the arguments or ask the user."""
    PERMISSION = "permission"
    """Missing scope, another tenant's object, approval denied: never auto-retried."""
    BUSINESS_STATE = "business_state"
    """The world does not allow it now: explain, hand to a human or another tool."""
    TRANSIENT = "transient"
    """Rate limit, timeout of a read, upstream restarting: retried within budget if safe."""
    UNKNOWN_OUTCOME = "unknown_outcome"
    """A write may or may not have happened: never retried; query its status."""
    UNRECOVERABLE = "unrecoverable"
    """A tool bug or a gone upstream: stop; operators have the details."""


_DEFAULT_NEXT_STEP = {
    ErrorKind.CONSTRUCTION: "Fix the arguments and call again, or ask the user for what is missing.",
    ErrorKind.PERMISSION: "Do not retry. Tell the user it is not allowed, or hand over to a human.",
    ErrorKind.BUSINESS_STATE: "Do not retry as is. Explain the situation to the user or use another tool.",
    ErrorKind.TRANSIENT: "Wait a moment and try again.",
    ErrorKind.UNKNOWN_OUTCOME: "Do not retry. Check whether the change happened before doing anything else.",
    ErrorKind.UNRECOVERABLE: "Stop and tell the user the tool failed; do not retry.",
}

RETRYABLE_KINDS = frozenset({ErrorKind.TRANSIENT})


def default_next_step(kind: ErrorKind) -> str:
    return _DEFAULT_NEXT_STEP[kind]


class ToolError(Exception):
    """Base of the errors a tool raises on purpose. ``message`` is shown to the model."""

    kind: ErrorKind = ErrorKind.UNRECOVERABLE

    def __init__(self, message: str, *, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


class ConstructionError(ToolError):
    """The arguments cannot work: wrong or unknown id, impossible combination."""

    kind = ErrorKind.CONSTRUCTION


class PermissionDenied(ToolError):
    """The caller may not do this (e.g. the object belongs to another tenant)."""

    kind = ErrorKind.PERMISSION


class BusinessStateError(ToolError):
    """The request is well-formed and allowed, but the world's state forbids it now."""

    kind = ErrorKind.BUSINESS_STATE


class TransientError(ToolError):
    """A temporary failure; ``retry_after`` (seconds) is a hint for the backoff."""

    kind = ErrorKind.TRANSIENT

    def __init__(
        self, message: str, *, next_step: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, next_step=next_step)
        self.retry_after = retry_after


class UnknownOutcomeError(ToolError):
    """The tool cannot tell whether its side effect happened."""

    kind = ErrorKind.UNKNOWN_OUTCOME


class UnrecoverableError(ToolError):
    """The tool knows it cannot succeed (configuration missing, dependency gone)."""

    kind = ErrorKind.UNRECOVERABLE
