"""The PostgreSQL server the suite uses, and throwaway schemas on it."""

from __future__ import annotations

import os

from callgate.store.engine import create_engine

POSTGRES_URL = os.environ.get(
    "CALLGATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


async def drop_schema(schema: str) -> None:
    """Drop a test's schema and everything in it."""
    engine = create_engine(POSTGRES_URL)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await engine.dispose()
