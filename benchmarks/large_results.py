"""Large results: a governed call returning 10 KB, 100 KB or 1 MB vs the tool called directly.

    python benchmarks/large_results.py [--sizes 10000 100000 1000000] [--rounds 10] [--calls 5]
    python benchmarks/large_results.py --against /tmp/before/src   # before/after, side by side

The tool is ``async def rows(size: int) -> dict[str, Any]``: ``{"total": n,
"rows": [...]}`` of about ``size`` bytes of compact JSON (rows of an id, a name,
a city, a float score and two tags). Variants, per size:

- **direct**: ``await rows(size)``, the function itself.
- **direct + json.dumps**: the same plus one ``json.dumps`` of the result: what
  any server pays to send a result once. The gate's target is about this.
- **gate.call**: the whole governed chain on a ``MemoryStore`` and on a SQLite
  file (WAL). Results over the model's budget (``max_result_tokens`` 4,000: 16,000
  characters) are truncated and the full result is stored: 100 KB and 1 MB are,
  10 KB is not.

Each round runs ``--calls`` calls of every variant and size in a rotating order;
each call is timed alone (``time.perf_counter_ns``); the table shows medians.

``--against DIR`` compares two checkouts side by side: this one and the
``src`` directory ``DIR`` (say ``git archive main | tar -x -C /tmp/before``, then
``--against /tmp/before/src``). Each runs in a worker process of its own; the
rounds alternate between them, so both see the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _compare import Worker, run_side_by_side, serve_rounds

VARIANTS = {
    "direct": "direct",
    "dumps": "direct + json.dumps",
    "memory": "gate.call, MemoryStore",
    "sqlite": "gate.call, SQLite WAL file",
}


def rows_of(size: int) -> dict[str, Any]:
    """A result of about ``size`` bytes of compact JSON."""
    rows: list[dict[str, Any]] = []
    used = 24  # {"total":n,"rows":[]}
    while used < size:
        i = len(rows)
        row = {
            "id": i,
            "name": f"item-{i:06d}",
            "city": "Beijing",
            "score": i / 7,
            "tags": ["alpha", "beta"],
        }
        rows.append(row)
        used += len(json.dumps(row, separators=(",", ":"))) + 1
    return {"total": len(rows), "rows": rows}


# worker: one checkout, measured on request ----------------------------------------


async def worker(sizes: list[int], calls: int) -> None:
    """Answer each line on stdin with one round of samples (a JSON line on stdout)."""
    from callgate import Gate, Principal, Toolbox
    from callgate.store import MemoryStore, SQLStore

    logging.getLogger("callgate").setLevel(logging.ERROR)  # the loop watch names big tools
    data = {size: rows_of(size) for size in sizes}
    box = Toolbox("big", description="A tool with large results.")

    @box.tool(read_only=True, open_world=False)
    async def rows(size: int) -> dict[str, Any]:
        """Rows of about ``size`` bytes of JSON."""
        return data[size]

    principal = Principal(user="bench", tenant="bench-tenant")

    def governed(gate: Gate, size: int) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            envelope = await gate.call("big.rows", {"size": size}, principal=principal)
            total = data[size]["total"]
            shown = (
                envelope.truncated.total if envelope.truncated else len(envelope.payload["rows"])
            )
            if not envelope.ok or shown != total:
                raise RuntimeError(f"unexpected envelope: {envelope!r}"[:2000])

        return call

    def direct(size: int) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            await rows(size)

        return call

    def dumped(size: int) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            json.dumps(await rows(size))

        return call

    with tempfile.TemporaryDirectory(prefix="callgate-large-") as tmp:
        memory = Gate([box], store=MemoryStore())
        sqlite = Gate([box], store=SQLStore(f"sqlite:///{Path(tmp) / 'large.db'}"))
        async with memory, sqlite:
            subjects: dict[tuple[str, int], Callable[[], Awaitable[None]]] = {}
            for size in sizes:
                subjects["direct", size] = direct(size)
                subjects["dumps", size] = dumped(size)
                subjects["memory", size] = governed(memory, size)
                subjects["sqlite", size] = governed(sqlite, size)
            order = list(subjects)
            for call in subjects.values():  # warm up
                for _ in range(2):
                    await call()
            turn = 0

            async def one_round() -> dict[str, list[int]]:
                nonlocal turn
                turn += 1
                rotated = order[turn % len(order) :] + order[: turn % len(order)]
                samples: dict[str, list[int]] = {f"{v}:{s}": [] for v, s in order}
                for _ in range(calls):
                    for variant, size in rotated:
                        t0 = time.perf_counter_ns()
                        await subjects[variant, size]()
                        samples[f"{variant}:{size}"].append(time.perf_counter_ns() - t0)
                return samples

            await serve_rounds({"ready": True}, one_round)


# driver ------------------------------------------------------------------------------


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def report(workers: list[Worker], sizes: list[int]) -> None:
    print(
        "| result | code | direct ms | direct + json.dumps ms "
        "| gate.call, MemoryStore ms | x (direct + dumps) | extra, in json.dumps "
        "| gate.call, SQLite ms | x (direct + dumps) | extra, in json.dumps |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        for w in workers:
            med = {v: statistics.median(w.samples[f"{v}:{size}"]) for v in VARIANTS}
            one_dump = max(med["dumps"] - med["direct"], 1.0)
            cells = [f"{size / 1000:,.0f} KB", w.label, _ms(med["direct"]), _ms(med["dumps"])]
            for store in ("memory", "sqlite"):
                cells += [
                    _ms(med[store]),
                    f"{med[store] / med['dumps']:.2f}",
                    f"{(med[store] - med['direct']) / one_dump:.2f}",
                ]
            print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5, help="calls per variant and round")
    parser.add_argument("--against", type=Path, help="the src directory of another checkout")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker(args.sizes, args.calls))
        return
    print(
        f"# Large results: {args.rounds} rounds x {args.calls} calls per variant, "
        f"Python {sys.version.split()[0]}, nproc {os.cpu_count()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    worker_args = ["--calls", str(args.calls), "--sizes", *map(str, args.sizes)]
    workers = run_side_by_side(Path(__file__).resolve(), args.against, worker_args, args.rounds)
    print()
    report(workers, args.sizes)
    print()
    print(
        "x (direct + dumps): the governed call's median over the direct call's plus one "
        "json.dumps. extra, in json.dumps: (gate - direct) / (one json.dumps of the result)."
    )


if __name__ == "__main__":
    main()
