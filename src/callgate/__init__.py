"""callgate: the model proposes; callgate disposes.

A governed tool-calling runtime: every tool call is resolved, validated,
injected with trusted fields, authorized, classified, decided by policy,
executed under limits, normalized into one Envelope, shaped and recorded.
"""

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
    ConstructionError,
    ErrorKind,
    PermissionDenied,
    ToolError,
    TransientError,
    UnknownOutcomeError,
    UnrecoverableError,
)
from callgate.runtime.approvals import ApprovalError, Approvals
from callgate.runtime.call import Limits
from callgate.runtime.envelope import Decision, Envelope, ErrorInfo, Status, Timing, Truncation
from callgate.runtime.gate import Gate
from callgate.runtime.policy import Approvers, Effect, Policy, PolicyError, Rule

__version__ = "0.1.0"

__all__ = [
    "ApprovalError",
    "Approvals",
    "Approvers",
    "BusinessStateError",
    "ConstructionError",
    "Decision",
    "Effect",
    "Envelope",
    "ErrorInfo",
    "ErrorKind",
    "Gate",
    "InvalidIdentity",
    "Limits",
    "PermissionDenied",
    "Policy",
    "PolicyError",
    "Principal",
    "RiskTier",
    "Rule",
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
    "__version__",
    "tool",
]
