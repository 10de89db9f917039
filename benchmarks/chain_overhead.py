"""The cost of a governed call: a plain function call vs ``Gate.call`` on each store.

    python benchmarks/chain_overhead.py [--calls 1000] [--block 20] [--batches 30] [--no-postgres]

Sequential phase: one caller on one event loop (one core). Every round makes a
block of ``--block`` calls of every variant (plain / MemoryStore / SQLite /
PostgreSQL, each with an async and a sync tool), in a rotating order, so all rows
share the same machine noise while each block runs warm; each call is timed on
its own with ``time.perf_counter_ns``. (``--block 1`` alternates every call,
which adds the cost of cold caches: up to 2x on the MemoryStore row.)

Concurrent phase: batches of ``--concurrency`` callers started together with
``asyncio.gather``, the batches of all variants interleaved. The store's
``append_audit`` is wrapped to count how many transactions carried how many audit
records: with group commit, concurrent calls share commits.

``--against DIR`` compares another checkout (its ``src`` directory) with this
one, sequential phase only: each runs in a worker process of its own, and the
two take turns, one round (``--round-calls`` calls per variant) at a time
(``_compare.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _compare import Samples, Worker, run_side_by_side, serve_rounds
from _harness import TOOLS, Subject, governed, load, machine, open_gates, postgres_unreachable

TARGET_OVERHEAD_US = 250.0
TARGET_STORE = "sqlite"
STORE_LABELS = {
    "plain": "plain call",
    "memory": "gate.call, MemoryStore",
    "sqlite": "gate.call, SQLite WAL file",
    "postgres": "gate.call, PostgreSQL",
}

Invoke = Callable[[int], Awaitable[None]]


@dataclass
class Variant:
    tool: str  # "async" | "sync"
    store: str  # "plain" | a store kind
    invoke: Invoke
    samples_ns: list[int] = field(default_factory=list)
    batch_ns: list[int] = field(default_factory=list)
    batch_commits: int = 0
    batch_records: int = 0


def make_variants(subjects: dict[str, Subject], *, sessions: bool = False) -> list[Variant]:
    variants = []
    # A new session per call: its session checks run (duplicate limit), never refuse.
    numbers = itertools.count()
    for tool_kind, (name, fn) in TOOLS.items():
        if tool_kind == "async":

            async def plain(x: int, fn: Callable[[int], Awaitable[int]] = fn) -> None:
                await fn(x)
        else:

            async def plain(x: int, fn: Callable[[int], int] = fn) -> None:  # type: ignore[misc]
                fn(x)

        variants.append(Variant(tool=tool_kind, store="plain", invoke=plain))
        for kind, subject in subjects.items():

            async def call(x: int, gate=subject.gate, name: str = name) -> None:
                session = f"bench-{next(numbers)}" if sessions else None
                await governed(gate, name, x, session_id=session)

            variants.append(Variant(tool=tool_kind, store=kind, invoke=call))
    return variants


async def sequential(variants: Sequence[Variant], calls: int, block: int, *, record: bool) -> None:
    """``calls`` timed calls per variant, in blocks of ``block``, variants rotating."""
    clock = time.perf_counter_ns
    n = len(variants)
    for r in range(max(1, calls // block)):
        start = r % n
        for variant in (*variants[start:], *variants[:start]):
            for i in range(block):
                t0 = clock()
                await variant.invoke(r * block + i)
                elapsed = clock() - t0
                if record:
                    variant.samples_ns.append(elapsed)


async def concurrent(
    variants: Sequence[Variant],
    subjects: dict[str, Subject],
    batches: int,
    width: int,
    *,
    record: bool,
) -> None:
    clock = time.perf_counter_ns
    for b in range(batches):
        for variant in variants:
            counter = subjects[variant.store].counter if variant.store in subjects else None
            before = (counter.commits, counter.records) if counter else (0, 0)
            t0 = clock()
            await asyncio.gather(*(variant.invoke(b * width + i) for i in range(width)))
            elapsed = clock() - t0
            if record:
                variant.batch_ns.append(elapsed)
                if counter:
                    variant.batch_commits += counter.commits - before[0]
                    variant.batch_records += counter.records - before[1]


def percentile(sorted_values: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    index = max(0, min(len(sorted_values) - 1, round(q * len(sorted_values)) - 1))
    return float(sorted_values[index])


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, padded so it also reads well in a terminal."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * w if i < 2 else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
    return "\n".join([line(headers), line(rule), *(line(r) for r in rows)])


def report_sequential(
    variants: Sequence[Variant], subjects: dict[str, Subject], block: int
) -> list[str]:
    plain_median = {}
    stats = {}
    for v in variants:
        data = sorted(v.samples_ns)
        median_ns = statistics.median(data)
        stats[id(v)] = (median_ns / 1000, percentile(data, 0.9) / 1000, 1e9 / median_ns)
        if v.store == "plain":
            plain_median[v.tool] = stats[id(v)][0]
    rows = []
    verdicts = []
    for v in variants:
        median_us, p90_us, per_s = stats[id(v)]
        overhead = median_us - plain_median[v.tool]
        rows.append(
            [
                f"{v.tool} tool",
                STORE_LABELS[v.store],
                f"{median_us:,.1f}",
                f"{p90_us:,.1f}",
                "-" if v.store == "plain" else f"{overhead:,.1f}",
                f"{per_s:,.0f}",
            ]
        )
        if v.store == TARGET_STORE:
            met = "met" if overhead < TARGET_OVERHEAD_US else "MISSED"
            verdicts.append(
                f"- {v.tool} tool, SQLite audit: overhead {overhead:,.0f} µs at the median "
                f"vs target < {TARGET_OVERHEAD_US:.0f} µs: **{met}**"
                f" ({overhead / TARGET_OVERHEAD_US:.1f}x the target)"
            )
    n = len(variants[0].samples_ns)
    out = [
        f"### Sequential: one caller, one event loop ({n:,} calls per row, in interleaved "
        f"blocks of {block})",
        "",
        table(
            ["tool", "path", "median µs", "p90 µs", "overhead µs (median)", "calls/s (1/median)"],
            rows,
        ),
        "",
    ]
    commits = ", ".join(
        f"{kind}: {s.counter.records:,} records in {s.counter.commits:,} commits"
        for kind, s in subjects.items()
    )
    out += [f"Audit writes while sequential: {commits}.", "", "Target:", *verdicts]
    return out


def report_concurrent(variants: Sequence[Variant], width: int) -> list[str]:
    rows = []
    for v in variants:
        # Medians, not totals: one stall of the (shared, 2-core) machine moves a mean.
        per_s = width * 1e9 / statistics.median(v.batch_ns)
        seq_per_s = 1e9 / statistics.median(v.samples_ns)
        per_commit = f"{v.batch_records / v.batch_commits:,.1f}" if v.batch_commits else "-"
        rows.append(
            [
                f"{v.tool} tool",
                STORE_LABELS[v.store],
                f"{per_s:,.0f}",
                f"{per_s / seq_per_s:,.2f}x" if v.store != "plain" else "-",
                f"{v.batch_records:,}" if v.store != "plain" else "-",
                f"{v.batch_commits:,}" if v.store != "plain" else "-",
                per_commit,
            ]
        )
    batches = len(variants[0].batch_ns)
    return [
        f"### Concurrent: {width} callers per asyncio.gather batch "
        f"({batches} batches per row, interleaved)",
        "",
        table(
            [
                "tool",
                "path",
                f"calls/s ({width} / median batch)",
                "vs sequential",
                "audit records",
                "commits",
                "records/commit",
            ],
            rows,
        ),
    ]


def report_side_by_side(workers: Sequence[Worker], labels: Sequence[str]) -> list[str]:
    """Medians and overheads of each checkout, one row per variant."""
    med = {w.label: {k: statistics.median(v) / 1000 for k, v in w.samples.items()} for w in workers}
    rows = []
    for key in labels:
        tool, store = key.split(":")
        if store == "plain":
            continue
        cells = [f"{tool} tool", STORE_LABELS[store]]
        overheads = []
        for w in workers:
            overhead = med[w.label][key] - med[w.label][f"{tool}:plain"]
            overheads.append(overhead)
            cells += [f"{med[w.label][key]:,.1f}", f"{overhead:,.1f}"]
        change = overheads[-1] - overheads[0]
        cells.append(f"{change:+,.1f} ({change / overheads[0]:+.0%})")
        rows.append(cells)
    headers = ["tool", "path"]
    for w in workers:
        headers += [f"{w.label}: median µs", "overhead µs"]
    headers.append("overhead change")
    n = len(workers[0].samples[labels[0]])
    return [
        f"### Sequential, side by side: {n:,} calls per row, the two checkouts taking turns",
        "",
        table(headers, rows),
    ]


async def worker(args: argparse.Namespace) -> None:
    """One checkout's side of ``--against``: warm up, then a round per request."""
    kinds = ["memory", "sqlite"]
    if not args.no_postgres and await postgres_unreachable() is None:
        kinds.append("postgres")
    async with open_gates(kinds) as subjects:
        variants = make_variants(subjects, sessions=args.session)
        await sequential(variants, args.warmup, args.block, record=False)

        async def one_round() -> Samples:
            for v in variants:
                v.samples_ns.clear()
            await sequential(variants, args.round_calls, args.block, record=True)
            return {f"{v.tool}:{v.store}": list(v.samples_ns) for v in variants}

        labels = [f"{v.tool}:{v.store}" for v in variants]
        await serve_rounds({"labels": labels, "machine": machine()}, one_round)


def side_by_side(args: argparse.Namespace) -> None:
    worker_args = ["--warmup", str(args.warmup), "--block", str(args.block)]
    worker_args += ["--round-calls", str(args.round_calls)]
    if args.no_postgres:
        worker_args.append("--no-postgres")
    if args.session:
        worker_args.append("--session")
    rounds = max(1, args.calls // args.round_calls)
    started = time.perf_counter()
    workers = run_side_by_side(Path(__file__).resolve(), args.against, worker_args, rounds)
    print(f"## Chain overhead, side by side ({workers[-1].ready['machine']})\n")
    print("\n".join(report_side_by_side(workers, workers[-1].ready["labels"])))
    print(f"\n(benchmark took {time.perf_counter() - started:.1f} s; at the end: {load()})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per variant")
    parser.add_argument("--block", type=int, default=20, help="calls per variant in a row")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls per variant")
    parser.add_argument("--batches", type=int, default=30, help="concurrent batches per variant")
    parser.add_argument("--concurrency", type=int, default=50, help="callers per batch")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--session", action="store_true", help="every call with a session (its checks run)"
    )
    parser.add_argument("--against", type=Path, help="the src directory of another checkout")
    parser.add_argument(
        "--round-calls", type=int, default=100, help="with --against: calls per variant and turn"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        await worker(args)
        return
    if args.against is not None:
        side_by_side(args)
        return

    kinds = ["memory", "sqlite"]
    skipped = "--no-postgres given" if args.no_postgres else await postgres_unreachable()
    if skipped is None:
        kinds.append("postgres")

    started = time.perf_counter()
    async with open_gates(kinds) as subjects:
        variants = make_variants(subjects, sessions=args.session)
        print(f"## Chain overhead ({machine()})\n")
        await sequential(variants, args.warmup, args.block, record=False)
        await concurrent(variants, subjects, 2, args.concurrency, record=False)
        for s in subjects.values():
            s.counter.reset()
        await sequential(variants, args.calls, args.block, record=True)
        lines = report_sequential(variants, subjects, args.block)
        await concurrent(variants, subjects, args.batches, args.concurrency, record=True)
        lines += ["", *report_concurrent(variants, args.concurrency)]
    print("\n".join(lines))
    print()
    if skipped is not None:
        print(f"PostgreSQL rows skipped: {skipped}.")
    print(f"(benchmark took {time.perf_counter() - started:.1f} s; at the end: {load()})")


if __name__ == "__main__":
    asyncio.run(main())
