"""Huge upstream answers: what one stdio answer of 30 MB or 113 MB costs the gateway.

Each figure comes from a worker process of its own (so its peak memory is its
own): a ``Gate`` with one stdio upstream, ``tests/gateway/huge_server.py`` (it
writes its answer 1 MiB at a time and holds none of it), the upstream's default
``max_answer_bytes`` (32 MiB) and ``limits`` (``max_result_bytes`` 8 MiB), and
one call of its read tool ``fill`` answering with a line of exactly SIZE bytes.
Printed per size: how the call ended, its wall time, the worker's RSS before
the call and its peak RSS (``ru_maxrss``: the whole process's high-water mark),
and the longest the event loop went without running a 10 ms ticker.

``--transport sdk`` reads the upstream with the SDK's own ``stdio_client``
instead of callgate's (what the gateway did before ``max_answer_bytes``); it
takes minutes at 113 MB (its reader is quadratic).

    python benchmarks/huge_answers.py [--sizes 30000000 113000000] [--transport callgate|sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "gateway" / "huge_server.py"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _measure(size: int, transport: str) -> dict[str, Any]:
    from callgate import Gate, Principal
    from callgate.config import load_config
    from callgate.gateway import upstream_toolboxes
    from callgate.store import MemoryStore

    if transport == "sdk":
        from mcp.client.stdio import stdio_client

        import callgate.gateway.connection as connection

        @contextlib.asynccontextmanager
        async def sdk(params: Any, **_: Any) -> AsyncIterator[Any]:
            async with stdio_client(params, errlog=_["errlog"]) as streams:
                yield streams

        connection.stdio_transport = sdk  # type: ignore[assignment]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gw.toml"
        path.write_text(
            f'[[upstreams]]\nname = "huge"\ncommand = "{sys.executable}"\n'
            f'args = ["{SERVER}"]\nprotocol = "2025-11-25"\ntrust = "trusted"\n'
            # Time enough for the SDK's reader to finish (minutes at 113 MB).
            "startup_wait = 20\ntimeout = 600\n[limits]\nmax_timeout = 600\n",
            encoding="utf-8",
        )
        cfg = load_config(path)
        async with Gate(
            upstream_toolboxes(cfg.upstreams, cfg.label), store=MemoryStore(), limits=cfg.limits
        ) as gate:
            alice = Principal("alice", tenant="acme")
            warm = await gate.call("huge.fill", {"size": 1000}, principal=alice)
            assert warm.status == "ok", warm
            stall = 0.0
            done = asyncio.Event()

            async def tick() -> None:
                nonlocal stall
                last = time.perf_counter()
                while not done.is_set():
                    await asyncio.sleep(0.01)
                    now = time.perf_counter()
                    stall = max(stall, now - last - 0.01)
                    last = now

            before = _rss_mb()
            ticker = asyncio.create_task(tick())
            start = time.perf_counter()
            env = await gate.call("huge.fill", {"size": size}, principal=alice)
            took = time.perf_counter() - start
            done.set()
            await ticker
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            error = env.error
            return {
                "size": size,
                "transport": transport,
                "outcome": env.status if error is None else f"{error.kind}",
                "message": "" if error is None else error.message_for_model,
                "seconds": took,
                "rss_before_mb": before,
                "peak_rss_mb": peak,
                "stall_s": stall,
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000_000, 113_000_000])
    parser.add_argument("--transport", choices=["callgate", "sdk"], default="callgate")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(asyncio.run(_measure(args.worker, args.transport))))
        return
    print(
        "| answer | transport | call ended | seconds | RSS before MB | peak RSS MB "
        "| longest loop stall s |"
    )
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for size in args.sizes:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(size), "--transport", args.transport],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {size / 1e6:,.0f} MB | {row['transport']} | {row['outcome']} "
            f"| {row['seconds']:.2f} | {row['rss_before_mb']:.0f} | {row['peak_rss_mb']:.0f} "
            f"| {row['stall_s']:.3f} |"
        )
        print(f"<!-- {row['message']} -->", file=sys.stderr)


if __name__ == "__main__":
    main()
