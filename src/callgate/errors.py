"""Every exception callgate raises, and the fixed error taxonomy of tool calls.

One root, three kinds kept apart. A builtin in brackets is a second base, kept
so that code catching it still does (``except ValueError`` catches a
``DuplicateTool``)::

    CallgateError
    ├── UserError                  a developer mistake: raised early, the fix in the message
    │   ├── InvalidArgument [ValueError]      a value a callgate API cannot use
    │   ├── InvalidDefinition [TypeError]     a function or option that cannot become a tool
    │   ├── InvalidToolName [ValueError]      callgate.contract.naming
    │   ├── InvalidIdentity [ValueError]      callgate.contract.identity
    │   ├── DuplicateTool [ValueError]        callgate.contract.toolbox
    │   ├── DuplicateResource [ValueError]    callgate.contract.resources
    │   ├── DuplicatePrompt [ValueError]      callgate.contract.resources
    │   ├── MissingPromptArgument [ValueError]  callgate.contract.resources
    │   ├── DuplicateToolbox [ValueError]     callgate.runtime.registry
    │   ├── PolicyError [ValueError]          callgate.runtime.policy
    │   ├── BadCursor [ValueError]            callgate.runtime.cursor
    │   ├── ConfigError [ValueError]          callgate.config
    │   ├── UpstreamConfigError [ValueError]  callgate.gateway.settings
    │   ├── AuthConfigError [ValueError]      callgate.auth.settings
    │   ├── SkillError [ValueError]           callgate.discovery.skills
    │   │   └── SkillFileError                callgate.discovery.skills
    │   ├── EmbeddingsUnavailable             callgate.discovery.embeddings
    │   ├── CodeModeUnavailable               callgate.codemode.sandbox
    │   ├── MissingCredentials [ValueError]   callgate.agent.providers
    │   └── ScriptExhausted [RuntimeError]    callgate.agent.model
    ├── RuntimeFailure             something failed while running: no code is wrong
    │   ├── ApprovalError                     callgate.runtime.approvals
    │   ├── PolicyEvaluationError [RuntimeError]  callgate.runtime.policy
    │   ├── Unresponsive                      callgate.runtime.runner
    │   ├── NotStarted [TimeoutError]         callgate.runtime.runner
    │   ├── Overran [TimeoutError]            callgate.runtime.runner
    │   ├── StoreUnavailable                  callgate.store.failures
    │   ├── ModelError                        callgate.agent.model
    │   ├── CliError                          callgate.cli._common
    │   ├── UpstreamUnavailable               callgate.gateway.connection
    │   ├── UpstreamLost                      callgate.gateway.connection
    │   ├── TokenError                        callgate.gateway._oauth
    │   ├── InvalidToken                      callgate.auth.errors
    │   ├── Unauthenticated                   callgate.console.auth
    │   └── DemoStateError [RuntimeError]     callgate.demo._state
    └── ToolError                  raised by a tool on purpose; the message is for the model
        ├── ConstructionError
        │   ├── ClientCannot                  callgate.contract.context
        │   └── UnknownHandle                 callgate.contract.handles
        ├── PermissionDenied
        ├── BusinessStateError
        │   └── WaitingForApproval
        ├── TransientError
        │   └── HandleConflict                callgate.contract.handles
        ├── UnknownOutcomeError
        ├── UnrecoverableError
        └── InputRequired                     callgate.contract.context

Only the classes without a module named are defined here; the others live next
to the code that raises them, and this module imports none of it.

Every failure of a tool call maps to exactly one :class:`ErrorKind`. A tool
raises a :class:`ToolError` with a message written *for the model*: what went
wrong and what to do next. Anything else a tool raises is ``unrecoverable`` and
its text never reaches the model.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


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


class CallgateError(Exception):
    """The root of every exception callgate raises (see the tree above)."""


class UserError(CallgateError):
    """A developer mistake in using callgate: a bad argument, definition or configuration.

    Raised as early as possible (when a tool is registered, a gate or a limit is
    built), with the fix in the message; a program does not recover from it, its
    author fixes it.
    """


class InvalidArgument(UserError, ValueError):
    """A value given to a callgate API that it cannot use; the message names the
    argument and what is allowed."""


class InvalidDefinition(UserError, TypeError):
    """A function, or an option given with it, that cannot be served as a tool,
    resource or prompt (a parameter without a type hint, ``*args``, an unknown
    option); the message names the function and what to change."""


class RuntimeFailure(CallgateError):
    """Something failed while running, though the code using callgate is right:
    an approval that cannot be decided, a model request, a policy condition, the
    store not answering, a tool that does not respond in time.

    What to do depends on the subclass; some say whether trying again may work
    (``ModelError.retryable``).
    """


class ToolError(CallgateError):
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


class WaitingForApproval(BusinessStateError):
    """The tool's work waits for a person's decision on a call it made through the
    gate (a program's call, in code mode): its Envelope is ``pending_approval``
    with ``approval`` (an :class:`~callgate.runtime.envelope.ApprovalRequest`),
    and calling it again once the approval is decided goes on."""

    def __init__(self, message: str, *, approval: Any, next_step: str | None = None) -> None:
        super().__init__(message, next_step=next_step)
        self.approval = approval


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
