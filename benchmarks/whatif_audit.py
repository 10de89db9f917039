"""What-if: other ways to write the audit batch, against the store as it is.

    python benchmarks/whatif_audit.py [--calls 2000] [--no-postgres]

The audit append is the one write on every governed call's path, and the largest
part of a call's cost (``profile_chain.py``). This script measures, side by side
in one run, the full ``gate.call`` of the async tool with the store's own
``SQLStore.append_audit`` and with the same transaction written another way:

- SQLite: the stdlib ``sqlite3`` driver (prepared INSERT, ``executemany``) in one
  call on a dedicated writer thread; the same on the event loop's own thread
  (no hop: the floor). Same pragmas (WAL, ``synchronous=NORMAL``, busy timeout)
  and ``BEGIN IMMEDIATE`` as the store, rows in the format SQLAlchemy writes
  (UTC text times, JSON text).
- PostgreSQL: asyncpg directly, one transaction with the store's advisory lock
  and a prepared INSERT; and the same without the lock.

Every variant writes the table the store's migrations created, and its rows are
read back through ``gate.audit()``. Only the store instance's ``append_audit`` is
replaced, in this process; callgate's code is unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC
from typing import Any

from _harness import POSTGRES_URL, TOOLS, governed, machine, open_gates, postgres_unreachable
from sqlalchemy import create_engine, event, insert
from sqlalchemy.pool import NullPool

from callgate import Gate
from callgate.store import AuditRecord
from callgate.store.tables import audit

TOOL = TOOLS["async"][0]
clock = time.perf_counter_ns
BLOCK = 20
WARMUP_ROUNDS = 10

AUDIT_COLUMNS = [c.name for c in audit.columns if c.name != "seq"]
_QUOTED = ", ".join(f'"{c}"' for c in AUDIT_COLUMNS)  # "user" is an SQL keyword
SQLITE_INSERT = f"INSERT INTO audit ({_QUOTED}) VALUES ({', '.join('?' * len(AUDIT_COLUMNS))})"
PG_INSERT = (
    f"INSERT INTO audit ({_QUOTED}) "
    f"VALUES ({', '.join(f'${i}' for i in range(1, len(AUDIT_COLUMNS) + 1))})"
)


def row_values(record: AuditRecord, *, sqlite: bool) -> tuple[Any, ...]:
    """One row as SQLAlchemy stores it: JSON text; on SQLite, UTC text times."""
    values = []
    for name in AUDIT_COLUMNS:
        value = getattr(record, name)
        if name == "at" and sqlite:
            value = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        elif name == "dropped_fields":
            value = json.dumps(list(value))
        elif name == "detail":
            value = json.dumps(value)
        values.append(value)
    return tuple(values)


class Sqlite3Writer:
    """``append_audit`` with the stdlib driver: prepared INSERT, ``executemany``.

    By default one call per batch on a dedicated writer thread; ``inline`` runs
    it on the event loop's own thread instead (no hop; the loop is blocked for
    the transaction, a WAL append without fsync).
    """

    def __init__(self, path: str, *, inline: bool) -> None:
        self.inline = inline
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-writer")
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("busy_timeout=5000", "journal_mode=WAL", "synchronous=NORMAL"):
            self.conn.execute(f"PRAGMA {pragma}")

    def write(self, records: Sequence[AuditRecord]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany(SQLITE_INSERT, [row_values(r, sqlite=True) for r in records])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        if self.inline:
            self.write(records)
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self.write, list(records))

    async def aclose(self) -> None:
        self.executor.shutdown()
        self.conn.close()


class AsyncpgWriter:
    """``append_audit`` on one asyncpg connection: one transaction, prepared INSERT.

    The GroupCommitter has a single writer task per gate, so one connection is
    enough. With ``lock``, the transaction takes the store's advisory lock first
    (the same key), which keeps ``seq`` order equal to commit order.
    """

    def __init__(self, conn: Any, statement: Any, lock_key: int | None) -> None:
        self.conn = conn
        self.statement = statement
        self.lock_key = lock_key

    @classmethod
    async def connect(cls, schema: str, *, lock: bool) -> AsyncpgWriter:
        import asyncpg  # type: ignore[import-not-found]

        conn = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
        statement = await conn.prepare(PG_INSERT)
        name = f"callgate.audit/{schema}"  # the key SQLStore uses for its audit lock
        key = int.from_bytes(
            hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
        )
        return cls(conn, statement, key if lock else None)

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        async with self.conn.transaction():
            if self.lock_key is not None:
                await self.conn.execute("SELECT pg_advisory_xact_lock($1)", self.lock_key)
            await self.statement.executemany([row_values(r, sqlite=False) for r in records])

    async def aclose(self) -> None:
        await self.conn.close()


async def compare(gates: dict[str, Gate], calls: int) -> list[str]:
    """Time ``calls`` governed calls per gate (interleaved blocks); one table row each."""
    samples: dict[str, list[int]] = {label: [] for label in gates}
    for r in range(WARMUP_ROUNDS + calls // BLOCK):
        order = list(gates.items())
        order = order[r % len(order) :] + order[: r % len(order)]
        for label, gate in order:
            for i in range(BLOCK):
                t0 = clock()
                await governed(gate, TOOL, r * BLOCK + i)
                if r >= WARMUP_ROUNDS:
                    samples[label].append(clock() - t0)
    rows = [
        "| audit write | median µs | p90 µs | rows read back by gate.audit() |",
        "|---|---:|---:|---:|",
    ]
    for label, gate in gates.items():
        records = await gate.audit()
        if records[-1].tool != TOOL or records[-1].status != "ok":
            raise RuntimeError(f"{label}: audit rows do not read back: {records[-1]!r}")
        data = sorted(samples[label])
        p90 = data[int(0.9 * len(data)) - 1]
        rows.append(
            f"| {label} | {statistics.median(data) / 1000:,.1f} | {p90 / 1000:,.1f} | "
            f"{len(records):,} |"
        )
    return rows


async def sqlite_view(calls: int) -> list[str]:
    variants = {
        "SQLStore.append_audit as it is in this checkout": None,
        "what-if: stdlib sqlite3 executemany, one thread hop": False,
        "what-if: stdlib sqlite3 executemany on the loop thread, no hop": True,
    }
    async with contextlib.AsyncExitStack() as stack:
        gates: dict[str, Gate] = {}
        path = ""
        for label, inline in variants.items():
            subject = (await stack.enter_async_context(open_gates(["sqlite"])))["sqlite"]
            if inline is not None:
                writer = Sqlite3Writer(subject.where, inline=inline)
                stack.push_async_callback(writer.aclose)
                subject.gate.store.append_audit = writer.append_audit  # type: ignore[method-assign]
                path = subject.where
            gates[label] = subject.gate
        rows = await compare(gates, calls)
        sample = replace((await next(iter(gates.values())).audit(tail=1))[0], seq=0)
        parts = transaction_alone(path, sample)
        parts.append(("a hop to a single-thread executor and back (no-op)", await hop_us()))
    return [
        f"### SQLite (WAL file): full gate.call of the async tool, {calls:,} calls each, "
        f"in interleaved blocks of {BLOCK}",
        "",
        *rows,
        "",
        "The parts, timed alone (median of 2,000; one record per transaction):",
        "",
        "| part | µs |",
        "|---|---:|",
        *(f"| {label} | {us:,.1f} |" for label, us in parts),
    ]


async def postgres_view(calls: int) -> list[str]:
    variants = {
        "SQLStore.append_audit as it is in this checkout": None,
        "what-if: asyncpg, one transaction: advisory lock + prepared INSERT": True,
        "what-if: asyncpg, one transaction: prepared INSERT, no lock": False,
    }
    async with contextlib.AsyncExitStack() as stack:
        gates: dict[str, Gate] = {}
        for label, lock in variants.items():
            subject = (await stack.enter_async_context(open_gates(["postgres"])))["postgres"]
            if lock is not None:
                writer = await AsyncpgWriter.connect(subject.where, lock=lock)
                stack.push_async_callback(writer.aclose)
                subject.gate.store.append_audit = writer.append_audit  # type: ignore[method-assign]
            gates[label] = subject.gate
        rows = await compare(gates, calls)
    return [
        f"### PostgreSQL: full gate.call of the async tool, {calls:,} calls each, "
        f"in interleaved blocks of {BLOCK}",
        "",
        *rows,
    ]


def _median_us(fn: Callable[[], object], n: int = 2000) -> float:
    samples = []
    for _ in range(n):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return statistics.median(samples) / 1000


def transaction_alone(path: str, record: AuditRecord) -> list[tuple[str, float]]:
    """One audit transaction on the calling thread: SQLAlchemy Core vs stdlib sqlite3."""
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        for pragma in ("busy_timeout=5000", "journal_mode=WAL", "synchronous=NORMAL"):
            dbapi_connection.execute(f"PRAGMA {pragma}")

    statement = insert(audit)
    row = {name: getattr(record, name) for name in AUDIT_COLUMNS}
    row["dropped_fields"] = list(record.dropped_fields)
    writer = Sqlite3Writer(path, inline=True)
    try:
        with engine.connect() as conn:

            def core() -> None:
                # What callgate's SQLiteAuditWriter does per batch, in its thread.
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                conn.execute(statement, [row])
                conn.exec_driver_sql("COMMIT")

            core_us = _median_us(core)
        raw_us = _median_us(lambda: writer.write([record]))
        encode_us = _median_us(lambda: row_values(record, sqlite=True), n=20000)
    finally:
        writer.conn.close()
        writer.executor.shutdown()
        engine.dispose()
    return [
        ("SQLAlchemy Core: BEGIN IMMEDIATE, execute(insert(audit), rows), COMMIT", core_us),
        ("stdlib sqlite3: BEGIN IMMEDIATE, executemany, COMMIT (with encoding)", raw_us),
        ("    of which encoding the row (JSON, UTC text time)", encode_us),
    ]


async def hop_us() -> float:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1) as executor:
        samples = []
        for _ in range(2000):
            t0 = clock()
            await loop.run_in_executor(executor, int)
            samples.append(clock() - t0)
    return statistics.median(samples) / 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per variant")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args()
    print(f"## What-if: the audit write ({machine()})\n")
    print("\n".join(await sqlite_view(args.calls)))
    skipped = "--no-postgres given" if args.no_postgres else await postgres_unreachable()
    if skipped is None:
        print()
        print("\n".join(await postgres_view(args.calls // 2)))
    else:
        print(f"\nPostgreSQL skipped: {skipped}.")


if __name__ == "__main__":
    asyncio.run(main())
