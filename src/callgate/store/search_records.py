"""What tool search keeps in the store: embedding vectors, and usage from the audit.

Part of :class:`~callgate.store.base.Store` (which extends this protocol), and the
narrow seam a search index depends on: it needs nothing else of the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

__all__ = ["VECTOR_CHUNK", "SearchRecords"]

VECTOR_CHUNK = 500
"""Digests per statement (an ``IN`` list, or the rows of one write transaction).

Older SQLite builds allow 999 bound variables per statement; short write
transactions let the audit's appends through between them."""


class SearchRecords(Protocol):
    """Embedding vectors by model and digest, and each tool's recent usage."""

    async def get_vectors(self, model: str, digests: Sequence[str]) -> dict[str, bytes]:
        """The vectors kept for ``model``, by digest: only the digests found.

        Args:
            model: The embedding model's name; vectors of other models are never
                returned.
            digests: Digests of the texts embedded (any number; duplicates are
                allowed).
        """
        ...

    async def put_vectors(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Keep ``vectors`` (digest -> float32 array, packed by the caller) for
        ``model``, replacing any kept for the same digest. Idempotent; any number
        at once, written in several short transactions (a cache needs no more)."""
        ...

    async def tool_usage(self, *, since: datetime) -> dict[str, tuple[int, int]]:
        """Per tool (full name): calls recorded at or after ``since`` and how many
        of them failed, counted as :meth:`~callgate.store.base.Store.count_outcomes`
        counts them: ``final`` audit records, failed when their status is
        ``error``. Tools without a call since then are absent.

        Raises:
            ValueError: ``since`` is naive.
        """
        ...
