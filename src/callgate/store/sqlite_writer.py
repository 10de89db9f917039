"""A dedicated thread that appends audit batches to a SQLite file.

Audit appends are the one write on every call's path. Through the async
engine each one costs several thread hops (aiosqlite runs every statement on
its own thread, and SQLAlchemy's async layer adds greenlet switches): about
0.7 ms per commit here. On one long-lived connection in one worker thread, a
batch costs a single hop and one ``BEGIN IMMEDIATE ... COMMIT``: about 0.12 ms
(see docs/benchmarks.md). The rows still go through SQLAlchemy Core, so types
(UTC datetimes, JSON) are stored exactly as the async engine stores them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert
from sqlalchemy.pool import NullPool

from callgate.store.tables import audit


class SQLiteAuditWriter:
    """Appends audit rows on one connection owned by one thread."""

    def __init__(self, path: str, *, pragmas: Sequence[str]) -> None:
        self._engine: Engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
        self._pragmas = list(pragmas)
        event.listen(self._engine, "connect", self._on_connect)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="callgate-audit")
        self._conn: Connection | None = None
        self._statement = insert(audit)
        self._closed = threading.Event()

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        # Transactions are begun explicitly (BEGIN IMMEDIATE), never by the driver.
        dbapi_connection.isolation_level = None
        for pragma in self._pragmas:
            dbapi_connection.execute(f"PRAGMA {pragma}")

    async def append(self, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` in one transaction; durable when this returns.

        Raises:
            RuntimeError: the writer was closed.
            sqlalchemy.exc.DBAPIError: the write failed (nothing was written).
        """
        if self._closed.is_set():
            raise RuntimeError("the audit writer is closed")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._write, rows)

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
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close_connection)
        self._executor.shutdown(wait=True)
