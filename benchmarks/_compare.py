"""Two checkouts side by side: the same benchmark script in two worker processes.

``--against DIR`` (in ``chain_overhead.py`` and ``large_results.py``) runs the
script twice as a worker: once with ``PYTHONPATH`` set to ``DIR`` (the ``src``
directory of another checkout, say ``git archive main | tar -x -C /tmp/before``
then ``/tmp/before/src``) and once with this checkout's ``src``. The driver asks
each worker for one round at a time, alternating which goes first, so both see
the same machine; each round answers with its samples (a JSON line on stdout).
Only the package differs between the two: both run this directory's scripts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src"
WORKER_FLAG = "--worker"

Samples = dict[str, list[int]]


class Worker:
    """A benchmark script in a process of its own, importing callgate from ``src``."""

    def __init__(self, label: str, src: Path, script: Path, args: Sequence[str]) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(src)}
        cmd = [sys.executable, str(script), WORKER_FLAG, *args]
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.samples: Samples = {}
        self.ready: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.label} ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def round(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        for key, values in self._read().items():
            self.samples.setdefault(key, []).extend(values)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def run_side_by_side(
    script: Path, against: Path | None, args: Sequence[str], rounds: int
) -> list[Worker]:
    """Workers for ``against`` (if given) and this checkout, after ``rounds`` rounds."""
    workers = []
    try:
        if against is not None:
            workers.append(Worker(f"before ({against})", against, script, args))
        workers.append(Worker("this checkout", SRC, script, args))
        for r in range(rounds):
            for w in workers if r % 2 == 0 else workers[::-1]:
                w.round()
    finally:
        for w in workers:
            w.close()
    return workers


async def serve_rounds(ready: dict[str, Any], run_round: Callable[[], Awaitable[Samples]]) -> None:
    """The worker's side: announce ``ready``, then one round per line on stdin."""
    print(json.dumps(ready), flush=True)
    while True:
        # Read in a thread: the worker's loop (its gate's watchdog, store tasks) runs on.
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line.strip():
            break
        print(json.dumps(await run_round()), flush=True)
