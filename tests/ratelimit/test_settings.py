"""``[limits.rate]``: what it accepts, and refusals that name the key (never a password)."""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Gate
from callgate.clock import ManualClock
from callgate.errors import InvalidArgument
from callgate.ratelimit import Rate, RateLimits, parse_rate_limits
from callgate.store import MemoryStore

from .conftest import ALICE, ops


def test_a_complete_table_is_read() -> None:
    limits = parse_rate_limits(
        {
            "per_principal": "600/hour",
            "per_tool": {"ops.deploy_rollback": "5/hour", "fs.*": "100/minute"},
            "backend": "redis",
            "redis_url": "redis://:pw@127.0.0.1:6379/0",
            "key_prefix": "gw1:",
            "on_backend_error": "allow",
        },
        "callgate.toml",
    )

    assert limits.per_principal == Rate(count=600, period=3600.0, text="600/hour")
    assert [(r.pattern, r.rate.count, r.rate.period) for r in limits.per_tool] == [
        ("ops.deploy_rollback", 5, 3600.0),
        ("fs.*", 100, 60.0),
    ]
    assert [r.pattern for r in limits.rules_for("fs.read")] == ["fs.*"]
    assert limits.rules_for("fs") == ()
    assert (limits.backend, limits.key_prefix, limits.on_backend_error) == (
        "redis",
        "gw1:",
        "allow",
    )


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [
        ("60/minute", 60, 60),
        ("5 / hour", 5, 3600),
        ("10/30s", 10, 30),
        ("1000/day", 1000, 86400),
        ("2/seconds", 2, 1),
        ("3/5minutes", 3, 300),
    ],
)
def test_rates_are_count_per_unit(text: str, count: int, seconds: float) -> None:
    rate = Rate.parse(text)
    assert (rate.count, rate.period) == (count, seconds)


def test_an_empty_table_sets_no_limit_and_the_gate_runs_no_rate_stage() -> None:
    limits = parse_rate_limits({}, "callgate.toml")
    assert not limits.enabled
    assert Gate([], store=MemoryStore(), rate_limits=limits).rate_limits is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"per_user": "1/minute"}, "limits.rate.per_user: unknown key (allowed: per_principal"),
        (
            {"per_principal": "60/fortnight"},
            "limits.rate.per_principal: '60/fortnight' is not a rate",
        ),
        ({"per_principal": "0/minute"}, "limits.rate.per_principal: '0/minute': the count"),
        ({"per_principal": 60}, "limits.rate.per_principal: must be a string"),
        ({"per_principal": "10/ms"}, "limits.rate.per_principal: '10/ms' is not a rate"),
        ({"per_tool": "5/hour"}, "limits.rate.per_tool: must be a table"),
        ({"per_tool": {"fs.*": "lots"}}, "limits.rate.per_tool.\"fs.*\": 'lots' is not a rate"),
        ({"backend": "etcd"}, "limits.rate.backend: 'etcd' is not store, redis or memory"),
        ({"backend": "redis"}, "limits.rate.backend: redis needs redis_url or redis_url_env"),
        ({"redis_url": "redis://h/0"}, 'limits.rate.redis_url: only for backend = "redis"'),
        ({"on_backend_error": "ignore"}, "limits.rate.on_backend_error: 'ignore' is not refuse"),
        ({"key_prefix": 3}, "limits.rate.key_prefix: must be a non-empty string"),
        (
            {"backend": "redis", "redis_url": "redis://h/0", "redis_url_env": "X"},
            "limits.rate.redis_url_env: give redis_url or redis_url_env, not both",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_file_and_the_key(
    table: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_rate_limits(table, "callgate.toml")
    assert str(caught.value).startswith("callgate.toml: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["http://:hunter2hunter2@cache:6379/0", "redis://:hunter2hunter2@cache:port/0"],
)
def test_a_bad_redis_url_is_refused_without_its_password(url: str) -> None:
    with pytest.raises(InvalidArgument, match=r"limits\.rate\.redis_url: ") as caught:
        parse_rate_limits({"backend": "redis", "redis_url": url}, "callgate.toml")
    assert "hunter2" not in str(caught.value)


def test_the_redis_url_is_not_in_the_settings_repr() -> None:
    limits = RateLimits(backend="redis", redis_url="redis://user:hunter2hunter2@cache:6379/0")
    assert "hunter2" not in repr(limits)


@pytest.mark.anyio
async def test_a_burst_of_exactly_the_count_fits_whatever_the_rounding() -> None:
    box, ran = ops()
    clock = ManualClock()
    limits = parse_rate_limits({"per_principal": "3000/second", "backend": "memory"}, "t.toml")
    async with Gate([box], store=MemoryStore(clock=clock), clock=clock, rate_limits=limits) as g:
        answers = [
            await g.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
            for _ in range(3003)
        ]
    # 1 s / 3000 is 333.3 µs: whole intervals must not let 3003 calls fit.
    assert [a.error is None for a in answers] == [True] * 3000 + [False] * 3
    assert ran["deploy_status"] == 3000
