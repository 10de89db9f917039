"""When Redis does not answer: refused (the default) or let through, as the config says;
its password appears nowhere."""

from __future__ import annotations

import logging
import socket
import uuid

import pytest

from callgate import ErrorKind, Gate
from callgate.ratelimit import RateLimits, parse_rate_limits
from callgate.store import MemoryStore

from .conftest import ALICE, ops

pytestmark = pytest.mark.anyio

PASSWORD = "s3cret-Pa55word"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def _limits(on_backend_error: str) -> RateLimits:
    return parse_rate_limits(
        {
            "per_principal": "10/minute",
            "backend": "redis",
            "redis_url": f"redis://:{PASSWORD}@127.0.0.1:{_closed_port()}/0",
            "on_backend_error": on_backend_error,
        },
        "callgate.toml",
    )


async def test_an_unreachable_redis_refuses_calls_as_transient_and_shows_no_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    box, ran = ops()
    limits = _limits("refuse")
    assert PASSWORD not in repr(limits)
    caplog.set_level(logging.WARNING, logger="callgate.ratelimit")
    async with Gate([box], store=MemoryStore(), rate_limits=limits) as gate:
        env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
        [record] = [r for r in await gate.audit() if r.phase == "final"]

    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.error.retryable
    assert "cannot check its rate limits" in env.error.message_for_model
    assert ran["deploy_status"] == 0
    assert record.decision == "refused:rate_limit"
    assert record.detail["rate_limit"]["limit"] == "unavailable"
    assert "Connect" in record.detail["rate_limit"]["error"]  # what failed, for operators
    seen = [env.model_dump_json(), str(record), caplog.text]
    assert caplog.text and not any(PASSWORD in text for text in seen)


async def test_on_backend_error_allow_lets_calls_through_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    box, ran = ops()
    caplog.set_level(logging.WARNING, logger="callgate.ratelimit")
    async with Gate([box], store=MemoryStore(), rate_limits=_limits("allow")) as gate:
        env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)

    assert env.error is None and ran["deploy_status"] == 1
    assert "rate limits not applied" in caplog.text and PASSWORD not in caplog.text


async def test_a_redis_url_from_an_unset_variable_stops_the_gate_from_opening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CALLGATE_TEST_REDIS", raising=False)
    limits = parse_rate_limits(
        {"per_principal": "1/second", "backend": "redis", "redis_url_env": "CALLGATE_TEST_REDIS"},
        "callgate.toml",
    )
    box, _ = ops()
    gate = Gate([box], store=MemoryStore(), rate_limits=limits)
    with pytest.raises(ValueError, match="CALLGATE_TEST_REDIS is not set"):
        await gate.open()
    await gate.aclose()


async def test_a_redis_url_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
    limits = parse_rate_limits(
        {
            "per_tool": {"ops.deploy_status": "1/hour"},
            "backend": "redis",
            "redis_url_env": "CALLGATE_TEST_REDIS",
            "key_prefix": f"callgate-test:{uuid.uuid4().hex}:",
        },
        "callgate.toml",
    )
    box, _ = ops()
    async with Gate([box], store=MemoryStore(), rate_limits=limits) as gate:
        first = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
        second = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=ALICE)
    assert first.error is None
    assert second.error is not None and "1/hour" in second.error.message_for_model
