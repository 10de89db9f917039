"""The rate limiter a gate consults for every call: :class:`RateLimiter`."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from callgate.clock import Clock
from callgate.contract import Principal
from callgate.errors import InvalidArgument
from callgate.ratelimit._backends import Backend, MemoryBackend, RedisBackend, StoreBackend
from callgate.ratelimit.settings import Rate, RateLimits, ToolRate, redact_url
from callgate.store.sql_rates import RateBucket, RateRecords

__all__ = ["RateLimiter", "Refusal"]

logger = logging.getLogger("callgate.ratelimit")

_EPOCH_US = 1_000_000


@dataclass(kw_only=True, frozen=True)
class Refusal:
    """Why a call may not run now.

    ``limit`` is ``per_principal``, ``per_tool`` (``rule`` is its pattern) or
    ``unavailable`` (the backend did not answer and the config says refuse).
    """

    limit: Literal["per_principal", "per_tool", "unavailable"]
    retry_after: float
    """Seconds until the call fits (for ``unavailable``: a suggested wait)."""
    rate: Rate | None = None
    rule: str | None = None
    error: str | None = None
    """For ``unavailable``: what failed, with no password in it (operators only)."""

    def detail(self) -> dict[str, object]:
        """What the audit keeps of the refusal."""
        found: dict[str, object] = {"limit": self.limit, "retry_after": self.retry_after}
        if self.rate is not None:
            found["rate"] = self.rate.text
        if self.rule is not None:
            found["rule"] = self.rule
        if self.error is not None:
            found["error"] = self.error
        return found


class RateLimiter:
    """Takes every call from its principal's bucket and its tool's, or refuses it.

    Keys: ``<prefix>{<principal hash>}:principal`` and ``...:tool:<pattern>``; the
    principal (tenant and user) is hashed, so no name is written to Redis, and
    in braces, so one principal's keys share a Redis Cluster slot (one script).

    Args:
        settings: the limits (``enabled`` must be true).
        backend: where the buckets live.
        clock: the gate's clock (replicas sharing buckets need synchronized clocks,
            as their leases and expiries already do).
    """

    def __init__(self, settings: RateLimits, backend: Backend, *, clock: Clock) -> None:
        self.settings = settings
        self._backend = backend
        self._clock = clock
        self._rules: dict[str, tuple[ToolRate, ...]] = {}
        self._secret = _password(settings)

    @classmethod
    def build(cls, settings: RateLimits, *, store: object, clock: Clock) -> RateLimiter:
        """The limiter of ``settings`` for a gate with ``store``.

        ``backend = "store"`` on a store that cannot share buckets (the
        in-memory one: one process by nature) counts in this process.

        Raises:
            InvalidArgument: ``redis_url_env`` names an unset variable, or the
                ``redis`` package is missing.
        """
        backend: Backend
        if settings.backend == "redis":
            backend = RedisBackend(_redis_url(settings))
        elif settings.backend == "store" and isinstance(store, RateRecords):
            backend = StoreBackend(store)
        else:
            backend = MemoryBackend()
        return cls(settings, backend, clock=clock)

    async def admit(self, principal: Principal, tool: str) -> Refusal | None:
        """None when the call fits every limit that applies (it is counted), else why not.

        A refused call is counted against no limit. When the backend fails, the
        call is refused (``on_backend_error = "refuse"``) or let through unlimited
        (``"allow"``); either way the failure is logged without any password.
        """
        rules = self._rules.get(tool)
        if rules is None:
            rules = self._rules[tool] = self.settings.rules_for(tool)
        rates: list[tuple[Rate, str | None]] = []
        if self.settings.per_principal is not None:
            rates.append((self.settings.per_principal, None))
        rates += [(rule.rate, rule.pattern) for rule in rules]
        if not rates:
            return None
        who = hashlib.sha256(f"{principal.tenant}\x1f{principal.user}".encode()).hexdigest()[:32]
        base = f"{self.settings.key_prefix}{{{who}}}:"
        buckets = [_bucket(base, rate, rule) for rate, rule in rates]
        now_us = int(self._clock.now().timestamp() * _EPOCH_US)
        try:
            taken = await self._backend.take(buckets, now_us=now_us)
        except Exception as exc:  # any failure of the backend: the config decides
            error = self._describe(exc)
            if self.settings.on_backend_error == "allow":
                logger.warning("rate limits not applied (backend failed): %s", error)
                return None
            logger.error("call refused: the rate limit backend failed: %s", error)
            return Refusal(limit="unavailable", retry_after=5.0, error=error)
        if taken.refused is None:
            return None
        rate, rule = rates[taken.refused]
        return Refusal(
            limit="per_principal" if rule is None else "per_tool",
            retry_after=round(taken.wait_us / _EPOCH_US, 3),
            rate=rate,
            rule=rule,
        )

    def _describe(self, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"[:500]
        return text.replace(self._secret, "***") if self._secret else text

    async def aclose(self) -> None:
        await self._backend.aclose()

    def __repr__(self) -> str:
        where: str = self.settings.backend
        if self.settings.redis_url is not None:
            where += f" {redact_url(self.settings.redis_url)}"
        return f"RateLimiter({where})"


def _bucket(base: str, rate: Rate, rule: str | None) -> RateBucket:
    interval = max(int(rate.period * _EPOCH_US) // rate.count, 1)
    # The period as a whole number of intervals: exactly ``count`` calls fit at once.
    return RateBucket(
        key=base + ("principal" if rule is None else f"tool:{rule}"),
        interval_us=interval,
        period_us=interval * rate.count,
    )


def _redis_url(settings: RateLimits) -> str:
    if settings.redis_url is not None:
        return settings.redis_url
    variable = settings.redis_url_env or ""
    url = os.environ.get(variable)
    if not url:
        raise InvalidArgument(
            f"limits.rate.redis_url_env: the environment variable {variable} is not set"
        )
    return url


def _password(settings: RateLimits) -> str | None:
    try:
        url = _redis_url(settings) if settings.backend == "redis" else None
        return None if url is None else urlsplit(url).password
    except (InvalidArgument, ValueError):
        return None
