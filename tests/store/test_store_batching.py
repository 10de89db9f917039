"""GroupCommitter: concurrent audit appends share transactions, none is lost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest

from callgate.store import AuditRecord, GroupCommitter, MemoryStore, Store

pytestmark = pytest.mark.anyio

Audit = Callable[..., AuditRecord]


class CountingStore:
    """Delegates to a store; remembers every ``append_audit`` batch size."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.batches: list[int] = []

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        self.batches.append(len(records))
        await self.inner.append_audit(records)

    def append_audit_now(self, records: Sequence[AuditRecord]) -> bool:
        written = bool(self.inner.append_audit_now(records))  # type: ignore[attr-defined]
        if written:
            self.batches.append(len(records))
            self.now.append(len(records))
        return written

    @property
    def now(self) -> list[int]:
        """Batch sizes written in the caller's task (``append_audit_now``)."""
        return self.__dict__.setdefault("_now", [])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class GatedStore(CountingStore):
    """Holds every write until ``gate`` is set, then fails it if ``error`` is set."""

    def __init__(self, inner: Store, error: Exception | None = None) -> None:
        super().__init__(inner)
        self.gate = anyio.Event()
        self.writing = anyio.Event()
        self.error = error

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        self.writing.set()
        await self.gate.wait()
        if self.error is not None:
            self.batches.append(len(records))
            raise self.error
        await super().append_audit(records)


async def test_hundred_concurrent_appends_are_durable_in_few_transactions(
    store: Store, audit: Audit
) -> None:
    counting = CountingStore(store)
    committer = GroupCommitter(counting)
    returned: list[str] = []

    async def append(i: int) -> None:
        await committer.append(audit(call_id=f"c{i}"))
        # Durable when append returns: the record is already readable.
        assert [r.call_id for r in await store.list_audit(call_id=f"c{i}")] == [f"c{i}"]
        returned.append(f"c{i}")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(append, i)
        await committer.aclose()

    assert len(returned) == 100
    assert sum(counting.batches) == 100
    assert len(counting.batches) <= 3
    assert {r.call_id for r in await store.list_audit()} == {f"c{i}" for i in range(100)}


async def test_a_lone_caller_commits_each_record_at_once(audit: Audit) -> None:
    counting = CountingStore(MemoryStore())
    async with GroupCommitter(counting) as committer:
        for i in range(3):
            with anyio.fail_after(5):
                await committer.append(audit(call_id=f"c{i}"))
            assert counting.batches == [1] * (i + 1)


async def test_a_lone_caller_commits_in_its_own_task(store: Store, audit: Audit) -> None:
    counting = CountingStore(store)
    async with GroupCommitter(counting, alone=lambda: True) as committer:
        for i in range(3):
            with anyio.fail_after(5):
                await committer.append(audit(call_id=f"c{i}"))
            # Durable when append returns, without the writer task's round trip.
            assert [r.call_id for r in await store.list_audit(call_id=f"c{i}")] == [f"c{i}"]
    assert counting.batches == [1, 1, 1]
    # SQLite files and the MemoryStore commit without yielding; other stores
    # (PostgreSQL, SQLite in memory through the async engine) batch as usual.
    fast = isinstance(store, MemoryStore) or (
        store.url.startswith("sqlite:///") and (":memory:" not in store.url)
    )
    assert counting.now == ([1, 1, 1] if fast else [])


async def test_a_lone_caller_waits_behind_a_batch_being_written(audit: Audit) -> None:
    gated = GatedStore(MemoryStore())
    company = [True]
    committer = GroupCommitter(gated, alone=lambda: not company[0])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(committer.append, audit(call_id="first"))
            await gated.writing.wait()  # the writer task holds "first"
            company[0] = False
            tg.start_soon(committer.append, audit(call_id="second"))
            await anyio.sleep(0.05)
            # Not written past the batch in flight: the audit keeps its order.
            assert await gated.inner.list_audit() == []
            gated.gate.set()
        await committer.aclose()
    assert [r.call_id for r in await gated.inner.list_audit()] == ["first", "second"]
    assert gated.now == []


async def test_a_failed_write_raises_in_every_caller_of_the_batch(audit: Audit) -> None:
    boom = RuntimeError("disk full")
    gated = GatedStore(MemoryStore(), error=boom)
    committer = GroupCommitter(gated)
    errors: list[BaseException] = []

    async def append(i: int) -> None:
        try:
            await committer.append(audit(call_id=f"c{i}"))
        except RuntimeError as exc:
            errors.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(append, i)
            await gated.writing.wait()
            gated.gate.set()
        await committer.aclose()

    assert gated.batches == [10]
    assert errors == [boom] * 10


async def test_the_committer_keeps_working_after_a_failed_batch(audit: Audit) -> None:
    gated = GatedStore(MemoryStore(), error=RuntimeError("once"))
    gated.gate.set()
    async with GroupCommitter(gated) as committer:
        with anyio.fail_after(5), pytest.raises(RuntimeError, match="once"):
            await committer.append(audit(call_id="c1"))
        gated.error = None
        with anyio.fail_after(5):
            await committer.append(audit(call_id="c2"))

    assert [r.call_id for r in await gated.inner.list_audit()] == ["c2"]


async def test_aclose_racing_appends_loses_nothing(audit: Audit) -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(committer.append, audit(call_id=f"before-{i}"))
            tg.start_soon(committer.aclose)
            for i in range(20):
                tg.start_soon(committer.append, audit(call_id=f"after-{i}"))
        await committer.append(audit(call_id="after-close"))

    call_ids = {r.call_id for r in await store.list_audit()}
    assert len(call_ids) == 41
    assert "after-close" in call_ids


async def test_a_cancelled_caller_still_gets_its_record_written(audit: Audit) -> None:
    gated = GatedStore(MemoryStore())
    committer = GroupCommitter(gated)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(committer.append, audit(call_id="first"))
            await gated.writing.wait()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await committer.append(audit(call_id="cancelled"))
            gated.gate.set()
        await committer.aclose()

    assert [r.call_id for r in await gated.inner.list_audit()] == ["first", "cancelled"]


async def test_aclose_without_start_and_twice_is_harmless(audit: Audit) -> None:
    store = MemoryStore()
    committer = GroupCommitter(store)

    await committer.aclose()
    await committer.aclose()
    await committer.append(audit())

    assert len(await store.list_audit()) == 1


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommitter(MemoryStore(), max_batch=0)


async def test_max_batch_bounds_each_transaction(audit: Audit) -> None:
    gated = GatedStore(MemoryStore())
    committer = GroupCommitter(gated, max_batch=4)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(committer.append, audit(call_id="first"))
            await gated.writing.wait()
            for i in range(10):
                tg.start_soon(committer.append, audit(call_id=f"c{i}"))
            await anyio.wait_all_tasks_blocked()
            gated.gate.set()
        await committer.aclose()

    assert gated.batches == [1, 4, 4, 2]
