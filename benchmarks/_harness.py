"""Shared pieces of the chain benchmarks: the trivial tools, the stores, the counters.

Not a benchmark itself; ``chain_overhead.py`` and ``profile_chain.py`` import it
(run them as scripts, so this directory is on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from callgate import Gate, Principal, Toolbox
from callgate.store import AuditRecord, MemoryStore, SQLStore, Store
from callgate.store.sql import create_engine

POSTGRES_URL = os.environ.get(
    "CALLGATE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

box = Toolbox("bench", description="Trivial tools for measuring the chain's own cost.")


@box.tool(read_only=True, open_world=False)
async def echo(x: int) -> int:
    """Return x unchanged."""
    return x


@box.tool(read_only=True, open_world=False)
def echo_sync(x: int) -> int:
    """Return x unchanged (a synchronous function: the gate runs it in a worker thread)."""
    return x


TOOLS = {"async": ("bench.echo", echo), "sync": ("bench.echo_sync", echo_sync)}
PRINCIPAL = Principal(user="bench", tenant="bench-tenant")


@dataclass
class CommitCounter:
    """How many audit transactions (``append_audit`` calls) wrote how many records."""

    commits: int = 0
    records: int = 0

    def reset(self) -> None:
        self.commits = self.records = 0


def count_commits(store: Store) -> CommitCounter:
    """Wrap ``store.append_audit`` (and ``append_audit_now``), on the instance, to count
    transactions and records."""
    counter = CommitCounter()
    inner = store.append_audit

    async def append_audit(records: Sequence[AuditRecord]) -> None:
        counter.commits += 1
        counter.records += len(records)
        await inner(records)

    store.append_audit = append_audit  # type: ignore[method-assign]
    now = getattr(store, "append_audit_now", None)
    if now is not None:  # a lone call's commit in its own task

        def append_audit_now(records: Sequence[AuditRecord]) -> bool:
            written = bool(now(records))
            if written:
                counter.commits += 1
                counter.records += len(records)
            return written

        store.append_audit_now = append_audit_now  # type: ignore[attr-defined]
    return counter


async def postgres_unreachable(url: str = POSTGRES_URL) -> str | None:
    """None if PostgreSQL answers at ``url``, else why it is skipped."""
    try:
        import asyncpg  # type: ignore[import-not-found]
    except ImportError:
        return "asyncpg is not installed (pip install 'callgate[postgres]')"
    try:
        conn = await asyncpg.connect(url, timeout=3)
    except Exception as exc:
        return f"PostgreSQL at {url} is not reachable ({type(exc).__name__}: {exc})"
    await conn.close()
    return None


@contextlib.asynccontextmanager
async def bench_store(kind: str, workdir: Path) -> AsyncIterator[tuple[Store, str]]:
    """An unopened store of ``kind`` (memory, sqlite, postgres), and where it lives.

    SQLite is a WAL file (``synchronous=NORMAL``, callgate's default) in
    ``workdir`` (its path is returned); PostgreSQL gets a throwaway schema (its
    name is returned), dropped on exit.
    """
    if kind == "memory":
        yield MemoryStore(), ""
    elif kind == "sqlite":
        path = workdir / "bench.db"
        yield SQLStore(f"sqlite:///{path}"), str(path)
    elif kind == "postgres":
        schema = f"callgate_bench_{uuid.uuid4().hex[:12]}"
        try:
            yield SQLStore(POSTGRES_URL, schema=schema), schema
        finally:
            engine = create_engine(POSTGRES_URL)
            try:
                async with engine.begin() as conn:
                    await conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            finally:
                await engine.dispose()
    else:
        raise ValueError(f"unknown store kind {kind!r}")


@dataclass
class Subject:
    """One gate under test, with its store's commit counter."""

    kind: str
    gate: Gate
    counter: CommitCounter
    where: str
    """The SQLite file's path, the PostgreSQL schema's name, or empty."""


@contextlib.asynccontextmanager
async def open_gates(kinds: Sequence[str]) -> AsyncIterator[dict[str, Subject]]:
    """Open one Gate per store kind (all on this event loop); close and clean up after."""
    with tempfile.TemporaryDirectory(prefix="callgate-bench-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            subjects: dict[str, Subject] = {}
            for kind in kinds:
                store, where = await stack.enter_async_context(bench_store(kind, Path(tmp)))
                counter = count_commits(store)
                gate = await stack.enter_async_context(Gate([box], store=store))
                subjects[kind] = Subject(kind=kind, gate=gate, counter=counter, where=where)
            yield subjects


async def governed(gate: Gate, tool: str, x: int, *, session_id: str | None = None) -> None:
    """One governed call; fails loudly if the chain did not return the tool's result."""
    envelope = await gate.call(tool, {"x": x}, principal=PRINCIPAL, session_id=session_id)
    if not envelope.ok or envelope.payload != x:
        raise RuntimeError(f"unexpected envelope from {tool}: {envelope!r}")


def machine() -> str:
    """The facts a reader needs to compare figures (call inside the event loop)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    loop = type(asyncio.get_running_loop()).__name__
    return (
        f"{platform.machine()}, nproc {cores}, Python {sys.version.split()[0]} "
        f"({platform.python_implementation()}), {loop}, {load()}"
    )


def load() -> str:
    """The load average: other work on the machine skews absolute figures (not ratios)."""
    if not hasattr(os, "getloadavg"):
        return "load average unknown"
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: frozenset[int] = frozenset()
) -> str:
    """A Markdown table, padded to read well in a terminal too."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if i in numeric else "-" * w for i, w in enumerate(widths)]
    return "\n".join([line(headers), line(rule), *(line(r) for r in rows)])
