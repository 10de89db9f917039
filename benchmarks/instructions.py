"""Instructions per governed call, counted by valgrind's callgrind: a figure noise can't move.

    python benchmarks/instructions.py [--against DIR] [--calls 500,3500] [--store memory]

Wall-clock figures on a shared 2-core machine move by ±10% run to run, more than
most changes to the chain. Instructions executed do not: this script runs a
process that makes ``N`` governed calls of the async echo tool under
``valgrind --tool=callgrind`` for two values of ``N`` and reports
``(total(N2) - total(N1)) / (N2 - N1)``, the instructions of one call with the
start-up (imports, opening the store) taken out, and the start-up itself
(``total(N1)`` less ``N1`` calls). ``--against DIR`` counts another checkout's ``src`` the same way, so a
change is read as a ratio of two deterministic counts.

An instruction count is not a time (cache misses, system calls and waiting on
the disk are not in it), so the wall-clock rows of ``chain_overhead.py`` stay the
figures of record; this one says which way a change moved the chain's own work.
Needs Debian's ``valgrind``; a run takes a few minutes (callgrind is ~50x slower).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _compare import SRC

WORKER_FLAG = "--worker"


async def worker(calls: int, store: str) -> None:
    from _harness import TOOLS, governed, open_gates

    from callgate.runtime import loopwatch

    # The loop watchdog's work follows wall time, not calls: under valgrind on a
    # busy machine it ticked (and reported stalls) more in a 5-call process than
    # in a 25-call one. Left out of the count.
    loopwatch.WATCH_INTERVAL = 3600.0
    name = TOOLS["async"][0]
    async with open_gates([store]) as subjects:
        gate = subjects[store].gate
        gate.runner.watch.threshold = float("inf")
        for x in range(calls):
            await governed(gate, name, x)


def count(src: Path, calls: int, store: str) -> int:
    """Instructions of a whole process that makes ``calls`` governed calls."""
    with tempfile.TemporaryDirectory(prefix="callgate-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            str(Path(__file__).resolve()),
            WORKER_FLAG,
            str(calls),
            store,
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the worker failed under valgrind:\n{done.stderr[-2000:]}")
        match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"no instruction total in {out}")
        return int(match.group(1))


def warm(src: Path, store: str) -> None:
    """Run the worker once outside valgrind, so that what it imports is compiled
    to ``__pycache__`` before anything is counted (compiling is not a call's work)."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), WORKER_FLAG, "1", store]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the worker failed:\n{done.stderr[-2000:]}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == WORKER_FLAG:
        asyncio.run(worker(int(sys.argv[2]), sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout's src directory")
    parser.add_argument("--calls", default="500,3500", help="the two call counts N1,N2")
    parser.add_argument("--store", default="memory", choices=["memory", "sqlite"])
    args = parser.parse_args()
    try:
        low, high = (int(n) for n in args.calls.split(","))
    except ValueError:
        low, high = 0, 0
    if not 0 <= low < high:
        raise SystemExit("--calls takes two counts N1,N2 with 0 <= N1 < N2")
    trees = [("this checkout", SRC)]
    if args.against is not None:
        if not (args.against / "callgate").is_dir():
            raise SystemExit(f"{args.against} has no callgate package (pass a src directory)")
        trees.insert(0, ("--against", args.against.resolve()))
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (Debian: apt-get install valgrind)")
    print(f"## Instructions per governed call (callgrind, async tool, {args.store} store)\n")
    print(f"calls N1={low}, N2={high}; per call = (total(N2) - total(N1)) / (N2 - N1)\n")
    print("| tree | per call | start-up | per call, ratio to the first row |")
    print("|---|---:|---:|---:|")
    first: float | None = None
    for label, src in trees:
        print(f"counting {label} ({src}) ...", file=sys.stderr, flush=True)
        warm(src, args.store)
        base = count(src, low, args.store)
        total = count(src, high, args.store)
        per_call = (total - base) / (high - low)
        first = per_call if first is None else first
        startup = base - low * per_call
        print(
            f"| {label} | {per_call:,.0f} | {startup:,.0f} | {per_call / first:.3f} |", flush=True
        )


if __name__ == "__main__":
    main()
