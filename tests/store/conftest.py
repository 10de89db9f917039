"""Fixtures for the store tests: every store kind behind one ``store`` fixture."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from callgate.store import AuditRecord, MemoryStore, SQLStore, Store
from tests.pg import POSTGRES_URL, drop_schema


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Database:
    """One SQL database (a SQLite file, or a PostgreSQL schema) for a test."""

    url: str
    schema: str | None = None

    def store(self, **options: Any) -> SQLStore:
        return SQLStore(self.url, schema=self.schema, **options)


async def _database(kind: str, tmp_path: Path) -> AsyncIterator[Database]:
    if kind == "sqlite":
        yield Database(f"sqlite:///{tmp_path / 'store.db'}")
        return
    schema = f"test_store_{uuid.uuid4().hex[:12]}"
    try:
        yield Database(POSTGRES_URL, schema)
    finally:
        await drop_schema(schema)


SQL_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=SQL_KINDS)
async def database(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Database]:
    """A fresh SQLite file or PostgreSQL schema; tests open and close their stores."""
    async for db in _database(request.param, tmp_path):
        yield db


@pytest.fixture(params=["memory", "sqlite-memory", *SQL_KINDS])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Store]:
    """An open store of every kind, closed after the test."""
    kind: str = request.param
    if kind in ("memory", "sqlite-memory"):
        opened: Store = MemoryStore() if kind == "memory" else SQLStore("sqlite://")
        await opened.open()
        try:
            yield opened
        finally:
            await opened.close()
        return
    async for db in _database(kind, tmp_path):
        async with db.store() as sql_store:
            yield sql_store


def make_audit(**fields: Any) -> AuditRecord:
    values: dict[str, Any] = {
        "call_id": "call-1",
        "phase": "final",
        "at": datetime.now(UTC),
        "trace_id": "trace-1",
        "tool": "weather_get",
    }
    values.update(fields)
    return AuditRecord(**values)


@pytest.fixture
def audit() -> Callable[..., AuditRecord]:
    """Build an audit record from just the fields a test is about."""
    return make_audit
