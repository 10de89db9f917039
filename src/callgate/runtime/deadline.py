"""A deadline that progress may move, and waiting on a future until it.

The gate answers a call at its deadline whatever the tool does. A task that
ignores cancellation, or a thread, would keep a waiter that stops by being
cancelled, so the waiter is woken instead (:class:`Alarm`, :func:`wait_until`)
and decides what to do with work still running.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Alarm", "Deadline", "wait_until"]


class Deadline:
    """When the caller stops waiting, in event-loop time.

    ``extend`` moves it later (a tool reporting progress is working, not hung),
    never past ``limit`` and never once it has passed.
    """

    __slots__ = ("_loop", "limit", "when")

    def __init__(self, seconds: float, *, limit: float | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self.limit = limit
        when = self._loop.time() + seconds
        self.when = when if limit is None else min(when, limit)

    def remaining(self) -> float:
        return self.when - self._loop.time()

    def extend(self, seconds: float) -> bool:
        """Move the deadline to ``seconds`` from now; whether it moved."""
        now = self._loop.time()
        when = now + seconds if self.limit is None else min(now + seconds, self.limit)
        if now >= self.when or when <= self.when:
            return False
        self.when = when
        return True


class Alarm:
    """Resolves ``wake`` at the deadline, following it when it moves."""

    __slots__ = ("_deadline", "_handle", "_wake")

    def __init__(self, deadline: Deadline, wake: asyncio.Future[None]) -> None:
        self._deadline = deadline
        self._wake = wake
        self._handle = wake.get_loop().call_at(deadline.when, self._ring)

    def _ring(self) -> None:
        if self._deadline.remaining() > 0:
            self._handle = self._wake.get_loop().call_at(self._deadline.when, self._ring)
        elif not self._wake.done():
            self._wake.set_result(None)

    def cancel(self) -> None:
        self._handle.cancel()


async def wait_until(future: asyncio.Future[Any], deadline: Deadline) -> bool:
    """Wait for ``future`` until the deadline (which may move); whether it is done."""
    if future.done():
        return True
    waiter = future.get_loop().create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    future.add_done_callback(wake)
    alarm = Alarm(deadline, waiter)
    try:
        await waiter
    finally:
        alarm.cancel()
        future.remove_done_callback(wake)
    return future.done()
