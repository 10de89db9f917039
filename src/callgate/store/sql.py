"""The durable store: SQLAlchemy 2 async Core over SQLite or PostgreSQL.

SQLite is the embedded default; PostgreSQL serves several gateway replicas.
Engines, URLs, connection settings and migrations are in ``engine``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from sqlalchemy import (
    Row,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from callgate.store.base import (
    AuditRecord,
    IdempotencyRecord,
    StoredResult,
)
from callgate.store.engine import (
    BEGIN_OPTION,
    BUSY_TIMEOUT_MS,
    SQLiteSynchronous,
    check_options,
    create_engine,
    enable_wal,
    is_sqlite_memory,
    lock_key,
    normalize_url,
    upgrade,
)
from callgate.store.sql_handles import HandleRecords
from callgate.store.sql_records import HumanLoopRecords
from callgate.store.sql_runs import RunRecords
from callgate.store.sqlite_writer import SQLiteAuditWriter
from callgate.store.tables import (
    as_utc,
    audit,
    idempotency,
    results,
)

__all__ = ["SQLStore", "SQLiteSynchronous", "create_engine", "normalize_url"]

_AUDIT_FIELDS = tuple(f.name for f in fields(AuditRecord) if f.name != "seq")


def _now() -> datetime:
    return datetime.now(UTC)


class SQLStore(HumanLoopRecords, HandleRecords, RunRecords):
    """The :class:`~callgate.store.base.Store` on SQLite or PostgreSQL.

    Example:
        async with SQLStore("sqlite:///var/lib/callgate/callgate.db") as store:
            await store.append_audit([record])
    """

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        sqlite_synchronous: SQLiteSynchronous = "NORMAL",
        schema: str | None = None,
        busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
    ) -> None:
        """Describe the store; nothing connects until :meth:`open`.

        Args:
            url: A database URL (see :func:`normalize_url`).
            echo: Log every statement.
            sqlite_synchronous: ``PRAGMA synchronous`` for a file SQLite database.
            schema: PostgreSQL only: keep the tables in this schema (created if
                missing), e.g. to isolate tests or tenants sharing one database.
            busy_timeout: SQLite only: seconds a write waits for another process's
                write transaction before failing ("database is locked"); a call
                whose write fails so is answered without driver text and its
                remaining writes wait in the gate's backlog.

        Raises:
            ValueError: A malformed URL, ``sqlite_synchronous`` or ``schema``.
        """
        self.url = url
        self._sa_url = make_url(normalize_url(url))
        self._options: dict[str, Any] = {
            "echo": echo,
            "sqlite_synchronous": sqlite_synchronous,
            "schema": schema,
            "busy_timeout": busy_timeout,
        }
        if not busy_timeout >= 0:
            raise ValueError(f"busy_timeout must be >= 0 seconds, not {busy_timeout!r}")
        check_options(self._sa_url, sqlite_synchronous, schema)
        self._schema = schema
        self._dialect = self._sa_url.get_backend_name()
        self._engine: AsyncEngine | None = None
        self._open_lock = anyio.Lock()
        # SQLite has one writer at a time anyway; queueing in process is FIFO and
        # immediate where its busy handler would poll with sleeps of up to 100 ms.
        self._write_lock = anyio.Lock()
        self._memory = is_sqlite_memory(self._sa_url)
        self._audit_writer: SQLiteAuditWriter | None = None

    async def __aenter__(self) -> SQLStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect and run the migrations up to head (idempotent).

        Safe when several processes or replicas open the same database at once:
        the migration runs under the database's write lock, so the later one
        finds the schema at head.
        """
        async with self._open_lock:
            if self._engine is not None:
                return
            database = self._sa_url.database
            if self._dialect == "sqlite" and not self._memory and database:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
                await enable_wal(database, busy_timeout=self._options["busy_timeout"])
            engine = create_engine(self.url, **self._options)
            try:
                async with self._transaction(engine, write=True) as conn:
                    if self._dialect == "postgresql":
                        await self._pg_lock(conn, "migrate")
                        if self._schema:
                            await conn.exec_driver_sql(
                                f"CREATE SCHEMA IF NOT EXISTS {self._schema}"
                            )
                    await conn.run_sync(upgrade)
            except BaseException:
                await engine.dispose()
                raise
            self._engine = engine
            if self._dialect == "sqlite" and not self._memory and database:
                synchronous = self._options["sqlite_synchronous"]
                self._audit_writer = SQLiteAuditWriter(
                    database,
                    pragmas=[
                        f"busy_timeout={round(self._options['busy_timeout'] * 1000)}",
                        f"synchronous={synchronous}",
                    ],
                    # Inline commits only where they never wait for the disk.
                    inline=synchronous in ("OFF", "NORMAL"),
                )

    async def close(self) -> None:
        """Release all connections. An in-memory database is gone afterwards."""
        async with self._open_lock:
            engine, self._engine = self._engine, None
            writer, self._audit_writer = self._audit_writer, None
            if writer is not None:
                await writer.aclose()
            if engine is not None:
                await engine.dispose()

    @contextlib.asynccontextmanager
    async def _transaction(
        self, engine: AsyncEngine, *, write: bool
    ) -> AsyncIterator[AsyncConnection]:
        serial = self._dialect == "sqlite" and (write or self._memory)
        lock = self._write_lock if serial else contextlib.nullcontext()
        async with lock, engine.connect() as conn:
            if write and self._dialect == "sqlite":
                await conn.execution_options(**{BEGIN_OPTION: "BEGIN IMMEDIATE"})
            async with conn.begin():
                yield conn

    def _begin(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        if self._engine is None:
            raise RuntimeError("the store is not open; call `await store.open()` first")
        return self._transaction(self._engine, write=write)

    async def _pg_lock(self, conn: AsyncConnection, name: str) -> None:
        key = lock_key(f"callgate.{name}/{self._schema or ''}")
        await conn.execute(select(func.pg_advisory_xact_lock(key)))

    # audit -----------------------------------------------------------------
    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Append records in one transaction; durable when this returns."""
        if not records:
            return
        rows = [_audit_row(r) for r in records]
        if self._audit_writer is not None:
            # The hot path of every call: one thread hop instead of aiosqlite's
            # several (see sqlite_writer.py). Same in-process FIFO write queue.
            async with self._write_lock:
                await self._audit_writer.append(rows)
            return
        async with self._begin(write=True) as conn:
            if self._dialect == "postgresql":
                # Sequence values are handed out before commit; serializing
                # appends keeps seq order equal to commit order across replicas.
                await self._pg_lock(conn, "audit")
            await conn.execute(insert(audit), rows)

    def append_audit_now(self, records: Sequence[AuditRecord]) -> bool:
        """Append records in one transaction without yielding, if this store can
        right now (SQLite, its write lock free); durable when True is returned.
        False (nothing written) otherwise: then :meth:`append_audit`."""
        writer = self._audit_writer
        if writer is None or self._write_lock.locked() or not records:
            return False
        return writer.append_now([_audit_row(r) for r in records])

    async def list_audit(
        self, *, tail: int | None = None, call_id: str | None = None
    ) -> list[AuditRecord]:
        """Records oldest first; ``tail`` keeps the newest N.

        Raises:
            ValueError: ``tail`` is negative.
        """
        if tail is not None and tail < 0:
            raise ValueError(f"tail must be >= 0, not {tail}")
        stmt = select(audit)
        if call_id is not None:
            stmt = stmt.where(audit.c.call_id == call_id)
        if tail is not None:
            stmt = stmt.order_by(audit.c.seq.desc()).limit(tail)
        else:
            stmt = stmt.order_by(audit.c.seq)
        async with self._begin(write=False) as conn:
            rows = (await conn.execute(stmt)).all()
        records = [_audit_record(row) for row in rows]
        return records[::-1] if tail is not None else records

    def _read_fast(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """A small read on SQLite's fast path, or None (use the async engine)."""
        if self._audit_writer is None:
            return None
        return self._audit_writer.read_inline(sql, parameters)

    async def count_session_calls(self, session_id: str, tool: str, args_hash: str) -> int:
        """How many ``final`` records with status ``ok`` the session has for this
        tool and argument hash."""
        fast = self._read_fast(
            "SELECT count(*) FROM audit WHERE session_id = ? AND tool = ? AND args_hash = ?"
            " AND phase = 'final' AND status = 'ok'",
            (session_id, tool, args_hash),
        )
        if fast is not None:
            return int(fast[0][0])
        stmt = select(func.count()).where(
            audit.c.session_id == session_id,
            audit.c.tool == tool,
            audit.c.args_hash == args_hash,
            audit.c.phase == "final",
            audit.c.status == "ok",
        )
        async with self._begin(write=False) as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def session_retries(self, session_id: str) -> int:
        """Retries spent in the session: ``attempts - 1`` summed over its ``final``
        records (a call that never ran, ``attempts == 0``, counts 0)."""
        fast = self._read_fast(
            "SELECT coalesce(sum(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END), 0)"
            " FROM audit WHERE session_id = ? AND phase = 'final'",
            (session_id,),
        )
        if fast is not None:
            return int(fast[0][0])
        retries = case((audit.c.attempts > 1, audit.c.attempts - 1), else_=0)
        stmt = select(func.coalesce(func.sum(retries), 0)).where(
            audit.c.session_id == session_id, audit.c.phase == "final"
        )
        async with self._begin(write=False) as conn:
            return int((await conn.execute(stmt)).scalar_one())

    # idempotency -----------------------------------------------------------
    async def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Insert ``record`` unless a live record for its scope exists.

        Returns:
            None when the claim succeeded, else the existing live record. An
            expired record is replaced as if absent.
        """
        row = _idempotency_row(record)
        upsert = self._insert(idempotency).values(row)
        stmt = upsert.on_conflict_do_update(
            index_elements=[idempotency.c.scope],
            set_={name: upsert.excluded[name] for name in row if name != "scope"},
            where=idempotency.c.expires_at <= _now(),
        ).returning(idempotency.c.scope)
        async with self._begin(write=True) as conn:
            if (await conn.execute(stmt)).first() is not None:
                return None
            # The conflicting row is locked (PostgreSQL) or the whole database
            # is (SQLite), so it is still there to read.
            existing = await conn.execute(
                select(idempotency).where(idempotency.c.scope == record.scope)
            )
            return _idempotency_record(existing.one())

    async def complete_idempotency(
        self, scope: str, envelope: dict[str, Any], *, call_id: str | None = None
    ) -> None:
        """Mark the scope's record ``done`` with the Envelope every later caller gets.

        Raises:
            KeyError: No record was ever claimed for ``scope`` (by ``call_id``).
        """
        stmt = (
            update(idempotency)
            .where(idempotency.c.scope == scope)
            .values(state="done", envelope=envelope)
        )
        if call_id is not None:
            stmt = stmt.where(idempotency.c.call_id == call_id)
        async with self._begin(write=True) as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise KeyError(f"no idempotency record for scope {scope!r}")

    async def release_idempotency(self, scope: str, *, call_id: str) -> None:
        stmt = delete(idempotency).where(
            idempotency.c.scope == scope,
            idempotency.c.call_id == call_id,
            idempotency.c.state == "pending",
        )
        async with self._begin(write=True) as conn:
            await conn.execute(stmt)

    async def get_idempotency(self, scope: str) -> IdempotencyRecord | None:
        """The live record for ``scope`` or None (expired records count as absent)."""
        stmt = select(idempotency).where(
            idempotency.c.scope == scope, idempotency.c.expires_at > _now()
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else _idempotency_record(row)

    # spilled results --------------------------------------------------------
    async def put_result(self, result: StoredResult) -> None:
        """Keep a full result.

        Raises:
            ValueError: A result with this ``ref`` is already stored.
        """
        row = {f.name: getattr(result, f.name) for f in fields(StoredResult)}
        row["created_at"] = as_utc(result.created_at)
        row["expires_at"] = as_utc(result.expires_at)
        stmt = (
            self._insert(results)
            .values(row)
            .on_conflict_do_nothing(index_elements=[results.c.ref])
            .returning(results.c.ref)
        )
        async with self._begin(write=True) as conn:
            if (await conn.execute(stmt)).first() is None:
                raise ValueError(f"result {result.ref!r} is already stored")

    async def get_result(self, ref: str) -> StoredResult | None:
        """The stored result, or None if unknown or expired."""
        stmt = select(results).where(results.c.ref == ref, results.c.expires_at > _now())
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else StoredResult(**row._asdict())


def _audit_row(record: AuditRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _AUDIT_FIELDS}
    row["at"] = as_utc(record.at)
    row["dropped_fields"] = list(record.dropped_fields)
    return row


def _audit_record(row: Row[Any]) -> AuditRecord:
    values = row._asdict()
    values["dropped_fields"] = tuple(values["dropped_fields"])
    return AuditRecord(**values)


def _idempotency_row(record: IdempotencyRecord) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(IdempotencyRecord)}
    row["created_at"] = as_utc(record.created_at)
    row["expires_at"] = as_utc(record.expires_at)
    return row


def _idempotency_record(row: Row[Any]) -> IdempotencyRecord:
    return IdempotencyRecord(**row._asdict())
