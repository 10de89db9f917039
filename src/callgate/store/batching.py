"""Group commit for the audit trail.

Every governed call writes audit records, and a durable commit (an fsync on
SQLite, a round trip on PostgreSQL) costs far more than the rows in it. Calls
that finish together therefore share one transaction: each caller still waits
until its own record is durable, but N concurrent callers pay for one commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import TracebackType

from callgate.store.base import AuditRecord, Store

__all__ = ["GroupCommitter"]

_Waiter = tuple[AuditRecord, "asyncio.Future[None]"]


class GroupCommitter:
    """Batches concurrent :meth:`append` calls into shared ``append_audit`` calls.

    One background writer task takes everything queued (up to ``max_batch``
    records), writes it in one ``store.append_audit`` call, then wakes every
    caller in the batch, with the write's exception if it failed. While it
    writes, new records queue up for the next batch; nothing waits on a timer,
    so a lone caller commits at once.

    The writer starts on the first :meth:`append` if :meth:`start` was not
    called. It runs on asyncio (the SQL drivers do too). After :meth:`aclose`,
    :meth:`append` writes straight through to the store, so a record appended
    during shutdown is never dropped.
    """

    def __init__(
        self, store: Store, *, max_batch: int = 500, alone: Callable[[], bool] | None = None
    ) -> None:
        """Wrap ``store``; nothing starts until :meth:`start` or :meth:`append`.

        Args:
            store: Where the records go (it must be open while records flow).
            max_batch: Most records per transaction, which bounds its size.
            alone: Whether no other caller is about to append (the gate: no
                other call under way). Then, with nothing queued or being
                written, a store that can commit without yielding
                (``append_audit_now``: SQLite with its lock free, the
                MemoryStore) commits in the caller's task, skipping the hand-off
                to the writer task and back; with company, records are batched.
        """
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, not {max_batch}")
        self._store = store
        self._max_batch = max_batch
        self._queue: list[_Waiter] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._writing = False
        self._alone = alone

    async def __aenter__(self) -> GroupCommitter:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start the writer task in the running event loop (idempotent)."""
        self._ensure_writer()

    async def append(self, record: AuditRecord) -> None:
        """Return once ``record`` is durable.

        If the caller is cancelled while waiting, the record is still written.

        Raises:
            Exception: Whatever ``store.append_audit`` raised for the batch that
                held ``record``; every caller in that batch gets it.
        """
        if not self._ensure_writer():
            await self._store.append_audit([record])
            return
        if (
            self._alone is not None
            and not self._queue
            and not self._writing
            and self._alone()
            and self._append_now(record)
        ):
            # Nothing queued or being written: committing here keeps the order, and
            # without a yield there is nothing to cancel halfway.
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((record, waiter))
        self._wakeup.set()
        await waiter

    def _append_now(self, record: AuditRecord) -> bool:
        now: Callable[[Sequence[AuditRecord]], bool] | None = getattr(
            self._store, "append_audit_now", None
        )
        return now is not None and now([record])

    async def aclose(self) -> None:
        """Write everything queued, then stop the writer (idempotent)."""
        self._closing = True
        task = self._task
        if task is None:
            return
        self._wakeup.set()
        # wait(), not await: a cancelled aclose() must leave the writer draining,
        # and a writer that was itself cancelled is no error of the closer's.
        await asyncio.wait([task])

    def _ensure_writer(self) -> bool:
        """Start the writer if needed; False once it has stopped for good."""
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="callgate-audit-group-commit"
            )
        # The check and the enqueue that follows run without a yield, and the
        # writer only stops with an empty queue, so a queued record is written.
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        try:
            while True:
                while self._queue:
                    batch = self._queue[: self._max_batch]
                    del self._queue[: self._max_batch]
                    await self._write(batch)
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
        finally:
            # Only reached with records queued if the task itself was cancelled.
            stranded, self._queue = self._queue, []
            _settle(stranded, RuntimeError("the audit writer stopped; record not written"))

    async def _write(self, batch: list[_Waiter]) -> None:
        self._writing = True
        try:
            await self._store.append_audit([record for record, _ in batch])
        except Exception as exc:
            _settle(batch, exc)
        except BaseException:
            _settle(batch, RuntimeError("the audit writer was cancelled mid-write"))
            raise
        else:
            _settle(batch, None)
        finally:
            self._writing = False


def _settle(batch: list[_Waiter], error: BaseException | None) -> None:
    for _, waiter in batch:
        # A waiter whose caller was cancelled is already done; skip it.
        if waiter.done():
            continue
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)
