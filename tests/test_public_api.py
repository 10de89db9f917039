"""The names users' code imports stay importable from the top-level package."""

from __future__ import annotations

import callgate

PROMISED = {
    "Envelope",
    "Gate",
    "Principal",
    "Toolbox",
    "tool",
    "Trusted",
    "Policy",
    "Rule",
    "Limits",
    "ErrorKind",
    "ConstructionError",
    "PermissionDenied",
    "BusinessStateError",
    "TransientError",
    "UnknownOutcomeError",
    "UnrecoverableError",
    "Approvals",
    "ApprovalError",
}


def test_promised_names_are_exported() -> None:
    assert set(callgate.__all__) >= PROMISED
    for name in callgate.__all__:
        assert getattr(callgate, name) is not None, name
