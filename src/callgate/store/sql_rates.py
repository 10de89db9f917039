"""The SQL store's rate limit buckets: one conditional upsert per bucket.

A mixin of :class:`~callgate.store.sql.SQLStore`. The algorithm is GCRA (see
:mod:`callgate.ratelimit`): a bucket is one row holding its theoretical arrival
time ``tat``. Taking a bucket is ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``,
one statement that reads and writes the row under its lock, so any number of
replicas on one PostgreSQL admit exactly as many calls as the rate allows.
Several buckets (a principal's and a tool's) are taken in one transaction, in
key order (no deadlock between two calls), and all are rolled back when one
refuses: a refused call uses up nothing. On PostgreSQL the table is UNLOGGED
(migration 0013): a count is not worth a flush of the WAL to disk per call
(measured: 0.4 ms a call instead of 3-4 ms). A crash of the server empties it
(every principal starts with a full budget again), and a standby does not have
it: after a failover the counts start afresh. Rate limits are a brake, not a
ledger; the audit is the ledger.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from sqlalchemy import TextClause, delete, text
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.clock import Clock
from callgate.store.tables import rate_limits

__all__ = ["RateBucket", "RateRecords", "RateTaken", "SQLRateRecords"]

PURGE_EVERY_US = 60_000_000
"""How often (on the store's clock) one process deletes the buckets that have run dry."""


class RateBucket(NamedTuple):
    """One bucket to take a call from: ``interval_us`` is the period divided by
    the count (GCRA's emission interval), ``period_us`` the whole period."""

    key: str
    interval_us: int
    period_us: int


class RateTaken(NamedTuple):
    """The answer for several buckets: ``refused`` is the index of a bucket that
    had no room (None: every bucket was taken), ``wait_us`` how long until it has."""

    refused: int | None
    wait_us: int


@runtime_checkable
class RateRecords(Protocol):
    """A store that keeps rate limit buckets where every replica sees them."""

    async def take_rates(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        """Take one call from every bucket, or from none when one has no room."""
        ...


class SQLRateRecords:
    """Rate limit buckets on the store's connections."""

    clock: Clock
    _dialect: str
    _rates_purged_us: int = 0

    def _begin(
        self, *, write: bool, single: bool = False
    ) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # provided by SQLStore

    async def take_rates(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        """Take one call from every bucket in one transaction, or from none.

        Returns:
            ``RateTaken(None, 0)`` when the call fits every bucket (they are
            updated), else the index of a bucket without room and the
            microseconds until it has some (nothing is updated).
        """
        if now_us - self._rates_purged_us >= PURGE_EVERY_US:
            self._rates_purged_us = now_us
            async with self._begin(write=True, single=True) as conn:
                await conn.execute(delete(rate_limits).where(rate_limits.c.tat < now_us))
        order = sorted(range(len(buckets)), key=lambda i: buckets[i].key)
        # One bucket: one statement, atomic on its own (autocommit on PostgreSQL).
        async with self._begin(write=True, single=len(buckets) == 1) as conn:
            for index in order:
                bucket = buckets[index]
                row = (await conn.execute(*self._take(bucket, now_us))).one()
                if not row.admitted:
                    if len(buckets) > 1:
                        await conn.rollback()  # the buckets taken before this one
                    wait = max(row.tat, now_us) + bucket.interval_us - bucket.period_us
                    return RateTaken(index, max(wait - now_us, 1))
        return RateTaken(None, 0)

    def _take(self, bucket: RateBucket, now_us: int) -> tuple[TextClause, dict[str, Any]]:
        params = {
            "key": bucket.key,
            "now": now_us,
            "interval": bucket.interval_us,
            "period": bucket.period_us,
        }
        return _TAKE[self._dialect == "postgresql"], params


def _take_statement(postgresql: bool) -> TextClause:
    # Text, not a SQLAlchemy construct: building and compiling one costs more than
    # the statement itself. Both dialects read the row's old values in SET.
    now = "CAST(:now AS BIGINT)"
    start = f"greatest(rate_limits.tat, {now})" if postgresql else "max(rate_limits.tat, :now)"
    fits = f"{start} + :interval <= {now} + :period"
    return text(
        "INSERT INTO rate_limits (key, tat, admitted) "
        f"VALUES (:key, {now} + :interval, {'true' if postgresql else '1'}) "
        "ON CONFLICT (key) DO UPDATE SET "
        f"tat = CASE WHEN {fits} THEN {start} + :interval ELSE rate_limits.tat END, "
        f"admitted = {fits} "
        "RETURNING tat, admitted"
    )


_TAKE = {True: _take_statement(True), False: _take_statement(False)}
