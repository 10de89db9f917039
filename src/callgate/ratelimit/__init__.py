"""Per-principal and per-tool rate limits that hold across gateway replicas.

The algorithm is GCRA (the generic cell rate algorithm, a token bucket kept as
one timestamp): a rate of ``count`` calls per ``period`` lets a principal make up
to ``count`` calls at once, then one every ``period / count``. Each bucket is
one value (its theoretical arrival time), so taking a call is one atomic
read-and-write where the buckets live: a Lua script in Redis, one
``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` in the store's database, a
dict in this process. See docs/ratelimits.md.
"""

from __future__ import annotations

from callgate.ratelimit.limiter import RateLimiter, Refusal
from callgate.ratelimit.settings import Rate, RateLimits, ToolRate, parse_rate_limits

__all__ = ["Rate", "RateLimiter", "RateLimits", "Refusal", "ToolRate", "parse_rate_limits"]
