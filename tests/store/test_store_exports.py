"""``callgate.store`` exports a deliberate list of names."""

from __future__ import annotations

import callgate.store


def test_exported_names() -> None:
    assert sorted(callgate.store.__all__) == [
        "ApprovalRecord",
        "ApprovalState",
        "ApprovedBy",
        "AuditPhase",
        "AuditRecord",
        "GroupCommitter",
        "HandleRecord",
        "IdempotencyRecord",
        "IdempotencyState",
        "MemoryStore",
        "PreviewRecord",
        "SQLStore",
        "Store",
        "StoredResult",
        "Taint",
        "normalize_url",
        "open_store",
    ]
    for name in callgate.store.__all__:
        assert getattr(callgate.store, name) is not None
