"""Gates with rate limits over every backend: memory, the store (SQLite, PostgreSQL), Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from callgate import Gate, Principal, Toolbox
from callgate.clock import ManualClock
from callgate.ratelimit import RateLimits, parse_rate_limits
from callgate.store import MemoryStore, SQLStore, Store
from tests.pg import POSTGRES_URL, drop_schema

REDIS_URL = "redis://127.0.0.1:6379/0"
ALICE = Principal("alice", "acme", scopes={"deploy:read", "deploy:rollback"})
BOB = Principal("bob", "acme", scopes={"deploy:read", "deploy:rollback"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ops() -> tuple[Toolbox, dict[str, int]]:
    """Three tools, and how often each actually ran."""
    box = Toolbox("ops")
    ran = {"deploy_status": 0, "deploy_rollback": 0, "deploy_log": 0}

    @box.tool(scopes={"deploy:read"}, read_only=True)
    def deploy_status(deploy_id: str) -> str:
        """Show a deployment.

        Args:
            deploy_id: Like D-1.
        """
        ran["deploy_status"] += 1
        return "running"

    @box.tool(scopes={"deploy:read"}, read_only=True)
    def deploy_log(deploy_id: str) -> str:
        """Show a deployment's log.

        Args:
            deploy_id: Like D-1.
        """
        ran["deploy_log"] += 1
        return "log"

    @box.tool(scopes={"deploy:rollback"})
    def deploy_rollback(deploy_id: str) -> str:
        """Roll a deployment back.

        Args:
            deploy_id: Like D-1.
        """
        ran["deploy_rollback"] += 1
        return f"{deploy_id} rolled back"

    return box, ran


BACKENDS = [
    "memory",
    "store-memory",
    "store-sqlite",
    pytest.param("store-postgres", marks=pytest.mark.postgres),
    "redis",
]

GateFactory = Callable[..., Gate]


class Shared:
    """What two gates of one test share: the clock, a database, a Redis prefix."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        self.clock = ManualClock()
        self.prefix = f"callgate-test:{uuid.uuid4().hex}:"
        self.sqlite = f"sqlite:///{tmp_path / 'gate.db'}"
        self.schema = f"test_rl_{uuid.uuid4().hex[:12]}" if backend == "store-postgres" else None
        self.memory = MemoryStore(clock=self.clock)

    def store(self) -> Store:
        if self.backend == "store-sqlite":
            return SQLStore(self.sqlite, clock=self.clock)
        if self.backend == "store-postgres":
            return SQLStore(POSTGRES_URL, schema=self.schema, clock=self.clock)
        return self.memory if self.backend == "store-memory" else MemoryStore(clock=self.clock)

    def limits(self, **table: Any) -> RateLimits:
        settings = parse_rate_limits(table, "test.toml")
        if self.backend == "redis":
            return replace(settings, backend="redis", redis_url=REDIS_URL, key_prefix=self.prefix)
        if self.backend == "memory":
            return replace(settings, backend="memory")
        return replace(settings, backend="store", key_prefix=self.prefix)


@pytest.fixture(params=BACKENDS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    found = Shared(str(request.param), tmp_path)
    try:
        yield found
    finally:
        if found.schema is not None:
            await drop_schema(found.schema)
        if found.backend == "redis":
            await _forget(found.prefix)


async def _forget(prefix: str) -> None:
    from redis import asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
async def make_gate(shared: Shared) -> AsyncIterator[GateFactory]:
    """Gates on the test's backend (several share it, like replicas); closed after."""
    gates: list[Gate] = []

    def factory(toolboxes: Iterable[Toolbox], limits: RateLimits, **options: Any) -> Gate:
        gate = Gate(
            toolboxes, store=shared.store(), clock=shared.clock, rate_limits=limits, **options
        )
        gates.append(gate)
        return gate

    yield factory
    for gate in gates:
        await gate.aclose()
