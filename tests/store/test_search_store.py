"""What tool search keeps in the store: embedding vectors by model and digest, and
each tool's calls and failures from the audit; on every store kind."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import pytest
from alembic import command
from sqlalchemy import Connection, insert, inspect, select

from callgate import Gate, Principal, Toolbox
from callgate.errors import ConstructionError
from callgate.store import AuditRecord, Store
from callgate.store.engine import create_engine
from callgate.store.tables import audit as audit_table
from callgate.store.tables import search_vectors

from .test_store_migrations import alembic_config

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

Audit = Callable[..., AuditRecord]

# Not on a whole second: a SQLite file's audit writer stores such a time as
# "12:00:00+00:00", which sorts before the bound "12:00:00.000000" (count_outcomes
# and tool_usage then miss a record at exactly `since`).
NOW = datetime(2026, 12, 4, 12, 0, 0, 250_000, tzinfo=UTC)
MODEL = "BAAI/bge-small-en-v1.5"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def vector(*values: float) -> bytes:
    return array("f", values).tobytes()


def floats(packed: bytes) -> list[float]:
    return array("f", packed).tolist()


# vectors ---------------------------------------------------------------------


async def test_vectors_round_trip_and_missing_digests_are_left_out(store: Store) -> None:
    kept = {digest("weather.get"): vector(0.25, -1.5, 3.0), digest("mail.send"): vector(1.0)}
    await store.put_vectors(MODEL, kept)

    got = await store.get_vectors(MODEL, [*kept, digest("never embedded")])

    assert got == kept
    assert floats(got[digest("weather.get")]) == [0.25, -1.5, 3.0]
    assert await store.get_vectors(MODEL, [digest("never embedded")]) == {}
    assert await store.get_vectors(MODEL, []) == {}


async def test_a_put_replaces_and_putting_again_changes_nothing(store: Store) -> None:
    key = digest("weather.get")
    await store.put_vectors(MODEL, {key: vector(1.0, 2.0)})
    await store.put_vectors(MODEL, {key: vector(3.0, 4.0), digest("b"): vector(5.0)})
    await store.put_vectors(MODEL, {key: vector(3.0, 4.0), digest("b"): vector(5.0)})
    await store.put_vectors(MODEL, {})

    got = await store.get_vectors(MODEL, [key, key, digest("b")])

    assert got == {key: vector(3.0, 4.0), digest("b"): vector(5.0)}


async def test_models_keep_their_own_vectors(store: Store) -> None:
    key = digest("weather.get")
    await store.put_vectors(MODEL, {key: vector(1.0)})
    await store.put_vectors("other-model", {key: vector(2.0), digest("x"): vector(3.0)})

    assert await store.get_vectors(MODEL, [key, digest("x")]) == {key: vector(1.0)}
    assert await store.get_vectors("other-model", [key]) == {key: vector(2.0)}
    assert await store.get_vectors("unknown-model", [key]) == {}


async def test_ten_thousand_vectors_go_in_and_come_out_in_one_call_each(store: Store) -> None:
    kept = {digest(f"tool {i}"): vector(float(i), *[0.5] * 63) for i in range(10_000)}
    await store.put_vectors(MODEL, kept)
    # More digests than asyncpg takes bound variables in one statement (32,767);
    # SQLite builds take from 999 to 250,000.
    asked = [*kept, *(digest(f"unknown {i}") for i in range(25_000))]

    got = await store.get_vectors(MODEL, asked)

    assert got == kept
    assert floats(got[digest("tool 9999")])[0] == 9999.0


async def test_vectors_survive_closing_and_opening_the_database(database: Database) -> None:
    kept = {digest(f"tool {i}"): vector(float(i)) for i in range(3)}
    async with database.store() as store:
        await store.put_vectors(MODEL, kept)

    async with database.store() as store:
        assert await store.get_vectors(MODEL, list(kept)) == kept


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def _seed_at_0013(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "0013")
    connection.execute(
        insert(audit_table),
        [
            {
                "call_id": "c1",
                "phase": "final",
                "at": NOW,
                "trace_id": "t",
                "tool": "t.ping",
                "status": "ok",
                "attempts": 1,
                "dropped_fields": [],
                "detail": {},
            }
        ],
    )


async def test_a_database_at_0013_is_upgraded_and_keeps_its_audit(database: Database) -> None:
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.begin() as conn:
            if database.schema:
                await conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {database.schema}")
            await conn.run_sync(_seed_at_0013)
            assert "search_vectors" not in await conn.run_sync(_tables)
    finally:
        await engine.dispose()

    async with database.store() as store:  # opening migrates to head
        await store.put_vectors(MODEL, {digest("t.ping"): vector(1.0)})
        assert await store.get_vectors(MODEL, [digest("t.ping")]) == {digest("t.ping"): vector(1.0)}
        assert await store.tool_usage(since=NOW) == {"t.ping": (1, 0)}

    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.begin() as conn:
            assert (await conn.execute(select(search_vectors.c.digest))).scalars().all() == [
                digest("t.ping")
            ]
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0013"))
            assert "search_vectors" not in await conn.run_sync(_tables)
            assert "audit" in await conn.run_sync(_tables)
    finally:
        await engine.dispose()


# tool usage --------------------------------------------------------------------


async def test_tool_usage_counts_finished_calls_and_failures_per_tool_since_a_time(
    store: Store, audit: Audit
) -> None:
    since = NOW - timedelta(hours=1)
    await store.append_audit(
        [
            audit(call_id="a1", tool="crm.find", status="ok", at=NOW),
            audit(call_id="a2", tool="crm.find", status="error", outcome="transient", at=NOW),
            audit(call_id="a3", tool="crm.find", status="error", outcome="permission", at=since),
            audit(call_id="a4", tool="crm.find", status="pending_approval", at=NOW),
            audit(call_id="b1", tool="mail.send", status="ok", at=NOW),
            # Older than `since`: left out.
            audit(call_id="o1", tool="mail.send", status="error", at=since - timedelta(seconds=1)),
            audit(call_id="o2", tool="old.tool", status="ok", at=NOW - timedelta(days=2)),
            # Not finished calls: an intent without its final, a late outcome, a decision.
            audit(call_id="u1", tool="mail.send", phase="intent", at=NOW),
            audit(call_id="a2", tool="crm.find", phase="late", outcome="ok", at=NOW),
            audit(call_id="ap1", tool="mail.send", phase="decision", decision="deny", at=NOW),
        ]
    )

    usage = await store.tool_usage(since=since)

    assert usage == {"crm.find": (4, 2), "mail.send": (1, 0)}
    # The same counts as count_outcomes gives one tool at a time.
    for tool, counts in usage.items():
        assert await store.count_outcomes(tool, since=since) == counts
    assert await store.tool_usage(since=NOW + timedelta(seconds=1)) == {}


async def test_tool_usage_takes_since_in_any_time_zone_but_not_naive(
    store: Store, audit: Audit
) -> None:
    await store.append_audit([audit(tool="crm.find", status="ok", at=NOW)])
    paris = NOW.astimezone(ZoneInfo("Europe/Paris"))

    assert await store.tool_usage(since=paris) == {"crm.find": (1, 0)}
    assert await store.tool_usage(since=paris + timedelta(microseconds=1)) == {}
    with pytest.raises(ValueError, match="naive"):
        await store.tool_usage(since=NOW.replace(tzinfo=None))


async def test_tool_usage_counts_what_the_gate_audits(store: Store) -> None:
    box = Toolbox("t")

    @box.tool(read_only=True, open_world=False)
    def flaky(fail: bool = False) -> str:
        """Answer, or fail when asked to."""
        if fail:
            raise ConstructionError("asked to fail")
        return "done"

    async with Gate([box], store=store) as gate:
        since = gate.clock.now() - timedelta(seconds=1)
        for fail in (False, True, True):
            await gate.call("t.flaky", {"fail": fail}, principal=Principal(user="u"))
        await gate.call("t.missing", {}, principal=Principal(user="u"))
        usage = await store.tool_usage(since=since)

    # A name no tool has is audited as a failed call too: callers keep the names
    # they know.
    assert usage == {"t.flaky": (3, 2), "t.missing": (1, 1)}
