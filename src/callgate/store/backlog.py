"""Writes the store could not take when they were made, kept until it can.

A call that has an outcome must leave it in the store: its final audit record,
the answer its idempotency key replays, its approval's result. When the store
cannot answer at that moment (SQLite locked by another process, PostgreSQL
connections terminated, a server restarting), the caller still gets an
Envelope (see ``runtime/pipeline.py``) and these writes wait here, in order:
a background task retries them with growing pauses until the store answers,
any successful final record wakes it at once, and closing gives them a last try.

Bounds and losses, on purpose:

- At most ``limit`` writes wait. Beyond that a write is dropped and logged as
  an error with its content, so the operator's log still holds it.
- The backlog lives in this process's memory. If the process dies before the
  store is back, its writes are lost. What stays in the store then tells the
  truth, if less of it: a side-effecting call's ``intent`` record (written before
  the tool ran) shows the call as "outcome unknown", and its idempotency claim
  stays pending, so the same key answers ``unknown_outcome`` and never runs again.
- A write the store refuses (not "cannot answer now" but "no") is dropped and
  logged: it would fail the same way forever.

An audit record is written once: if an earlier attempt did commit after all
(the connection died while the commit was acknowledged), the retry finds it and
skips it. The other writes are idempotent by nature (an UPDATE, a conditional
DELETE, an insert-or-ignore).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from callgate.store.base import AuditRecord, Store
from callgate.store.failures import describe, is_unavailable

__all__ = ["WriteBacklog"]

logger = logging.getLogger(__name__)

Write = Callable[[Store], Awaitable[object]]


@dataclass(frozen=True)
class _Kept:
    what: str
    write: Write
    audit: AuditRecord | None = None


class WriteBacklog:
    """Writes kept in memory, in order, and retried until the store takes them."""

    def __init__(
        self,
        store: Store,
        *,
        limit: int = 10_000,
        first_pause: float = 0.1,
        max_pause: float = 30.0,
    ) -> None:
        """Keep writes for ``store``; nothing runs until :meth:`start` or a kept write.

        Args:
            store: Where the writes go.
            limit: Most writes kept at once; later ones are dropped (and logged).
            first_pause: Seconds before the first retry; doubled after each failed
                round, up to ``max_pause``.
            max_pause: Longest pause between two rounds.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        self._store = store
        self._limit = limit
        self._first_pause = first_pause
        self._max_pause = max_pause
        self._kept: deque[_Kept] = deque()
        self._round = asyncio.Lock()
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def __len__(self) -> int:
        return len(self._kept)

    async def start(self) -> None:
        """Start the retrying task in the running event loop (idempotent)."""
        self._ensure_task()

    def keep_audit(self, record: AuditRecord, *, why: BaseException | None = None) -> bool:
        """Keep an audit record the store did not take; False if it was dropped."""
        what = f"the {record.phase} audit record of {record.call_id}"
        return self._keep(_Kept(what, _append(record), record), why)

    def keep(self, what: str, write: Write, *, why: BaseException | None = None) -> bool:
        """Keep an idempotent ``write(store)``; False if it was dropped.

        ``write`` must hold only what it writes (not a whole call and its payload):
        it may wait here for a long time.
        """
        return self._keep(_Kept(what, write), why)

    def poke(self) -> None:
        """The store just took a write: retry now rather than after the pause."""
        if self._kept:
            self._wake.set()

    async def flush(self) -> int:
        """Write what is kept, in order, now; stop at the first write the store
        cannot take. Returns how many writes are still waiting."""
        async with self._round:
            while self._kept:
                item = self._kept[0]
                try:
                    if item.audit is None or not await self._already_written(item.audit):
                        await item.write(self._store)
                except Exception as exc:
                    if is_unavailable(exc):
                        return len(self._kept)
                    self._kept.popleft()
                    logger.error(
                        "callgate: the store refused %s (%s); dropped: %s",
                        item.what,
                        describe(exc),
                        _content(item),
                    )
                    continue
                self._kept.popleft()
                logger.info("callgate: wrote %s late, once the store answered", item.what)
            self._empty.set()
            return 0

    async def drained(self) -> None:
        """Return once nothing is kept (at once if nothing is)."""
        await self._empty.wait()

    async def aclose(self) -> int:
        """Stop retrying, give every kept write a last try; the number lost (logged)."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        left = await self.flush()
        for item in self._kept:
            logger.error(
                "callgate: closing with %s not written (the store does not answer): %s",
                item.what,
                _content(item),
            )
        self._kept.clear()
        self._empty.set()
        return left

    def _keep(self, item: _Kept, why: BaseException | None) -> bool:
        reason = describe(why) if why is not None else "the store did not answer"
        if len(self._kept) >= self._limit:
            logger.error(
                "callgate: %d writes already wait for the store; dropped %s (%s): %s",
                len(self._kept),
                item.what,
                reason,
                _content(item),
            )
            return False
        self._kept.append(item)
        self._empty.clear()
        logger.warning("callgate: kept %s to write later (%s)", item.what, reason)
        self._ensure_task()
        self._wake.set()
        return True

    async def _already_written(self, record: AuditRecord) -> bool:
        written = await self._store.list_audit(call_id=record.call_id)
        return any(r.phase == record.phase for r in written)

    def _ensure_task(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="callgate-write-backlog"
            )

    async def _run(self) -> None:
        pause = self._first_pause
        while True:
            await self._wake.wait()
            self._wake.clear()
            if await self.flush() == 0:
                pause = self._first_pause
                continue
            try:
                # A poke (another write went through) cuts the pause short.
                await asyncio.wait_for(self._wake.wait(), pause)
            except TimeoutError:
                pause = min(pause * 2, self._max_pause)
            self._wake.set()


def _append(record: AuditRecord) -> Write:
    async def write(store: Store) -> None:
        await store.append_audit([record])

    return write


def _content(item: _Kept) -> str:
    if item.audit is None:
        return item.what
    return json.dumps(asdict(item.audit), default=str, sort_keys=True)
