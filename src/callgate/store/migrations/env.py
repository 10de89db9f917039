"""Alembic environment for callgate's store.

``SQLStore.open()`` runs the migrations on its own connection, inside its own
transaction, handed over in ``config.attributes["connection"]``. Run by the
``alembic`` command instead (e.g. ``revision --autogenerate``), the database is
``sqlalchemy.url`` from the Alembic config.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection

from callgate.store.tables import UTCDateTime, metadata


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # Generated migrations must not import callgate: they are frozen history.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_item=_render_item,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_standalone(url: str) -> None:
    from callgate.store.engine import create_engine

    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def _main() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url in the Alembic config")
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
    else:
        asyncio.run(_run_standalone(url))


_main()
