"""Engines for the SQL store: URLs, connection settings, schema migrations.

SQLite (the default) is shared by several processes (CLI commands, a gateway):
every connection runs in WAL mode with a busy timeout, and every write
transaction starts with ``BEGIN IMMEDIATE`` so two writers queue for the lock
instead of failing with "database is locked" when a read turns into a write.
The busy timeout (5 seconds unless the store is given another) is how long one
write waits for another process's write transaction before failing: a call
waits for it at most once (its first failed write; everything it still has to
write after that waits in the backlog, see :mod:`callgate.store.backlog`).

PostgreSQL connections name themselves ``callgate`` (``callgate/<schema>`` in a
schema) in ``pg_stat_activity``.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import Any, Literal

import aiosqlite
import anyio
from sqlalchemy import Connection, event, inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

__all__ = [
    "BEGIN_OPTION",
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS_HEAD",
    "SQLiteSynchronous",
    "check_options",
    "create_engine",
    "enable_wal",
    "is_sqlite_memory",
    "lock_key",
    "normalize_url",
    "upgrade",
]

SQLiteSynchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
BEGIN_OPTION = "callgate_sqlite_begin"
BUSY_TIMEOUT_MS = 5000
MIGRATIONS_HEAD = "0016"
"""The newest revision in ``migrations/versions`` (a test keeps the two equal)."""


def normalize_url(url: str) -> str:
    """Qualify a database URL with callgate's async driver.

    ``sqlite:///path.db`` becomes ``sqlite+aiosqlite:///path.db`` (``sqlite://``
    and ``sqlite:///:memory:`` are in-memory databases), ``postgresql://`` and
    ``postgres://`` become ``postgresql+asyncpg://``. URLs that already name a
    driver are returned unchanged.

    Raises:
        ValueError: ``url`` is not a database URL.
    """
    try:
        make_url(url)
    except ArgumentError:
        raise ValueError(
            f"not a database URL: {url!r}; use e.g. sqlite:///path/to/callgate.db "
            "or postgresql://user@host/db"
        ) from None
    # Swap the scheme as text: re-rendering a parsed URL would percent-escape
    # the rest (":memory:" -> "%3Amemory%3A").
    scheme, _, rest = url.partition("://")
    driver = _DRIVERS.get(scheme.lower())
    return url if driver is None else f"{driver}://{rest}"


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def check_options(url: URL, sqlite_synchronous: str, schema: str | None) -> None:
    if schema is not None and (
        url.get_backend_name() != "postgresql" or not _SCHEMA_NAME.fullmatch(schema)
    ):
        raise ValueError(f"schema {schema!r}: PostgreSQL only; lowercase letters, digits and _")
    if sqlite_synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ValueError(
            f"sqlite_synchronous must be OFF, NORMAL, FULL or EXTRA, not {sqlite_synchronous!r}"
        )


def create_engine(
    url: str,
    *,
    echo: bool = False,
    sqlite_synchronous: SQLiteSynchronous = "NORMAL",
    schema: str | None = None,
    busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
) -> AsyncEngine:
    """An async engine with the connection settings every store connection needs.

    Args:
        url: Any URL :func:`normalize_url` accepts.
        echo: Log every statement.
        sqlite_synchronous: ``PRAGMA synchronous`` for a file SQLite database.
            ``NORMAL`` (in WAL mode) may lose the last commits on power loss, never
            on a process crash; ``FULL`` loses nothing.
        schema: PostgreSQL only: the schema to work in (its ``search_path``).
        busy_timeout: SQLite only: seconds a write waits for another connection's
            write transaction before failing with "database is locked".

    Raises:
        ValueError: A bad ``sqlite_synchronous`` or ``schema``.
    """
    parsed = make_url(normalize_url(url))
    check_options(parsed, sqlite_synchronous, schema)
    if parsed.get_backend_name() != "sqlite":
        settings = {"application_name": f"callgate/{schema}" if schema else "callgate"}
        if schema:
            settings["search_path"] = schema
        connect_args = {"server_settings": settings}
        return create_async_engine(parsed, echo=echo, connect_args=connect_args)
    if is_sqlite_memory(parsed):
        # One connection, or every session would see its own empty database.
        engine = create_async_engine(parsed, echo=echo, poolclass=StaticPool)
        pragmas = ["foreign_keys=ON"]
    else:
        # Every transaction ends in an explicit commit or rollback (conn.begin()),
        # so the pool's reset-on-return ROLLBACK is a wasted round trip per use.
        engine = create_async_engine(parsed, echo=echo, pool_reset_on_return=None)
        pragmas = [
            f"busy_timeout={round(busy_timeout * 1000)}",
            # A no-op once enable_wal() has switched the file (the mode persists).
            "journal_mode=WAL",
            f"synchronous={sqlite_synchronous}",
            "foreign_keys=ON",
        ]

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module, which would skip it for
        # SELECT and DDL; the "begin" hook below emits it for every transaction.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(f"PRAGMA {pragma}")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get(BEGIN_OPTION, "BEGIN"))

    return engine


async def enable_wal(path: str, *, busy_timeout: float = BUSY_TIMEOUT_MS / 1000) -> None:
    """Switch a SQLite file to WAL, waiting for other processes if need be.

    The switch needs the file to itself, and when another process holds it
    SQLite fails at once with SQLITE_BUSY instead of calling the busy handler;
    so two processes creating the same database race here. Retry until the
    switch is made (by anyone) or the busy timeout has passed.
    """
    deadline = anyio.current_time() + busy_timeout
    async with aiosqlite.connect(path) as db:
        while True:
            try:
                async with db.execute("PRAGMA journal_mode=WAL") as cursor:
                    row = await cursor.fetchone()
                if row is not None and str(row[0]).lower() == "wal":
                    return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
            if anyio.current_time() > deadline:
                raise TimeoutError(f"could not switch {path} to WAL: the file stays locked")
            await anyio.sleep(0.005)


def lock_key(name: str) -> int:
    """A signed 64-bit PostgreSQL advisory lock key for ``name``."""
    return int.from_bytes(
        hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
    )


def _at_head(connection: Connection) -> bool:
    if not inspect(connection).has_table("alembic_version"):
        return False
    versions = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
    return versions.scalars().all() == [MIGRATIONS_HEAD]


def upgrade(connection: Connection) -> None:
    # Checked first, and alembic imported only when there is work: it costs
    # about 100 ms, paid by every short-lived CLI command that opens the store.
    if _at_head(connection):
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "callgate.store:migrations")
    config.set_main_option("path_separator", "os")
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
