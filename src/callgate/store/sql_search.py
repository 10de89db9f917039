"""The SQL store's records for tool search: embedding vectors, usage per tool.

A mixin of :class:`~callgate.store.sql.SQLStore`; it needs only the store's
transactions (``_begin``), dialect and clock. See
:class:`~callgate.store.search_records.SearchRecords` for the contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.clock import Clock
from callgate.store.search_records import VECTOR_CHUNK
from callgate.store.tables import as_utc, audit, search_vectors


class SQLSearchRecords:
    """Vectors and tool usage on the store's connections."""

    _dialect: str
    clock: Clock

    def _begin(
        self, *, write: bool, single: bool = False
    ) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def get_vectors(self, model: str, digests: Sequence[str]) -> dict[str, bytes]:
        """The vectors kept for ``model``, by digest: only those found (one
        SELECT per ``VECTOR_CHUNK`` digests)."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, bytes] = {}
        if not wanted:
            return found
        columns = (search_vectors.c.digest, search_vectors.c.vector)
        async with self._begin(write=False) as conn:
            for start in range(0, len(wanted), VECTOR_CHUNK):
                chunk = wanted[start : start + VECTOR_CHUNK]
                stmt = select(*columns).where(
                    search_vectors.c.model == model, search_vectors.c.digest.in_(chunk)
                )
                for digest, vector in await conn.execute(stmt):
                    found[digest] = bytes(vector)
        return found

    async def put_vectors(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Insert or replace ``vectors`` for ``model``: one upsert of up to
        ``VECTOR_CHUNK`` rows per transaction, so a large batch does not hold
        SQLite's write lock (and the audit appends waiting for it) for long."""
        if not vectors:
            return
        now = as_utc(self.clock.now())
        rows = [
            {"model": model, "digest": digest, "vector": bytes(vector), "created_at": now}
            for digest, vector in vectors.items()
        ]
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        stmt = insert(search_vectors)
        stmt = stmt.on_conflict_do_update(
            index_elements=[search_vectors.c.model, search_vectors.c.digest],
            set_={"vector": stmt.excluded.vector, "created_at": stmt.excluded.created_at},
        )
        for start in range(0, len(rows), VECTOR_CHUNK):
            async with self._begin(write=True) as conn:
                await conn.execute(stmt, rows[start : start + VECTOR_CHUNK])

    async def tool_usage(self, *, since: datetime) -> dict[str, tuple[int, int]]:
        """Calls and failures per tool since ``since``, as ``count_outcomes``
        counts them, in one grouped SELECT.

        No index of the audit serves a range of ``at`` (nor does one serve
        ``count_outcomes``): this reads the whole table.

        Raises:
            ValueError: ``since`` is naive.
        """
        failed = func.coalesce(func.sum(case((audit.c.status == "error", 1), else_=0)), 0)
        stmt = (
            select(audit.c.tool, func.count(), failed)
            .where(audit.c.phase == "final", audit.c.at >= as_utc(since))
            .group_by(audit.c.tool)
        )
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        return {tool: (int(calls), int(failures)) for tool, calls, failures in rows}
