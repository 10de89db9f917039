"""Where the buckets live: this process, the gate's store, or a Redis server.

Every backend takes one call from several buckets atomically, all or none
(:class:`~callgate.store.sql_rates.RateTaken`), with the same GCRA arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from callgate.errors import InvalidArgument
from callgate.store.sql_rates import RateBucket, RateRecords, RateTaken

_PURGE_EVERY_US = 60_000_000


class Backend(Protocol):
    async def take(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken: ...

    async def aclose(self) -> None: ...


def gcra(tat: int | None, bucket: RateBucket, now_us: int) -> int | None:
    """The bucket's next ``tat`` if a call fits now, else None."""
    after = max(tat or now_us, now_us) + bucket.interval_us
    return after if after - now_us <= bucket.period_us else None


def wait_us(tat: int | None, bucket: RateBucket, now_us: int) -> int:
    """How long until a call fits a bucket at ``tat`` (at least 1 µs when it does not)."""
    after = max(tat or now_us, now_us) + bucket.interval_us
    return max(after - now_us - bucket.period_us, 1)


class MemoryBackend:
    """Buckets in this process (one event loop: nothing awaits between read and write)."""

    def __init__(self) -> None:
        self._tats: dict[str, int] = {}
        self._purged_us = 0

    async def take(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        return self.take_now(buckets, now_us=now_us)

    def take_now(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        if now_us - self._purged_us >= _PURGE_EVERY_US:
            self._purged_us = now_us
            self._tats = {key: tat for key, tat in self._tats.items() if tat >= now_us}
        news: list[int] = []
        for index, bucket in enumerate(buckets):
            tat = self._tats.get(bucket.key)
            after = gcra(tat, bucket, now_us)
            if after is None:
                return RateTaken(index, wait_us(tat, bucket, now_us))
            news.append(after)
        for bucket, after in zip(buckets, news, strict=True):
            self._tats[bucket.key] = after
        return RateTaken(None, 0)

    async def aclose(self) -> None:
        self._tats.clear()


class StoreBackend:
    """Buckets in the gate's database (see :mod:`callgate.store.sql_rates`)."""

    def __init__(self, store: RateRecords) -> None:
        self._store = store

    async def take(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        return await self._store.take_rates(buckets, now_us=now_us)

    async def aclose(self) -> None:
        return None  # the gate closes its store


# KEYS: the buckets; ARGV: now, then each bucket's interval and period (µs).
# All or none: every bucket is read first, written only when all have room.
# Numbers are Lua doubles: exact for microseconds since the epoch (< 2^53).
_LUA = """
local now = tonumber(ARGV[1])
local news = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i])
  local period = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local after = tat + interval
  if after - now > period then
    return {i - 1, after - now - period}
  end
  news[i] = after
end
for i, key in ipairs(KEYS) do
  local ttl = math.ceil((news[i] - now) / 1000) + 1000
  redis.call('SET', key, string.format('%.0f', news[i]), 'PX', ttl)
end
return {-1, 0}
"""

REDIS_TIMEOUT = 2.0
"""Seconds to connect to Redis or wait for its answer before the backend counts as down."""


class RedisBackend:
    """Buckets in Redis, taken by one Lua script (atomic on the server)."""

    def __init__(self, url: str) -> None:
        try:
            from redis import asyncio as aioredis
        except ImportError:  # pragma: no cover - the extra is in dev
            raise InvalidArgument(
                "limits.rate.backend: redis needs the redis package "
                "(install callgate with the 'redis' extra)"
            ) from None
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
        )
        self._script: Any = self._client.register_script(_LUA)

    async def take(self, buckets: Sequence[RateBucket], *, now_us: int) -> RateTaken:
        args: list[int] = [now_us]
        for bucket in buckets:
            args += [bucket.interval_us, bucket.period_us]
        index, wait = await self._script(keys=[b.key for b in buckets], args=args)
        return RateTaken(None, 0) if int(index) < 0 else RateTaken(int(index), max(int(wait), 1))

    async def aclose(self) -> None:
        await self._client.aclose()
