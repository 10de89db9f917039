"""Audit batches to a SQLite file, on the fastest path that cannot stall the loop.

Audit appends are the one write on every call's path. Through the async
engine each one costs several thread hops (aiosqlite runs every statement on
its own thread, and SQLAlchemy's async layer adds greenlet switches): about
0.7 ms per commit here. Two faster paths, both on long-lived connections, with
values converted by the columns' own SQLAlchemy bind processors (so UTC
datetimes and JSON are stored exactly as the async engine stores them):

- inline, on the event loop's thread: one prepared ``INSERT`` run by the
  driver itself (no statement compilation or execution context per call),
  ``BEGIN IMMEDIATE`` with a zero busy timeout, so it either gets the write
  lock at once or gives up at once; with
  ``synchronous=NORMAL`` in WAL mode a commit does not fsync, and automatic
  checkpoints are off (``sqlite_wal.WALKeeper`` runs them on its own thread),
  so the loop is held for tens of microseconds, never for a disk flush;
- a dedicated worker thread, used when the lock is taken (another process or
  connection is writing) or when every commit must be flushed
  (``synchronous=FULL``): one thread hop, waiting with the busy timeout.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert
from sqlalchemy.pool import NullPool

from callgate.store.tables import audit


class SQLiteAuditWriter:
    """Appends audit rows inline when the lock is free, else on its worker thread."""

    def __init__(self, path: str, *, pragmas: Sequence[str], inline: bool = True) -> None:
        self._engine: Engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
        self._pragmas = list(pragmas)
        event.listen(self._engine, "connect", self._on_connect)
        self._inline_engine: Engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
        event.listen(self._inline_engine, "connect", self._on_inline_connect)
        self._inline = inline
        self._inline_conn: Connection | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="callgate-audit")
        self._conn: Connection | None = None
        self._statement = insert(audit)
        dialect = self._inline_engine.dialect
        columns = [column for column in audit.columns if column.name != "seq"]
        self._names = [column.name for column in columns]
        self._processors = [column.type.bind_processor(dialect) for column in columns]
        self._values = operator.itemgetter(*self._names)
        self._converted = [(i, p) for i, p in enumerate(self._processors) if p is not None]
        quoted = ", ".join(dialect.identifier_preparer.quote(name) for name in self._names)
        marks = ", ".join("?" for _ in columns)
        self._insert_sql = f"INSERT INTO audit ({quoted}) VALUES ({marks})"
        self._closed = threading.Event()
        self._rewound = False

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        # Transactions are begun explicitly (BEGIN IMMEDIATE), never by the driver.
        dbapi_connection.isolation_level = None
        for pragma in self._pragmas:
            dbapi_connection.execute(f"PRAGMA {pragma}")

    def _on_inline_connect(self, dbapi_connection: Any, record: Any) -> None:
        self._on_connect(dbapi_connection, record)
        # Fail at once instead of waiting on the loop.
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    async def append(self, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` in one transaction; durable when this returns.

        Raises:
            RuntimeError: the writer was closed.
            sqlite3.Error or sqlalchemy.exc.DBAPIError: the write failed (nothing
                was written): the driver's own error inline, SQLAlchemy's on the thread.
        """
        if self._closed.is_set():
            raise RuntimeError("the audit writer is closed")
        if self.append_now(rows):
            return
        await asyncio.get_running_loop().run_in_executor(self._executor, self._write, rows)
        self._rewound = False

    def rewound(self) -> None:
        """The WAL was just checkpointed whole: the next commit starts it over,
        writing and syncing a new header (an fsync even at ``synchronous=NORMAL``),
        so it is made on the worker thread, not inline on the loop."""
        self._rewound = True

    def append_now(self, rows: list[dict[str, Any]]) -> bool:
        """Write ``rows`` in one transaction on the loop's thread, now, if the write
        lock is free; durable when this returns True. False (nothing written) when
        inline writes are off, the writer is closed, another writer holds the
        lock or the WAL was just rewound: then use :meth:`append`. Never waits and
        never yields to the loop.

        Raises:
            sqlite3.Error: the write failed (nothing was written).
        """
        if not self._inline or self._rewound or self._closed.is_set():
            return False
        return self._write_inline(rows)

    def _parameters(self, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        # The columns in order in one C call; only those with a bind processor
        # (the UTC datetime, the JSON columns) go through Python.
        out = []
        for row in rows:
            values = list(self._values(row))
            for index, process in self._converted:
                values[index] = process(values[index])
            out.append(tuple(values))
        return out

    def _write_inline(self, rows: list[dict[str, Any]]) -> bool:
        """Commit on the loop's thread if the write lock is free now; False if not."""
        if self._inline_conn is None:
            self._inline_conn = self._inline_engine.connect()
        driver = self._inline_conn.connection.driver_connection
        assert driver is not None
        try:
            driver.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False  # another writer holds the lock: wait for it off the loop
        try:
            driver.executemany(self._insert_sql, self._parameters(rows))
            driver.execute("COMMIT")
        except BaseException:
            driver.execute("ROLLBACK")
            raise
        return True

    def read_inline(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """Run a small read on the loop's thread (the hot path's session checks);
        None if the database is busy (then read through the async engine).

        In WAL mode a read never waits for a writer and sees every commit made
        before it, the inline ones included; reads take microseconds, where the
        async engine's thread hops take about a millisecond.
        """
        if self._closed.is_set():
            return None
        if self._inline_conn is None:
            self._inline_conn = self._inline_engine.connect()
        driver = self._inline_conn.connection.driver_connection
        assert driver is not None
        try:
            return list(driver.execute(sql, parameters).fetchall())
        except sqlite3.OperationalError:
            return None

    def _write(self, rows: list[dict[str, Any]]) -> None:
        if self._conn is None:
            self._conn = self._engine.connect()
        conn = self._conn
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            conn.execute(self._statement, rows)
        except BaseException:
            conn.exec_driver_sql("ROLLBACK")
            raise
        conn.exec_driver_sql("COMMIT")

    def _close_connection(self) -> None:
        if self._conn is not None:
            # The transaction state is managed by hand; tell SQLAlchemy none is open.
            self._conn.close()
            self._conn = None
        self._engine.dispose()

    async def aclose(self) -> None:
        """Close the connection in its own thread and stop the thread."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._inline_conn is not None:
            self._inline_conn.close()
            self._inline_conn = None
        self._inline_engine.dispose()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close_connection)
        self._executor.shutdown(wait=True)
