"""The Alembic migrations shipped in the package build exactly ``tables.metadata``."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING, Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect

from callgate.store.engine import MIGRATIONS_HEAD, create_engine
from callgate.store.tables import metadata

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

TABLES = {
    "agent_runs",
    "alembic_version",
    "approvals",
    "audit",
    "console_sessions",
    "handles",
    "idempotency",
    "previews",
    "rate_limits",
    "results",
    "search_vectors",
    "session_taints",
    "tasks",
    "upstream_listings",
}


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", "callgate.store:migrations")
    config.set_main_option("path_separator", "os")
    config.attributes["connection"] = connection
    return config


def test_the_migrations_ship_inside_the_package() -> None:
    migrations = files("callgate.store") / "migrations"

    assert (migrations / "env.py").is_file()
    assert (migrations / "script.py.mako").is_file()
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    # SQLStore.open() skips Alembic when the database is already at this head.
    assert heads == [MIGRATIONS_HEAD]


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_head_matches_the_tables_module(database: Database) -> None:
    async with database.store():
        pass
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == TABLES
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_downgrade_to_base_and_upgrade_again(database: Database) -> None:
    async with database.store():
        pass
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "base"))
            assert await conn.run_sync(_tables) == {"alembic_version"}
            await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "head"))
            assert await conn.run_sync(_tables) == TABLES
    finally:
        await engine.dispose()
