"""The SQL store's agent runs (a paused run's state, and every run's trace) and
the listings of a gateway's upstreams.

A mixin of :class:`~callgate.store.sql.SQLStore`; it needs only the store's
transactions (``_begin``) and dialect.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.clock import Clock
from callgate.store.base import RunRecord
from callgate.store.tables import agent_runs, as_utc, upstream_listings


class RunRecords:
    """Agent runs on the store's connections."""

    _dialect: str

    clock: Clock

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def save_run(self, record: RunRecord) -> None:
        """Insert the run, or replace the stored one with the same ``id`` (one statement)."""
        row: dict[str, Any] = {f.name: getattr(record, f.name) for f in fields(RunRecord)}
        row["created_at"] = as_utc(record.created_at)
        row["updated_at"] = as_utc(record.updated_at)
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        stmt = insert(agent_runs).values(row)
        stmt = stmt.on_conflict_do_update(
            index_elements=[agent_runs.c.id],
            set_={name: stmt.excluded[name] for name in row if name not in ("id", "created_at")},
        )
        async with self._begin(write=True) as conn:
            await conn.execute(stmt)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run whatever its status; None if unknown."""
        stmt = select(agent_runs).where(agent_runs.c.id == run_id)
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else RunRecord(**row._asdict())

    async def save_listing(self, name: str, key: str, listing: Any) -> None:
        """Insert or replace the listing kept for the upstream ``name`` (one statement)."""
        row = {"name": name, "key": key, "listing": listing, "updated_at": as_utc(self.clock.now())}
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        stmt = insert(upstream_listings).values(row)
        stmt = stmt.on_conflict_do_update(
            index_elements=[upstream_listings.c.name],
            set_={column: stmt.excluded[column] for column in ("key", "listing", "updated_at")},
        )
        async with self._begin(write=True) as conn:
            await conn.execute(stmt)

    async def get_listing(self, name: str, key: str) -> Any | None:
        """The listing kept for ``name`` if it was kept for ``key``."""
        stmt = select(upstream_listings.c.listing).where(
            upstream_listings.c.name == name, upstream_listings.c.key == key
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else row[0]
