"""SQLStore specifics: URLs, SQLite connection settings, opening and closing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from callgate.store import (
    AuditRecord,
    MemoryStore,
    SQLStore,
    Store,
    normalize_url,
    open_store,
)
from callgate.store.engine import create_engine

if TYPE_CHECKING:
    from tests.store.conftest import Database

Audit = Callable[..., AuditRecord]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///callgate.db", "sqlite+aiosqlite:///callgate.db"),
        ("sqlite:////var/lib/callgate.db", "sqlite+aiosqlite:////var/lib/callgate.db"),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("sqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("postgresql://u:p%40ss@db:5432/cg", "postgresql+asyncpg://u:p%40ss@db:5432/cg"),
        ("postgres://u@db/cg?ssl=require", "postgresql+asyncpg://u@db/cg?ssl=require"),
        ("postgresql+asyncpg://u@db/cg", "postgresql+asyncpg://u@db/cg"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite:///x.db"),
    ],
)
def test_normalize_url_picks_the_async_driver(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_normalize_url_rejects_a_bare_path() -> None:
    with pytest.raises(ValueError, match="not a database URL"):
        normalize_url("./callgate.db")


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("sqlite:///x.db", {"schema": "s"}, "PostgreSQL only"),
        ("postgresql://u@h/db", {"schema": "Robert'); DROP"}, "lowercase"),
        ("sqlite:///x.db", {"sqlite_synchronous": "SOMETIMES"}, "OFF, NORMAL"),
    ],
)
def test_bad_options_fail_at_construction(url: str, options: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SQLStore(url, **options)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize(("synchronous", "code"), [("NORMAL", 1), ("FULL", 2)])
async def test_sqlite_file_connections_are_set_up_for_several_processes(
    tmp_path: Path, synchronous: str, code: int
) -> None:
    engine = create_engine(
        f"sqlite:///{tmp_path / 'x.db'}",
        sqlite_synchronous=synchronous,  # type: ignore[arg-type]
    )
    try:
        async with engine.connect() as conn:
            pragma = {
                name: (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar_one()
                for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            }
    finally:
        await engine.dispose()

    assert pragma == {
        "journal_mode": "wal",
        "synchronous": code,
        "busy_timeout": 5000,
        "foreign_keys": 1,
    }


@pytest.mark.anyio
async def test_open_creates_the_parent_directory(tmp_path: Path, audit: Audit) -> None:
    path = tmp_path / "state" / "nested" / "callgate.db"
    async with SQLStore(f"sqlite:///{path}") as store:
        await store.append_audit([audit()])

    assert path.is_file()


@pytest.mark.anyio
async def test_use_before_open_says_what_to_do(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 'x.db'}")

    with pytest.raises(RuntimeError, match=r"await store\.open\(\)"):
        await store.list_audit()


@pytest.mark.anyio
async def test_open_again_and_reopen_keep_the_data(database: Database, audit: Audit) -> None:
    store = database.store()
    await store.open()
    await store.append_audit([audit(call_id="kept")])
    await store.open()
    await store.close()
    await store.close()

    async with store, database.store() as other:
        assert [r.call_id for r in await store.list_audit()] == ["kept"]
        assert [r.call_id for r in await other.list_audit()] == ["kept"]


@pytest.mark.anyio
async def test_concurrent_opens_of_a_fresh_database_all_succeed(
    database: Database, audit: Audit
) -> None:
    stores = [database.store() for _ in range(4)]

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for store in stores:
                    tg.start_soon(store.open)
        await stores[0].append_audit([audit()])
        assert len(await stores[-1].list_audit()) == 1
    finally:
        for store in stores:
            await store.close()


@pytest.mark.anyio
async def test_in_memory_sqlite_is_one_database_for_the_store(audit: Audit) -> None:
    async with SQLStore("sqlite:///:memory:") as store:
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(store.append_audit, [audit(call_id=f"c{i}")])
        assert len(await store.list_audit()) == 10


@pytest.mark.anyio
async def test_open_store_picks_the_implementation(tmp_path: Path) -> None:
    memory = await open_store("memory://")
    sql = await open_store(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        assert isinstance(memory, MemoryStore)
        assert isinstance(sql, SQLStore)
        assert isinstance(memory, Store) and isinstance(sql, Store)
        assert await sql.list_audit() == []
    finally:
        await memory.close()
        await sql.close()


@pytest.mark.anyio
async def test_audit_appends_wait_for_another_writer_off_the_event_loop(
    tmp_path: Path, audit: Audit
) -> None:
    """While another connection holds the write lock, an append neither fails nor
    blocks the event loop: it waits on the worker thread, then commits."""
    import sqlite3

    path = tmp_path / "locked.db"
    store = SQLStore(f"sqlite:///{path}")
    async with store:
        await store.append_audit([audit(call_id="before")])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                appended = anyio.Event()

                async def append() -> None:
                    await store.append_audit([audit(call_id="while-locked")])
                    appended.set()

                tg.start_soon(append)
                await anyio.sleep(0.2)
                assert not appended.is_set()  # still waiting for the lock...
                assert ticks >= 5  # ...and the loop kept running meanwhile
                other.execute("ROLLBACK")
                other.close()
                await appended.wait()
                tg.cancel_scope.cancel()
        records = await store.list_audit()
    assert [r.call_id for r in records] == ["before", "while-locked"]
