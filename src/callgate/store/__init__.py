"""Persistence: the audit trail, idempotency records and spilled results.

Open a store by URL with :func:`open_store`; write audit records through a
:class:`GroupCommitter` so concurrent calls share commits.
"""

from __future__ import annotations

from callgate.store.base import (
    ApprovalRecord,
    ApprovalState,
    ApprovedBy,
    AuditPhase,
    AuditRecord,
    HandleRecord,
    IdempotencyRecord,
    IdempotencyState,
    PreviewRecord,
    Store,
    StoredResult,
    Taint,
)
from callgate.store.batching import GroupCommitter
from callgate.store.memory import MemoryStore
from callgate.store.sql import SQLStore, normalize_url

__all__ = [
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


async def open_store(url: str) -> Store:
    """Create the store for ``url`` and open it (running migrations).

    Args:
        url: ``memory://`` for a :class:`MemoryStore`, else a database URL
            (``sqlite:///path.db``, ``postgresql://user@host/db``, ...).

    Raises:
        ValueError: ``url`` is not a database URL.
    """
    store: Store = MemoryStore() if url in ("memory:", "memory://") else SQLStore(url)
    await store.open()
    return store
