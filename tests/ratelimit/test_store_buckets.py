"""The store's buckets: all or none, and not worth a WAL flush on PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from callgate.store import SQLStore
from callgate.store.engine import create_engine
from callgate.store.sql_rates import RateBucket, RateRecords, RateTaken
from tests.pg import POSTGRES_URL, drop_schema

pytestmark = pytest.mark.anyio

MINUTE = 60_000_000
NOW = 1_800_000_000_000_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLStore]:
    if request.param == "sqlite":
        async with SQLStore(f"sqlite:///{tmp_path / 'rates.db'}") as sqlite:
            yield sqlite
        return
    schema = f"test_rl_{uuid.uuid4().hex[:12]}"
    try:
        async with SQLStore(POSTGRES_URL, schema=schema) as pg:
            yield pg
    finally:
        await drop_schema(schema)


async def test_a_call_takes_every_bucket_or_none(store: SQLStore) -> None:
    assert isinstance(store, RateRecords)
    wide = RateBucket("k:wide", MINUTE // 3, MINUTE)  # 3/minute
    narrow = RateBucket("k:narrow", MINUTE, MINUTE)  # 1/minute

    assert await store.take_rates([wide, narrow], now_us=NOW) == RateTaken(None, 0)
    refused = await store.take_rates([wide, narrow], now_us=NOW)
    # narrow has no room for a minute; wide was not charged for the refused call.
    assert refused == RateTaken(1, MINUTE)
    assert await store.take_rates([wide], now_us=NOW) == RateTaken(None, 0)
    assert await store.take_rates([wide], now_us=NOW) == RateTaken(None, 0)
    assert await store.take_rates([wide], now_us=NOW) == RateTaken(0, MINUTE // 3)
    assert await store.take_rates([wide, narrow], now_us=NOW + MINUTE) == RateTaken(None, 0)


@pytest.mark.postgres
async def test_the_postgresql_table_writes_no_wal() -> None:
    schema = f"test_rl_{uuid.uuid4().hex[:12]}"
    try:
        async with SQLStore(POSTGRES_URL, schema=schema):
            pass
        engine = create_engine(POSTGRES_URL, schema=schema)
        async with engine.connect() as conn:
            persistence = await conn.scalar(
                text(
                    "SELECT relpersistence::text FROM pg_class WHERE oid = 'rate_limits'::regclass"
                )
            )
        await engine.dispose()
    finally:
        await drop_schema(schema)
    assert persistence == "u"
