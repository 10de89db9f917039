"""The in-memory store's records for tool search: embedding vectors, usage per tool.

A mixin of :class:`~callgate.store.memory.MemoryStore` with the semantics of
:class:`~callgate.store.sql_search.SQLSearchRecords` (see
:class:`~callgate.store.search_records.SearchRecords`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from anyio.lowlevel import checkpoint

from callgate.store.base import AuditRecord


class MemorySearchRecords:
    """Vectors in a dict; tool usage counted over the store's audit list."""

    _audit: list[AuditRecord]
    _vectors: dict[tuple[str, str], bytes]

    async def get_vectors(self, model: str, digests: Sequence[str]) -> dict[str, bytes]:
        await checkpoint()
        found: dict[str, bytes] = {}
        for digest in digests:
            vector = self._vectors.get((model, digest))
            if vector is not None:
                found[digest] = vector
        return found

    async def put_vectors(self, model: str, vectors: Mapping[str, bytes]) -> None:
        await checkpoint()
        # bytes() copies a bytearray or memoryview, as a database would.
        self._vectors.update(((model, digest), bytes(v)) for digest, v in vectors.items())

    async def tool_usage(self, *, since: datetime) -> dict[str, tuple[int, int]]:
        await checkpoint()
        if since.tzinfo is None or since.utcoffset() is None:
            raise ValueError(f"naive datetime {since.isoformat()}; use datetime.now(UTC)")
        since = since.astimezone(UTC)
        usage: dict[str, tuple[int, int]] = {}
        for record in self._audit:
            if record.phase == "final" and record.at >= since:
                calls, failures = usage.get(record.tool, (0, 0))
                usage[record.tool] = (calls + 1, failures + (record.status == "error"))
        return usage
