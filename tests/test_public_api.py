"""The top-level package exports exactly the names listed here: adding or removing
one is an API decision, made by changing this list too."""

from __future__ import annotations

import callgate

EXPORTED = [
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


def test_exported_names() -> None:
    # A list, not a set: a name listed twice in __all__ fails too.
    assert sorted(callgate.__all__) == EXPORTED
    for name in callgate.__all__:
        assert getattr(callgate, name) is not None, name


def test_every_lazily_imported_name_is_exported() -> None:
    # callgate.X works for each name of the lazy table: all of them must be declared.
    assert set(callgate._HOMES) == set(callgate.__all__) - {"__version__"}
