"""What the audit's indexes cost a write: ``store.append_audit`` on a store with
every index the migrations make, side by side with the same store without the
four of migration 0016 (``status``, ``risk`` and ``phase``, each with ``seq``;
``tenant, at, seq``).

    python benchmarks/audit_indexes.py [--records 200000] [--store sqlite|postgres|both]
                                       [--rounds 40] [--block 10]

Both stores of a kind are migrated, filled with the same synthetic audit
(``_console_data.py``, so the B-trees have a realistic depth), and one loses the
four indexes. Then, round after round and in alternating order, each gets
``--block`` appends of one record (a call's ``final`` record, as a lone call
writes it) and ``--block`` appends of 50 (a batch, as concurrent calls share a
commit); each append is timed alone. The ratio with / without is what a write
pays for the filters; compare it, not the absolute figures, across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from _console_data import load_postgres, load_sqlite, make_world
from _harness import POSTGRES_URL, bench_store, machine, postgres_unreachable, table

from callgate.store import AuditRecord, SQLStore

DROPPED = (
    "ix_audit_status_seq",
    "ix_audit_risk_seq",
    "ix_audit_phase_seq",
    "ix_audit_tenant_at_seq",
)
BATCH = 50
STATUSES = ("ok", "ok", "ok", "error", "pending_approval")
RISKS = ("read", "write_low_risk", "write_high_risk")
PHASES = ("final", "final", "intent", "decision")


def records(n: int, start: int) -> list[AuditRecord]:
    now = datetime.now(UTC)
    return [
        AuditRecord(
            call_id=f"bench-{start + i}",
            phase=PHASES[(start + i) % len(PHASES)],
            at=now,
            trace_id=f"trace-{(start + i) // 3}",
            tool=f"ads_tool_{(start + i) % 200:03d}",
            user=f"user{(start + i) % 2000}@t{(start + i) % 20:02d}.example",
            tenant=f"t{(start + i) % 20:02d}",
            risk=RISKS[(start + i) % len(RISKS)],
            status=STATUSES[(start + i) % len(STATUSES)],
            outcome="ok",
            duration_ms=12.5,
            attempts=1,
            detail={"args": {"campaign_id": f"C-{start + i}"}},
        )
        for i in range(n)
    ]


async def fill(kind: str, store: SQLStore, where: str, n: int, seed: int) -> None:
    await store.open()
    world = make_world(n, seed)
    if kind == "sqlite":
        await asyncio.to_thread(load_sqlite, where, world, seed)
    else:
        await load_postgres(POSTGRES_URL, where, world, seed)


async def drop_indexes(store: SQLStore) -> None:
    async with store._begin(write=True) as conn:
        for name in DROPPED:
            await conn.exec_driver_sql(f"DROP INDEX {name}")


async def measure(
    stores: dict[str, SQLStore], rounds: int, block: int
) -> dict[tuple[str, int], list[float]]:
    samples: dict[tuple[str, int], list[float]] = {
        (name, size): [] for name in stores for size in (1, BATCH)
    }
    counter = itertools.count(0, BATCH)
    names = list(stores)
    for round_no in range(rounds + 2):  # two warm-up rounds
        order = names if round_no % 2 else names[::-1]
        for name in order:
            for size in (1, BATCH):
                for _ in range(block):
                    batch = records(size, next(counter))
                    began = time.perf_counter_ns()
                    await stores[name].append_audit(batch)
                    elapsed = (time.perf_counter_ns() - began) / 1000
                    if round_no >= 2:
                        samples[(name, size)].append(elapsed)
    return samples


def rows_of(label: str, samples: dict[tuple[str, int], list[float]]) -> list[list[str]]:
    rows = []
    for size in (1, BATCH):
        with_all = samples[("with", size)]
        without = samples[("without", size)]
        p50_with, p50_without = statistics.median(with_all), statistics.median(without)
        rows.append(
            [
                label,
                f"{size} record{'s' if size > 1 else ''}",
                f"{p50_without:,.1f}",
                f"{p50_with:,.1f}",
                f"{p50_with / p50_without:.2f}",
                f"{_p90(without):,.1f}",
                f"{_p90(with_all):,.1f}",
            ]
        )
    return rows


def _p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


async def run_kind(kind: str, args: argparse.Namespace, workdir: Path) -> list[list[str]]:
    label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[kind]
    async with (
        bench_store(kind, workdir / "with") as (with_all, where_with),
        bench_store(kind, workdir / "without") as (without, where_without),
    ):
        assert isinstance(with_all, SQLStore) and isinstance(without, SQLStore)
        began = time.perf_counter()
        await fill(kind, with_all, where_with, args.records, args.seed)
        await fill(kind, without, where_without, args.records, args.seed)
        await drop_indexes(without)
        print(
            f"{label}: two stores of {args.records:,} records in {time.perf_counter() - began:.0f} s"
        )
        try:
            samples = await measure({"with": with_all, "without": without}, args.rounds, args.block)
        finally:
            await with_all.close()
            await without.close()
    return rows_of(label, samples)


async def main_async(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    print(f"machine: {machine()}")
    if "postgres" in kinds and (why := await postgres_unreachable()) is not None:
        print(f"PostgreSQL skipped: {why}")
        kinds.remove("postgres")
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="callgate-index-bench-") as tmp:
        for kind in kinds:
            (Path(tmp) / "with").mkdir(exist_ok=True)
            (Path(tmp) / "without").mkdir(exist_ok=True)
            rows += await run_kind(kind, args, Path(tmp))
    n = args.rounds * args.block
    print(f"\n{n} appends of each size per store, after two warm-up rounds\n")
    headers = [
        "store",
        "append_audit of",
        "p50 µs without the 4",
        "p50 µs with them",
        "ratio",
        "p90 µs without",
        "p90 µs with",
    ]
    print(table(headers, rows, numeric=frozenset(range(2, 7))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records in each store first")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--block", type=int, default=10, help="appends of a size in a row")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    if args.records < 1_000:
        parser.error("--records must be at least 1,000")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
