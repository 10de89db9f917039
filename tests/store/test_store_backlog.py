"""The write backlog: what the store could not take is written once it can, in order, once."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from callgate.store import AuditRecord, MemoryStore, SQLStore
from callgate.store.backlog import WriteBacklog
from callgate.store.failures import is_unavailable

from .conftest import make_audit

pytestmark = pytest.mark.anyio


class Unreachable(MemoryStore):
    """Appends fail as a locked database does while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.tries = 0

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        self.tries += 1
        if self.down:
            raise sqlite3.OperationalError("database is locked")
        await super().append_audit(records)


async def test_kept_records_are_written_in_order_once_the_store_answers() -> None:
    store = Unreachable()
    backlog = WriteBacklog(store, first_pause=0.01, max_pause=0.05)
    await backlog.start()
    try:
        for i in range(3):
            assert backlog.keep_audit(make_audit(call_id=f"c{i}"))
        assert await backlog.flush() == 3  # still down: nothing written, nothing lost
        store.down = False
        with anyio.fail_after(5):
            await backlog.drained()  # the background task got there
    finally:
        assert await backlog.aclose() == 0
    assert [r.call_id for r in await store.list_audit()] == ["c0", "c1", "c2"]


async def test_a_record_an_earlier_try_did_write_is_not_written_twice() -> None:
    store = MemoryStore()
    record = make_audit(call_id="c1")
    await store.append_audit([record])  # the commit went through, its answer was lost
    backlog = WriteBacklog(store)
    backlog.keep_audit(record)
    assert await backlog.flush() == 0
    assert len(await store.list_audit(call_id="c1")) == 1


async def test_beyond_the_limit_writes_are_dropped_not_held() -> None:
    store = Unreachable()
    backlog = WriteBacklog(store, limit=2)
    assert backlog.keep_audit(make_audit(call_id="a"))
    assert backlog.keep_audit(make_audit(call_id="b"))
    assert not backlog.keep_audit(make_audit(call_id="c"))
    assert len(backlog) == 2
    store.down = False
    assert await backlog.aclose() == 0
    assert [r.call_id for r in await store.list_audit()] == ["a", "b"]


async def test_a_write_the_store_refuses_is_dropped_and_the_rest_go_on() -> None:
    store = MemoryStore()
    backlog = WriteBacklog(store)
    written: list[str] = []

    async def refused(_store: object) -> None:
        raise KeyError("no such record")  # the store answered: no

    async def fine(_store: object) -> None:
        written.append("fine")

    backlog.keep("a refused write", refused)
    backlog.keep("a fine write", fine)
    assert await backlog.flush() == 0
    assert written == ["fine"]


async def test_close_reports_what_could_not_be_written() -> None:
    store = Unreachable()
    backlog = WriteBacklog(store)
    backlog.keep_audit(make_audit(call_id="lost"))
    assert await backlog.aclose() == 1
    assert len(backlog) == 0


async def test_a_locked_sqlite_file_counts_as_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    async with SQLStore(f"sqlite:///{path}", busy_timeout=0.05) as store:
        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Exception) as caught:
                await store.append_audit([make_audit()])
        finally:
            lock.rollback()
            lock.close()
        assert is_unavailable(caught.value)
        backlog = WriteBacklog(store)
        backlog.keep_audit(make_audit(call_id="late"))
        assert await backlog.flush() == 0
        assert [r.call_id for r in await store.list_audit()] == ["late"]
