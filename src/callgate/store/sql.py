"""The durable store: SQLAlchemy 2 async Core over SQLite or PostgreSQL.

SQLite is the embedded default; PostgreSQL serves several gateway replicas.
Engines, URLs, connection settings and migrations are in ``engine``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from sqlalchemy import (
    JSON,
    Dialect,
    Row,
    TypeDecorator,
    case,
    delete,
    event,
    func,
    insert,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.store import sqlite_wal
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
from callgate.store.pg_audit import AuditStatement
from callgate.store.sql_console import SQLConsoleRecords
from callgate.store.sql_handles import HandleRecords
from callgate.store.sql_rates import SQLRateRecords
from callgate.store.sql_records import HumanLoopRecords
from callgate.store.sql_runs import RunRecords
from callgate.store.sql_search import SQLSearchRecords
from callgate.store.sqlite_writer import SQLiteAuditWriter
from callgate.store.tables import (
    as_utc,
    audit,
    idempotency,
    results,
)

__all__ = ["SQLStore", "SQLiteSynchronous", "create_engine", "normalize_url"]

PURGE_EVERY = 8
"""Stored results between two deletions of expired ones (a statement of its own)."""
PURGE_BATCH = 10 * PURGE_EVERY
"""Most expired results one deletion removes: more than come in meanwhile."""

_AUDIT_FIELDS = tuple(f.name for f in fields(AuditRecord) if f.name != "seq")
_RESULT_FIELDS = tuple(f for f in fields(StoredResult) if f.name != "text")


class _JSONText(TypeDecorator[str]):
    """A JSON column's value given as JSON text already: bound as it is, not
    serialized again (a spilled result's text is the one the shape stage cut)."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


class SQLStore(
    HumanLoopRecords,
    HandleRecords,
    RunRecords,
    SQLRateRecords,
    SQLSearchRecords,
    SQLConsoleRecords,
):
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
        clock: Clock = SYSTEM_CLOCK,
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
            clock: what time it is when deciding what has expired.

        Raises:
            ValueError: A malformed URL, ``sqlite_synchronous`` or ``schema``.
        """
        self.url = url
        self.clock = clock
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
        self._pg_audit: AuditStatement | None = None
        self._wal: sqlite_wal.WALKeeper | None = None
        self._results_stored = 0

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
            sqlite_file = self._dialect == "sqlite" and not self._memory and bool(database)
            if sqlite_file:
                # The WAL keeper checkpoints; a commit never does it itself.
                event.listen(engine.sync_engine, "connect", _no_autocheckpoint)
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
            if sqlite_file:
                assert database is not None
                synchronous = self._options["sqlite_synchronous"]
                pragmas = [
                    f"busy_timeout={round(self._options['busy_timeout'] * 1000)}",
                    f"synchronous={synchronous}",
                    "wal_autocheckpoint=0",
                    f"journal_size_limit={sqlite_wal.CHECKPOINT_BYTES}",
                ]
                self._audit_writer = SQLiteAuditWriter(
                    database,
                    pragmas=pragmas,
                    # Inline commits only where they never wait for the disk.
                    inline=synchronous in ("OFF", "NORMAL"),
                )
                self._wal = sqlite_wal.WALKeeper(
                    database,
                    write_lock=self._write_lock,
                    pragmas=pragmas,
                    on_rewound=self._audit_writer.rewound,
                )

    async def ping(self) -> None:
        async with self._begin(write=False, single=True) as conn:
            await conn.execute(select(1))

    async def close(self) -> None:
        """Release all connections. An in-memory database is gone afterwards."""
        async with self._open_lock:
            engine, self._engine = self._engine, None
            writer, self._audit_writer = self._audit_writer, None
            wal, self._wal = self._wal, None
            if writer is not None:
                await writer.aclose()
            if wal is not None:
                await wal.aclose()
            if engine is not None:
                await engine.dispose()

    @contextlib.asynccontextmanager
    async def _transaction(
        self, engine: AsyncEngine, *, write: bool, single: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        serial = self._dialect == "sqlite" and (write or self._memory)
        lock = self._write_lock if serial else contextlib.nullcontext()
        if write and self._wal is not None and self._wal.pressing:
            await self._wal.relieved()
        # Waiting for the in-process lock may be cancelled; the transaction may not.
        async with lock:
            with _uninterrupted(self._dialect == "sqlite"):
                async with engine.connect() as conn:
                    if write and self._dialect == "sqlite":
                        await conn.execution_options(**{BEGIN_OPTION: "BEGIN IMMEDIATE"})
                    if (single or not write) and self._dialect == "postgresql":
                        # Reads are one SELECT each (and under READ COMMITTED every
                        # statement takes its own snapshot anyway); a single statement
                        # is atomic on its own. Without BEGIN and COMMIT around it, it
                        # is one round trip instead of three, committed before the
                        # server answers.
                        await conn.execution_options(isolation_level="AUTOCOMMIT")
                        yield conn
                        return
                    async with conn.begin():
                        yield conn
        if write and self._wal is not None:
            self._wal.committed(look=True)

    def _begin(
        self, *, write: bool, single: bool = False
    ) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A connection in a transaction; with ``single`` (the block runs one
        statement), PostgreSQL runs it in autocommit instead."""
        if self._engine is None:
            raise RuntimeError("the store is not open; call `await store.open()` first")
        return self._transaction(self._engine, write=write, single=single)

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
            if self._wal is not None and self._wal.pressing:
                await self._wal.relieved()
            async with self._write_lock:
                await self._audit_writer.append(rows)
            if self._wal is not None:
                self._wal.committed()
            return
        if self._dialect == "postgresql":
            # Sequence values are handed out before commit; serializing appends
            # (an advisory lock) keeps seq order equal to commit order across
            # replicas. Lock and insert are one autocommit statement (pg_audit.py).
            engine = self._engine
            if engine is None:
                raise RuntimeError("the store is not open; call `await store.open()` first")
            if self._pg_audit is None:
                self._pg_audit = AuditStatement(engine.dialect)
            statement = self._pg_audit
            key = lock_key(f"callgate.audit/{self._schema or ''}")
            async with engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.exec_driver_sql(statement.sql, statement.parameters(key, rows))
            return
        async with self._begin(write=True) as conn:
            await conn.execute(insert(audit), rows)

    def append_audit_now(self, records: Sequence[AuditRecord]) -> bool:
        """Append records in one transaction without yielding, if this store can
        right now (SQLite, its write lock free); durable when True is returned.
        False (nothing written) otherwise: then :meth:`append_audit`."""
        writer, wal = self._audit_writer, self._wal
        if writer is None or self._write_lock.locked() or not records:
            return False
        if wal is not None and wal.pressing:
            return False  # append_audit waits for the running checkpoint first
        if not writer.append_now([_audit_row(r) for r in records]):
            return False
        if wal is not None:
            wal.committed()
        return True

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

    async def count_outcomes(self, tool_prefix: str, *, since: datetime) -> tuple[int, int]:
        escaped = tool_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = select(
            func.count(),
            func.coalesce(func.sum(case((audit.c.status == "error", 1), else_=0)), 0),
        ).where(
            audit.c.phase == "final",
            audit.c.tool.like(f"{escaped}%", escape="\\"),
            audit.c.at >= since,
        )
        async with self._begin(write=False) as conn:
            calls, failures = (await conn.execute(stmt)).one()
        return int(calls), int(failures)

    async def _read_fast(
        self, sql: str, parameters: tuple[Any, ...]
    ) -> list[tuple[Any, ...]] | None:
        """A small read (``?`` placeholders) on SQLite's fast path or as plain SQL
        on PostgreSQL, or None (build the statement for the async engine).

        On PostgreSQL a built ``select()`` cost about 200 µs more per read than
        the same SQL text sent as is (statement construction, cache key,
        compiled-statement lookup), measured in issue 10.
        """
        if self._audit_writer is not None:
            return self._audit_writer.read_inline(sql, parameters)
        if self._dialect != "postgresql":
            return None
        async with self._begin(write=False) as conn:
            result = await conn.exec_driver_sql(_numbered(sql), parameters)
            return [tuple(row) for row in result]

    async def count_session_calls(self, session_id: str, tool: str, args_hash: str) -> int:
        """How many ``final`` records with status ``ok`` the session has for this
        tool and argument hash."""
        fast = await self._read_fast(
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
        fast = await self._read_fast(
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
            where=idempotency.c.expires_at <= self.clock.now(),
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
            idempotency.c.scope == scope, idempotency.c.expires_at > self.clock.now()
        )
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else _idempotency_record(row)

    # spilled results --------------------------------------------------------
    async def put_result(self, result: StoredResult) -> None:
        """Keep a full result; every ``PURGE_EVERY`` results, delete up to
        ``PURGE_BATCH`` expired ones.

        Expired results are unreadable (:meth:`get_result`) and were once never
        deleted: a gateway serving large results grew its database to gigabytes.
        Deleting a bounded batch as new results come (here rather than on a
        schedule: no replica has to run a sweeper) keeps the table at about what
        ``result_ttl`` holds, and SQLite reuses the freed pages.

        Raises:
            ValueError: A result with this ``ref`` is already stored.
        """
        row: dict[str, Any] = {f.name: getattr(result, f.name) for f in _RESULT_FIELDS}
        if result.text is not None:
            row["content"] = type_coerce(result.text, _JSONText())
        row["created_at"] = as_utc(result.created_at)
        row["expires_at"] = as_utc(result.expires_at)
        stmt = (
            self._insert(results)
            .values(row)
            .on_conflict_do_nothing(index_elements=[results.c.ref])
            .returning(results.c.ref)
        )
        async with self._begin(write=True, single=True) as conn:
            if (await conn.execute(stmt)).first() is None:
                raise ValueError(f"result {result.ref!r} is already stored")
        self._results_stored += 1
        if self._results_stored % PURGE_EVERY == 0:
            expired = select(results.c.ref).where(results.c.expires_at <= self.clock.now())
            purge = delete(results).where(
                results.c.ref.in_(expired.limit(PURGE_BATCH).scalar_subquery())
            )
            async with self._begin(write=True, single=True) as conn:
                await conn.execute(purge)

    async def get_result(self, ref: str) -> StoredResult | None:
        """The stored result, or None if unknown or expired."""
        stmt = select(results).where(results.c.ref == ref, results.c.expires_at > self.clock.now())
        async with self._begin(write=False) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else StoredResult(**row._asdict())


@functools.lru_cache(maxsize=32)
def _numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1``, ``$2``, ... (none may be quoted)."""
    parts = sql.split("?")
    return "".join(
        part + (f"${i}" if i < len(parts) else "") for i, part in enumerate(parts, start=1)
    )


def _no_autocheckpoint(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")
    dbapi_connection.execute(f"PRAGMA journal_size_limit={sqlite_wal.CHECKPOINT_BYTES}")


def _uninterrupted(sqlite: bool) -> contextlib.AbstractContextManager[object]:
    """Shield a SQLite transaction from cancellation until it has ended.

    A cancellation that lands in a statement makes SQLAlchemy invalidate the
    connection, and when the cancellation is repeated (anyio's cancel scopes:
    a client that hung up, a deadline) its graceful close is cancelled too and
    aiosqlite's thread is stopped with the ``sqlite3`` connection still open,
    transaction and all: a write transaction then kept the database's write lock
    and every other writer failed with "database is locked" after the busy
    timeout; a read transaction pins the WAL, which then grows without end. So
    the transaction runs to its end (bounded by the busy timeout) and the
    cancellation is delivered after it.
    """
    return anyio.CancelScope(shield=True) if sqlite else contextlib.nullcontext()


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
