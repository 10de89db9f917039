"""The SQL store's handles: state tools keep across calls, behind opaque ids.

A mixin of :class:`~callgate.store.sql.SQLStore`; it needs only the store's
transactions (``_begin``). Every change is one conditional statement, so it is
atomic across processes and replicas without locks held between calls.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.clock import Clock
from callgate.store.base import HandleRecord
from callgate.store.tables import as_utc, handles


class HandleRecords:
    """Handles on the store's connections."""

    clock: Clock

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def create_handle(self, record: HandleRecord) -> None:
        """Insert a handle and purge the expired ones (lazily, here rather than on
        a schedule: no replica has to run a sweeper).

        Raises:
            ValueError: A handle with this ``id`` exists already.
        """
        row = {f.name: getattr(record, f.name) for f in fields(HandleRecord)}
        for name in ("created_at", "updated_at", "expires_at"):
            row[name] = as_utc(row[name])
        try:
            async with self._begin(write=True) as conn:
                await conn.execute(delete(handles).where(handles.c.expires_at <= self.clock.now()))
                await conn.execute(insert(handles).values(row))
        except IntegrityError:
            raise ValueError(f"handle {record.id!r} exists already") from None

    async def get_handle(self, handle_id: str) -> HandleRecord | None:
        """The live handle; None if unknown or expired."""
        stmt = select(handles).where(
            handles.c.id == handle_id, handles.c.expires_at > self.clock.now()
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else HandleRecord(**row._asdict())

    async def update_handle(
        self,
        handle_id: str,
        *,
        version: int,
        data: dict[str, Any],
        at: datetime,
        expires_at: datetime,
    ) -> HandleRecord | None:
        """Replace a live handle's data if it is still at ``version``.

        Returns:
            The updated record, or None when the handle is unknown, expired or
            no longer at ``version`` (another call updated it first).
        """
        stmt = (
            update(handles)
            .where(
                handles.c.id == handle_id,
                handles.c.version == version,
                handles.c.expires_at > self.clock.now(),
            )
            .values(
                data=data,
                updated_at=as_utc(at),
                expires_at=as_utc(expires_at),
                version=version + 1,
            )
            .returning(*handles.c)
        )
        async with self._begin(write=True) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else HandleRecord(**row._asdict())

    async def delete_handle(self, handle_id: str, *, version: int | None = None) -> bool:
        """Delete a live handle (only at ``version``, if given); True if it was."""
        stmt = delete(handles).where(
            handles.c.id == handle_id, handles.c.expires_at > self.clock.now()
        )
        if version is not None:
            stmt = stmt.where(handles.c.version == version)
        async with self._begin(write=True) as conn:
            return (await conn.execute(stmt)).rowcount == 1
