"""A store that fails mid-call: the caller gets an Envelope, the audit gets the record later."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import anyio
import asyncpg
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import ErrorKind, Gate, Principal, Status, Toolbox
from callgate.mcp import build_server
from callgate.store import SQLStore
from tests.pg import POSTGRES_URL, drop_schema

from .outage import DRIVER_WORDS, Effects, OutageStore, build

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"r", "w"})


def _no_driver_text(text: str) -> bool:
    return not any(word in text for word in DRIVER_WORDS)


def _outage() -> tuple[Effects, OutageStore]:
    store = OutageStore()
    return Effects(store=store), store


async def test_a_write_whose_outcome_cannot_be_recorded_answers_unknown_outcome() -> None:
    effects, store = _outage()
    async with Gate([build(effects)], store=store) as gate:
        with anyio.fail_after(10):
            env = await gate.call("o.pay", {"amount": 5}, principal=ALICE)
        assert env.status is Status.ERROR and env.error is not None
        assert env.error.kind is ErrorKind.UNKNOWN_OUTCOME and not env.error.retryable
        assert env.payload is None
        assert "may have been made" in env.error.message_for_model
        assert _no_driver_text(env.model_dump_json())
        assert effects.paid == [5]

        store.down = False
        assert await gate.reconcile() == 0  # the store is back: nothing left waiting
        records = await gate.audit(call_id=env.call_id)
    # The audit holds what happened, and what the caller was told.
    assert [(r.phase, r.outcome) for r in records] == [("intent", None), ("final", "ok")]
    assert records[1].detail["answered"] == "unknown_outcome"
    assert "OperationalError" in records[1].detail["store_error"]


async def test_a_read_whose_record_fails_is_transient_and_shows_nothing() -> None:
    effects, store = _outage()
    async with Gate([build(effects)], store=store) as gate:
        with anyio.fail_after(10):
            env = await gate.call("o.balance", {}, principal=ALICE)
        store.down = False
        await gate.reconcile()
        records = await gate.audit(call_id=env.call_id)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.error.retryable and env.payload is None
    assert _no_driver_text(env.model_dump_json())
    assert [(r.phase, r.outcome) for r in records] == [("final", "ok")]


async def test_a_store_failure_before_the_tool_ran_runs_nothing() -> None:
    effects, store = _outage()
    effects.store = None  # the tool does not take it down: it is down from the start
    async with Gate([build(effects)], store=store) as gate:
        store.down = True
        with anyio.fail_after(10):
            env = await gate.call("o.pay", {"amount": 5}, principal=ALICE)
        assert effects.paid == []
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        assert env.error.retryable and "nothing was changed" in env.error.message_for_model
        assert _no_driver_text(env.model_dump_json())
        # Only the intent record was tried: the final one waited instead of failing again.
        assert store.refused in (["append_audit"], ["append_audit_now"])
        store.down = False
        await gate.reconcile()
        records = await gate.audit(call_id=env.call_id)
    assert [(r.phase, r.outcome) for r in records] == [("final", "transient")]


async def test_a_retry_with_the_key_never_runs_the_tool_again() -> None:
    effects, store = _outage()
    async with Gate([build(effects)], store=store) as gate:
        with anyio.fail_after(10):
            first = await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
        assert first.error is not None and first.error.kind is ErrorKind.UNKNOWN_OUTCOME
        effects.store = None
        store.down = False
        # Not reconciled by hand: the retry waits for the background writer to
        # complete the key, then gets the first call's answer.
        with anyio.fail_after(10):
            again = await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
    assert effects.paid == [5]
    assert again.replayed and again.call_id == first.call_id
    assert again.error == first.error


async def test_close_gives_kept_records_a_last_try() -> None:
    effects, store = _outage()
    gate = Gate([build(effects)], store=store)
    async with gate:
        with anyio.fail_after(10):
            env = await gate.call("o.pay", {"amount": 5}, principal=ALICE)
        store.down = False
    # aclose wrote it (the MemoryStore keeps its data after close).
    finals = [r for r in await store.list_audit(call_id=env.call_id) if r.phase == "final"]
    assert [r.outcome for r in finals] == ["ok"]


async def test_an_mcp_client_gets_a_tool_result_not_a_protocol_error() -> None:
    effects, store = _outage()
    async with Gate([build(effects)], store=store) as gate:
        server = build_server(gate, principal=ALICE)
        for mode in ("legacy", "2026-07-28"):
            store.down = False
            with anyio.fail_after(10):
                async with Client(server, mode=mode) as client:
                    result = await client.call_tool("o__pay", {"amount": 5})
            assert isinstance(result, types.CallToolResult) and result.is_error
            text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
            assert "unknown_outcome" in text or "may have been made" in text
            assert _no_driver_text(text)
        store.down = False
        await gate.reconcile()
    assert effects.paid == [5, 5]


def _lock(path: Path) -> sqlite3.Connection:
    """Another connection holding SQLite's write lock (a long transaction elsewhere)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


async def test_a_locked_sqlite_database_after_the_tool_ran(tmp_path: Path) -> None:
    path = tmp_path / "gate.db"
    effects = Effects(release=anyio.Event())
    store = SQLStore(f"sqlite:///{path}", busy_timeout=0.2)
    async with Gate([build(effects)], store=store) as gate:
        answers = []

        async def pay() -> None:
            answers.append(
                await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(pay)
                await effects.started.wait()
                lock = _lock(path)  # taken while the tool runs
                assert effects.release is not None
                effects.release.set()
            env = answers[0]
            assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
            assert _no_driver_text(env.model_dump_json())
            # Still locked: the same key neither runs again nor gets driver text.
            again = await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
            assert again.error is not None and _no_driver_text(again.model_dump_json())
            lock.rollback()
            lock.close()
            assert await gate.reconcile() == 0
            replay = await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
        records = await gate.audit(call_id=env.call_id)
    assert effects.paid == [5]
    assert replay.replayed and replay.call_id == env.call_id
    assert [(r.phase, r.outcome) for r in records] == [("intent", None), ("final", "ok")]


async def test_a_large_result_a_locked_database_cannot_keep(tmp_path: Path) -> None:
    """A result over the size limit is kept in the store for reading on; when the
    database is locked (issue 10: 'database is locked' under 1 MB results), the
    read answers transient with nothing shown, and its record is written once
    the lock is gone, saying what the caller was told."""
    path = tmp_path / "gate.db"
    started, release = anyio.Event(), anyio.Event()
    box = Toolbox("reports")

    @box.tool(read_only=True)
    async def monthly() -> list[str]:
        """The month's rows."""
        started.set()
        await release.wait()
        return [f"row {i} " + "x" * 200 for i in range(500)]

    async with Gate([box], store=SQLStore(f"sqlite:///{path}", busy_timeout=0.2)) as gate:
        answers = []

        async def read() -> None:
            answers.append(await gate.call("reports.monthly", {}, principal=ALICE))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await started.wait()
                lock = _lock(path)
                release.set()
            env = answers[0]
            lock.rollback()
            lock.close()
            assert await gate.reconcile() == 0
            again = await gate.call("reports.monthly", {}, principal=ALICE)
        records = await gate.audit(call_id=env.call_id)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.payload is None and env.raw_ref is None
    assert _no_driver_text(env.model_dump_json())
    assert again.status is Status.OK and again.truncated is not None
    assert [(r.phase, r.outcome) for r in records] == [("final", "transient")]
    assert records[0].detail["answered"] == "transient"


@pytest.mark.postgres
async def test_terminated_postgresql_connections_after_the_tool_ran() -> None:
    schema = f"test_outage_{uuid.uuid4().hex[:12]}"
    effects = Effects(release=anyio.Event())
    try:
        async with Gate([build(effects)], store=SQLStore(POSTGRES_URL, schema=schema)) as gate:
            await gate.call("o.balance", {}, principal=ALICE)  # the pool has connections
            answers = []

            async def pay() -> None:
                answers.append(
                    await gate.call("o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
                )

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(pay)
                    await effects.started.wait()
                    killer = await asyncpg.connect(POSTGRES_URL)
                    try:
                        killed = await killer.fetchval(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE application_name = $1",
                            f"callgate/{schema}",
                        )
                    finally:
                        await killer.close()
                    assert killed >= 1
                    assert effects.release is not None
                    effects.release.set()
                env = answers[0]
                await gate.reconcile()
                replay = await gate.call(
                    "o.pay", {"amount": 5}, principal=ALICE, idempotency_key="k"
                )
            records = await gate.audit(call_id=env.call_id)
    finally:
        await drop_schema(schema)
    assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert _no_driver_text(env.model_dump_json())
    assert effects.paid == [5]
    assert replay.replayed and replay.call_id == env.call_id
    assert [(r.phase, r.outcome) for r in records] == [("intent", None), ("final", "ok")]


async def test_a_resource_read_while_the_store_is_down_says_try_again() -> None:
    store = OutageStore()
    box = Toolbox("o")

    @box.resource("notes://today")
    def today() -> str:
        """Today's notes."""
        return "nothing new"

    async with Gate([box], store=store) as gate:
        server = build_server(gate, principal=ALICE)
        store.down = True
        with anyio.fail_after(10):
            async with Client(server, mode="legacy") as client:
                with pytest.raises(MCPError) as refused:
                    await client.read_resource("notes://today")
        store.down = False
        assert await gate.reconcile() == 0
        records = await gate.audit()
    assert "Try again in a moment" in refused.value.error.message
    assert _no_driver_text(refused.value.error.message)
    # Nothing lost: the read's record was kept and written once the store answered.
    assert [(r.tool, r.outcome) for r in records] == [("resource:notes://today", "ok")]
