"""Fixtures for the demo tests: principals of both tenants and a gate over fresh data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from callgate import Gate, Limits, Principal
from callgate.demo import STATE_ENV, demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes
from callgate.store import MemoryStore

ALL_SCOPES = [
    "campaigns:read",
    "campaigns:write",
    "deploy:read",
    "deploy:rollback",
    "notes:read",
    "email:send",
    "web:read",
]
NOW = datetime(2025, 11, 3, 14, 20, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _in_memory_demo_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """``toolboxes()`` keeps its state in memory unless a test sets the variable."""
    monkeypatch.delenv(STATE_ENV, raising=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def alice() -> Principal:
    """acme's on-call engineer: every scope, role oncall."""
    return Principal(
        "alice@acme.example",
        tenant="acme",
        scopes=ALL_SCOPES,
        roles=["oncall"],
        attributes={"domain": "acme.example"},
    )


@pytest.fixture
def bob() -> Principal:
    """acme engineer with every scope but not on call."""
    return Principal(
        "bob@acme.example",
        tenant="acme",
        scopes=ALL_SCOPES,
        attributes={"domain": "acme.example"},
    )


@pytest.fixture
def carol() -> Principal:
    """acme marketing analyst who may only read campaigns."""
    return Principal("carol@acme.example", tenant="acme", scopes=["campaigns:read"])


@pytest.fixture
def hiro() -> Principal:
    """globex's on-call engineer."""
    return Principal(
        "hiro@globex.example",
        tenant="globex",
        scopes=ALL_SCOPES,
        roles=["oncall"],
        attributes={"domain": "globex.example"},
    )


@pytest.fixture
def now() -> datetime:
    """The demo state's clock: a fixed time on the day of the seeded incidents."""
    return NOW


@pytest.fixture
def state(now: datetime) -> DemoState:
    return DemoState(clock=lambda: now)


@pytest.fixture
async def gate(state: DemoState, anyio_backend: str) -> AsyncIterator[Gate]:
    """A gate over ``state`` with the demo policy and an in-memory store."""
    async with Gate(build_toolboxes(state), store=MemoryStore(), policy=demo_policy()) as opened:
        yield opened


@pytest.fixture
async def small_gate(state: DemoState, anyio_backend: str) -> AsyncIterator[Gate]:
    """Like ``gate``, but results above ~200 tokens are truncated."""
    async with Gate(
        build_toolboxes(state),
        store=MemoryStore(),
        policy=demo_policy(),
        limits=Limits(max_result_tokens=200),
    ) as opened:
        yield opened
