"""Migration 0009: idempotency scopes written before it keep their owner."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from alembic import command
from sqlalchemy import Connection, insert, select

from callgate import Gate, Principal, Toolbox
from callgate.runtime.call import hash_json
from callgate.runtime.idempotency import scope_for
from callgate.store.engine import create_engine
from callgate.store.tables import audit, idempotency

from .test_store_migrations import alembic_config

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

NOW = datetime.now(UTC)
ARGS = {"amount": 5}


def _claim(scope: str, call_id: str) -> dict[str, object]:
    return {
        "scope": scope,
        "args_hash": hash_json(ARGS),
        "call_id": call_id,
        "state": "done",
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
        "envelope": {
            "tool": "t.pay",
            "call_id": call_id,
            "trace_id": "t",
            "status": "ok",
            "payload": {"paid_by": call_id},
            "timing": {"started_at": NOW.isoformat(), "duration_ms": 1.0, "attempts": 1},
        },
    }


def _audited(call_id: str, tenant: str | None) -> dict[str, object]:
    return {
        "call_id": call_id,
        "phase": "final",
        "at": NOW,
        "trace_id": "t",
        "tool": "t.pay",
        "tenant": tenant,
        "attempts": 1,
        "dropped_fields": [],
        "detail": {},
    }


def _seed_at_0008(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "0008")
    connection.execute(
        insert(idempotency),
        [
            _claim("-/t.pay/k", "call_tenantless"),  # no tenant, audited
            _claim("a/b/t.pay/k", "call_slash"),  # tenant "a/b", audited
            _claim("-/t.pay/running", "call_unaudited"),  # no audit record yet
        ],
    )
    connection.execute(
        insert(audit), [_audited("call_tenantless", None), _audited("call_slash", "a/b")]
    )


async def test_old_scopes_are_rewritten_to_their_audited_owner(database: Database) -> None:
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.begin() as conn:
            if database.schema:
                await conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {database.schema}")
            await conn.run_sync(_seed_at_0008)
    finally:
        await engine.dispose()

    paid: list[str] = []
    box = Toolbox("t")

    @box.tool(idempotent=False)
    def pay(amount: int) -> dict[str, str]:
        """Pay."""
        paid.append("ran")
        return {"paid_by": "this call"}

    async with database.store() as store:  # opening migrates to head
        engine = create_engine(database.url, schema=database.schema)
        try:
            async with engine.connect() as conn:
                scopes = set((await conn.execute(select(idempotency.c.scope))).scalars())
        finally:
            await engine.dispose()
        assert scopes == {
            scope_for(None, "t.pay", "k"),
            scope_for("a/b", "t.pay", "k"),
            scope_for(None, "t.pay", "running"),
        }
        async with Gate([box], store=store) as gate:
            tenantless = await gate.call(
                "t.pay", ARGS, principal=Principal(user="u"), idempotency_key="k"
            )
            dash = await gate.call(
                "t.pay", ARGS, principal=Principal(user="v", tenant="-"), idempotency_key="k"
            )
    # The tenantless caller's key still replays its answer: nothing runs twice...
    assert tenantless.replayed and tenantless.payload == {"paid_by": "call_tenantless"}
    # ...and tenant "-" no longer gets it: its own call ran.
    assert not dash.replayed and dash.payload == {"paid_by": "this call"}
    assert paid == ["ran"]
