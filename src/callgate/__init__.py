"""callgate: the model proposes; callgate disposes.

A governed tool-calling runtime: every tool call is resolved, validated,
injected with trusted fields, authorized, classified, decided by policy,
executed under limits, normalized into one Envelope, shaped and recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from callgate._lazy import lazy_exports

if TYPE_CHECKING:
    from callgate.clock import Clock, ManualClock
    from callgate.contract import (
        InvalidIdentity,
        Principal,
        RiskTier,
        Secret,
        ToolAnnotations,
        Toolbox,
        ToolContext,
        ToolSpec,
        Trusted,
        TrustedField,
        tool,
    )
    from callgate.errors import (
        BusinessStateError,
        CallgateError,
        ConstructionError,
        ErrorKind,
        PermissionDenied,
        RuntimeFailure,
        ToolError,
        TransientError,
        UnknownOutcomeError,
        UnrecoverableError,
        UserError,
    )
    from callgate.runtime.approvals import ApprovalError, Approvals
    from callgate.runtime.envelope import (
        ApprovalRequest,
        Decision,
        Envelope,
        ErrorInfo,
        InputRequest,
        Status,
        Timing,
        Truncation,
    )
    from callgate.runtime.gate import Gate
    from callgate.runtime.limits import Limits
    from callgate.runtime.policy import Approvers, Effect, Policy, PolicyError, Rule

# Each name is imported from its module on first use: ``callgate --help`` and
# ``callgate serve`` import only what they need (the full package costs a few
# hundred milliseconds: the store's SQLAlchemy, the MCP SDK, the CEL engine).
_HOMES = {
    "InvalidIdentity": "callgate.contract",
    "Principal": "callgate.contract",
    "RiskTier": "callgate.contract",
    "Secret": "callgate.contract",
    "ToolAnnotations": "callgate.contract",
    "Toolbox": "callgate.contract",
    "ToolContext": "callgate.contract",
    "ToolSpec": "callgate.contract",
    "Trusted": "callgate.contract",
    "TrustedField": "callgate.contract",
    "tool": "callgate.contract",
    "BusinessStateError": "callgate.errors",
    "CallgateError": "callgate.errors",
    "ConstructionError": "callgate.errors",
    "ErrorKind": "callgate.errors",
    "PermissionDenied": "callgate.errors",
    "RuntimeFailure": "callgate.errors",
    "ToolError": "callgate.errors",
    "TransientError": "callgate.errors",
    "UnknownOutcomeError": "callgate.errors",
    "UnrecoverableError": "callgate.errors",
    "UserError": "callgate.errors",
    "ApprovalError": "callgate.runtime.approvals",
    "Approvals": "callgate.runtime.approvals",
    "Limits": "callgate.runtime.limits",
    "Decision": "callgate.runtime.envelope",
    "ApprovalRequest": "callgate.runtime.envelope",
    "InputRequest": "callgate.runtime.envelope",
    "Clock": "callgate.clock",
    "ManualClock": "callgate.clock",
    "Envelope": "callgate.runtime.envelope",
    "ErrorInfo": "callgate.runtime.envelope",
    "Status": "callgate.runtime.envelope",
    "Timing": "callgate.runtime.envelope",
    "Truncation": "callgate.runtime.envelope",
    "Gate": "callgate.runtime.gate",
    "Approvers": "callgate.runtime.policy",
    "Effect": "callgate.runtime.policy",
    "Policy": "callgate.runtime.policy",
    "PolicyError": "callgate.runtime.policy",
    "Rule": "callgate.runtime.policy",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__version__ = "0.1.0"

__all__ = [
    "ApprovalError",
    "ApprovalRequest",
    "Approvals",
    "Approvers",
    "BusinessStateError",
    "CallgateError",
    "Clock",
    "ConstructionError",
    "Decision",
    "Effect",
    "Envelope",
    "ErrorInfo",
    "ErrorKind",
    "Gate",
    "InputRequest",
    "InvalidIdentity",
    "Limits",
    "ManualClock",
    "PermissionDenied",
    "Policy",
    "PolicyError",
    "Principal",
    "RiskTier",
    "Rule",
    "RuntimeFailure",
    "Secret",
    "Status",
    "Timing",
    "ToolAnnotations",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "Toolbox",
    "TransientError",
    "Truncation",
    "Trusted",
    "TrustedField",
    "UnknownOutcomeError",
    "UnrecoverableError",
    "UserError",
    "__version__",
    "tool",
]
