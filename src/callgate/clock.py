"""What time it is, for everything that expires: approvals, previews, idempotency
keys, results, handles, tasks, leases.

One seam instead of ``datetime.now(UTC)`` written at every use: a gate, its
store and what they hand out read one :class:`Clock`. Tests of expiry move a
:class:`ManualClock` forward instead of sleeping on the real one.

Deadlines of running code (timeouts, retries, backoff) are not on this clock:
they are measured on the event loop's monotonic time, which no test should fake.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Tells the current time, timezone-aware and in UTC."""

    def now(self) -> datetime: ...


class SystemClock:
    """The machine's clock."""

    # ``datetime.now(UTC)`` itself, without a Python frame around it: every call reads it.
    now = staticmethod(partial(datetime.now, UTC))

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to: for tests of anything that expires.

    Example:
        clock = ManualClock()
        gate = Gate([ops], store=MemoryStore(clock=clock), clock=clock)
        ...
        clock.advance(hours=25)  # every approval of a day's TTL has now expired

    Args:
        start: the time it shows first (timezone-aware); the system's time by default.

    Raises:
        ValueError: ``start`` is naive.
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and (start.tzinfo is None or start.utcoffset() is None):
            raise ValueError("ManualClock needs a timezone-aware start (e.g. datetime.now(UTC))")
        self._now = (start or datetime.now(UTC)).astimezone(UTC)
        self._lock = threading.Lock()  # tools in worker threads read it too

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | None = None, **parts: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**parts)``; the new time.

        Raises:
            ValueError: a step backwards (time never goes back for what expires).
        """
        step = delta if delta is not None else timedelta(**parts)
        if step < timedelta(0):
            raise ValueError(f"a clock does not go back ({step})")
        with self._lock:
            self._now += step
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()})"
