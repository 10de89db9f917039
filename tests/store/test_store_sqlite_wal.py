"""A SQLite store under steady load: its WAL stays bounded, and a cancelled
call cannot leave the database locked."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from sqlalchemy import Engine, event

from callgate.store import AuditRecord, SQLStore, StoredResult, sqlite_wal

Audit = Callable[..., AuditRecord]


def wal_size(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


def stored(ref: str, kilobytes: int) -> StoredResult:
    now = datetime.now(UTC)
    return StoredResult(
        ref=ref,
        call_id=f"call-{ref}",
        tool="report_get",
        tenant=None,
        user="u",
        content=["x" * 1000] * kilobytes,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


@pytest.fixture
def small_wal(monkeypatch: pytest.MonkeyPatch) -> int:
    """Checkpoint past 256 KiB, looking at the WAL every 8 commits."""
    monkeypatch.setattr(sqlite_wal, "CHECKPOINT_BYTES", 256 * 1024)
    monkeypatch.setattr(sqlite_wal, "LOOK_EVERY", 8)
    return 256 * 1024


@pytest.mark.anyio
async def test_the_wal_stays_bounded_through_many_commits_while_others_read(
    tmp_path: Path, audit: Audit, small_wal: int
) -> None:
    """Thousands of commits, inline and through the async engine, with another
    connection reading between them: the WAL is rewound again and again (before,
    a PASSIVE checkpoint every 1,000 commits never caught up: over 10 MB here)."""
    path = tmp_path / "busy.db"
    reader = sqlite3.connect(path, isolation_level=None)
    largest = 0
    async with SQLStore(f"sqlite:///{path}") as store:
        with anyio.fail_after(60):
            for i in range(2500):
                await store.append_audit([audit(call_id=f"c{i}")])
                if i % 100 == 0:
                    await store.put_result(stored(f"r{i}", 20))
                if i % 10 == 0:
                    (count,) = reader.execute("SELECT count(*) FROM audit").fetchone()
                    assert count == i + 1
                largest = max(largest, wal_size(path))
        assert len(await store.list_audit()) == 2500
    reader.close()
    assert largest < 8 * small_wal


@pytest.mark.anyio
async def test_an_idle_store_empties_its_wal(
    tmp_path: Path, audit: Audit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_wal, "IDLE_SECONDS", 0.01)
    path = tmp_path / "idle.db"
    async with SQLStore(f"sqlite:///{path}") as store:
        for i in range(20):
            await store.append_audit([audit(call_id=f"c{i}")])
        assert wal_size(path) > 0
        with anyio.fail_after(10):
            for _ in iter(lambda: wal_size(path), 0):  # poll: no event says "checkpointed"
                await anyio.sleep(0.01)
        await store.append_audit([audit(call_id="after")])
        records = await store.list_audit()
    assert [r.call_id for r in records] == [*(f"c{i}" for i in range(20)), "after"]


@pytest.mark.anyio
async def test_a_reader_that_pins_the_wal_is_named_in_a_warning(
    tmp_path: Path,
    audit: Audit,
    small_wal: int,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read transaction held open elsewhere stops any checkpoint from rewinding
    the WAL: writes go on, and the operator is told why the file grows."""
    monkeypatch.setattr(sqlite_wal, "MAX_PAUSE", 0.05)
    path = tmp_path / "pinned.db"
    async with SQLStore(f"sqlite:///{path}") as store:
        await store.append_audit([audit(call_id="first")])
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM audit").fetchone()
        with caplog.at_level(logging.WARNING, logger="callgate.store.sqlite_wal"):
            for i in range(600):
                await store.append_audit([audit(call_id=f"c{i}")])
            assert wal_size(path) > 4 * small_wal
            with anyio.fail_after(30):
                while "a read transaction is held open" not in caplog.text:
                    await store.append_audit([audit(call_id="more")])
                    await anyio.sleep(0.001)
        reader.execute("COMMIT")
        reader.close()
        with anyio.fail_after(30):  # once the reader is gone, the next checkpoint rewinds it
            while wal_size(path) > small_wal:
                await store.append_audit([audit(call_id="after")])
                await anyio.sleep(0.001)


@pytest.mark.anyio
async def test_a_write_cancelled_midway_leaves_the_database_writable(
    tmp_path: Path, audit: Audit
) -> None:
    """A caller that goes away (a client hanging up) while its full result is
    being stored: the next writes still commit. Before, the cancelled connection
    was abandoned inside its transaction, holding the write lock, and every
    later write failed with "database is locked" after the busy timeout."""
    began = anyio.Event()

    def on_execute(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.startswith("INSERT INTO results"):
            began.set()

    event.listen(Engine, "before_cursor_execute", on_execute)
    try:
        async with SQLStore(f"sqlite:///{tmp_path / 'x.db'}", busy_timeout=0.2) as store:
            for i in range(3):
                began = anyio.Event()
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(store.put_result, stored(f"r{i}", 200))
                        await began.wait()
                        tg.cancel_scope.cancel()
                await store.append_audit([audit(call_id=f"after-{i}")])
                await store.put_result(stored(f"kept-{i}", 1))
            records = await store.list_audit()
            assert await store.get_result("kept-2") is not None
    finally:
        event.remove(Engine, "before_cursor_execute", on_execute)
    assert [r.call_id for r in records] == ["after-0", "after-1", "after-2"]
