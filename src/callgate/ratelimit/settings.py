"""What ``[limits.rate]`` asks for: :class:`RateLimits`, read by :func:`parse_rate_limits`.

Example (TOML)::

    [limits.rate]
    per_principal = "600/hour"          # every call of one principal, all tools
    backend = "redis"                   # or "store" (the gate's database), "memory"
    redis_url_env = "CALLGATE_REDIS_URL"

    [limits.rate.per_tool]              # per principal, per pattern
    "ops.deploy_rollback" = "5/hour"
    "fs.*" = "100/minute"
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from callgate.errors import InvalidArgument

__all__ = ["Backend", "OnBackendError", "Rate", "RateLimits", "ToolRate", "parse_rate_limits"]

Backend = Literal["store", "redis", "memory"]
OnBackendError = Literal["refuse", "allow"]

_UNITS = {
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d+)?\s*([a-z]+)\s*")
_KEYS = ("per_principal", "per_tool", "backend", "redis_url", "redis_url_env", "key_prefix",
         "on_backend_error")  # fmt: skip
DEFAULT_PREFIX = "callgate:rl:"


@dataclass(kw_only=True, frozen=True)
class Rate:
    """``count`` calls per ``period`` seconds, as many at once as ``count``."""

    count: int
    period: float
    text: str
    """As written in the config (``"60/minute"``), for messages."""

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"60/minute"``, ``"5/hour"``, ``"10/30s"``, ``"1000/day"``.

        Raises:
            InvalidArgument: not ``<count>/<unit>`` with a count of at least 1.
        """
        match = _RATE.fullmatch(text.lower()) if isinstance(text, str) else None
        unit = _UNITS.get(match.group(3)) if match else None
        if match is None or unit is None:
            raise InvalidArgument(
                f"{text!r} is not a rate: write <count>/<unit> with a unit of second, minute, "
                'hour or day (e.g. "60/minute", "5/hour", "10/30s")'
            )
        count, every = int(match.group(1)), int(match.group(2) or 1)
        if count < 1 or every < 1:
            raise InvalidArgument(f"{text!r}: the count and the period must be at least 1")
        return cls(count=count, period=float(every * unit), text=text.strip())


@dataclass(kw_only=True, frozen=True)
class ToolRate:
    """A rate for the tools whose full name matches ``pattern`` (a shell glob:
    ``fs.*``, ``ops.deploy_*``); the matching tools share it, per principal."""

    pattern: str
    rate: Rate

    def matches(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.pattern)


@dataclass(kw_only=True, frozen=True)
class RateLimits:
    """Per-principal and per-tool rate limits (the ``[limits.rate]`` table).

    Args:
        per_principal: every call one principal (tenant and user) makes, all tools.
        per_tool: per principal, for the tools matching each pattern; every rule a
            tool matches applies, besides ``per_principal``.
        backend: where the counts live. ``store``: the gate's database (shared by
            replicas on one PostgreSQL; one process on SQLite); ``redis``: a Redis
            server (``redis_url``); ``memory``: this process only.
        redis_url: ``redis://[:password@]host:port/db``; a secret (never shown).
        redis_url_env: the environment variable holding ``redis_url`` instead.
        key_prefix: before every key this gate writes (one Redis for several gateways).
        on_backend_error: when the backend does not answer, ``refuse`` the call
            (fail closed, the default) or ``allow`` it unlimited (logged).

    Raises:
        InvalidArgument: a value that cannot work (see :func:`parse_rate_limits`).
    """

    per_principal: Rate | None = None
    per_tool: tuple[ToolRate, ...] = ()
    backend: Backend = "store"
    redis_url: str | None = field(default=None, repr=False)
    redis_url_env: str | None = None
    key_prefix: str = DEFAULT_PREFIX
    on_backend_error: OnBackendError = "refuse"

    def __post_init__(self) -> None:
        if self.backend not in ("store", "redis", "memory"):
            raise InvalidArgument(f"backend: {self.backend!r} is not store, redis or memory")
        if self.on_backend_error not in ("refuse", "allow"):
            raise InvalidArgument(
                f"on_backend_error: {self.on_backend_error!r} is not refuse or allow"
            )
        if self.redis_url is not None and self.redis_url_env is not None:
            raise InvalidArgument("redis_url_env: give redis_url or redis_url_env, not both")
        if self.backend == "redis" and self.redis_url is None and self.redis_url_env is None:
            raise InvalidArgument("backend: redis needs redis_url or redis_url_env")
        if self.backend != "redis" and (self.redis_url or self.redis_url_env):
            raise InvalidArgument(f'redis_url: only for backend = "redis" (not {self.backend!r})')
        if self.redis_url is not None:
            check_redis_url(self.redis_url)

    @property
    def enabled(self) -> bool:
        """Whether any limit is set (otherwise the gate runs no rate stage at all)."""
        return self.per_principal is not None or bool(self.per_tool)

    def rules_for(self, tool: str) -> tuple[ToolRate, ...]:
        return tuple(rule for rule in self.per_tool if rule.matches(tool))


def check_redis_url(url: str) -> None:
    """Raises InvalidArgument (naming no password) unless ``url`` is a Redis URL."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise InvalidArgument("redis_url: not a URL") from None
    if parts.scheme not in ("redis", "rediss", "unix") or not (parts.hostname or parts.path):
        raise InvalidArgument(
            f"redis_url: {redact_url(url)!r} is not a redis://, rediss:// or unix:// URL"
        )


def redact_url(url: str) -> str:
    """``url`` with its password (and user) replaced by ``***``: safe to show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<redis url>"
    if parts.password is None and parts.username is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"***@{host}").geturl()


def parse_rate_limits(raw: Mapping[str, Any], label: str) -> RateLimits:
    """The ``[limits.rate]`` table of the config file ``label``, validated.

    Raises:
        InvalidArgument: an unknown key or a bad value; the message names the file
            and the key (``callgate.toml: limits.rate.per_principal: ...``) and
            never a password.
    """
    where = f"{label}: limits.rate"
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{where}: must be a table")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise InvalidArgument(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(_KEYS)})")
    values: dict[str, Any] = {}
    for key in ("backend", "redis_url", "redis_url_env", "key_prefix", "on_backend_error"):
        if key in raw:
            if not isinstance(raw[key], str) or not raw[key]:
                raise InvalidArgument(f"{where}.{key}: must be a non-empty string")
            values[key] = raw[key]
    if "per_principal" in raw:
        values["per_principal"] = _rate(raw["per_principal"], f"{where}.per_principal")
    per_tool = raw.get("per_tool", {})
    if not isinstance(per_tool, Mapping):
        raise InvalidArgument(f"{where}.per_tool: must be a table of pattern = rate")
    values["per_tool"] = tuple(
        ToolRate(pattern=pattern, rate=_rate(text, f'{where}.per_tool."{pattern}"'))
        for pattern, text in per_tool.items()
    )
    try:
        return RateLimits(**values)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}.{exc}") from None


def _rate(text: Any, where: str) -> Rate:
    if not isinstance(text, str):
        raise InvalidArgument(f'{where}: must be a string like "60/minute"')
    try:
        return Rate.parse(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
