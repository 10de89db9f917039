"""Two ``callgate serve`` replicas on one PostgreSQL against one, at concurrency 32.

One fresh PostgreSQL database; two ``callgate serve`` processes on it (the same
config and ``CALLGATE_SERVER_SECRET``, as docs/deploy.md has it), serving a
trivial tool ``bench.echo(x) -> x`` (each call validated, policy-checked and
audited in PostgreSQL). The load comes from this process, as in
``benchmarks/gateway.py``: ``httpx`` posting raw JSON-RPC ``tools/call`` requests
at 2026-07-28 (stateless), every answer checked, each call with its own argument.

Two setups take turns in timed bursts, rotating the order each round, so they
share the machine's noise:

- **one replica**: every request to replica a (b idles);
- **two replicas**: requests alternate between a and b (what a round-robin load
  balancer does).

Reported per setup: calls/s, p50 and p99 latency, and the CPU used during the
bursts (``/proc/PID/stat`` utime + stime) by each replica, by PostgreSQL (every
backend serving the benchmark's database, found in ``pg_stat_activity``) and by
this load generator, as a share of one core: which of them the machine runs out of.

    python benchmarks/replicas.py            # about 1 minute
    python benchmarks/replicas.py --quick    # a smoke test: its figures mean little
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
from _harness import POSTGRES_URL, machine
from _servers import LATEST, META, free_port
from _upstream import Process, cpu_seconds, spawn
from sqlalchemy.engine import make_url

SERVE = [sys.executable, "-m", "callgate", "serve"]
CONCURRENCY = 32

TOOLS = '''\
from callgate import Toolbox

box = Toolbox("bench")


@box.tool(read_only=True, open_world=False)
async def echo(x: int) -> int:
    """Return x unchanged."""
    return x
'''

CONFIG = """\
toolboxes = ["./bench_tools.py:box"]
"""

HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": LATEST,
    "mcp-method": "tools/call",
    "mcp-name": "bench__echo",
}


def body(i: int) -> bytes:
    params = {"name": "bench__echo", "arguments": {"x": i}, "_meta": META}
    return json.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    ).encode()


def ready(url: str) -> bool:
    try:
        response = httpx.post(url, content=body(0), headers=HEADERS, timeout=5)
    except httpx.TransportError:
        return False
    return response.status_code == 200 and '"isError":true' not in response.text.replace(" ", "")


@dataclass
class Tally:
    calls: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)

    def add_cpu(self, name: str, seconds: float) -> None:
        self.cpu[name] = self.cpu.get(name, 0.0) + seconds


class Postgres:
    """The benchmark's database, and the CPU of the backends serving it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.admin_dsn = (
            make_url(POSTGRES_URL)
            .set(drivername="postgresql")
            .render_as_string(hide_password=False)
        )
        self.url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
        self._conn: asyncpg.Connection | None = None

    async def create(self) -> None:
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            await admin.execute(f"CREATE DATABASE {self.name}")
        finally:
            await admin.close()
        self._conn = await asyncpg.connect(self.admin_dsn)

    async def drop(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        finally:
            await admin.close()

    async def cpu(self) -> dict[int, float]:
        """CPU seconds of each backend connected to the database now."""
        assert self._conn is not None
        rows = await self._conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1", self.name
        )
        seen: dict[int, float] = {}
        for row in rows:
            with contextlib.suppress(OSError):  # ended meanwhile, or not on this machine
                seen[row["pid"]] = cpu_seconds(row["pid"])
        return seen


async def burst(
    http: httpx.AsyncClient,
    targets: list[Process],
    replicas: list[Process],
    pg: Postgres,
    seconds: float,
    counter: itertools.count[int],
) -> Tally:
    tally = Tally()
    before = {p.label: p.cpu() for p in replicas}
    pg_before = await pg.cpu()
    me_before = time.process_time()
    began = time.perf_counter()
    deadline = began + seconds
    turn = itertools.cycle(targets)

    async def worker() -> None:
        while time.perf_counter() < deadline:
            i = next(counter)
            url = next(turn).url
            start = time.perf_counter()
            response = await http.post(url, content=body(i), headers=HEADERS)
            tally.latencies.append(time.perf_counter() - start)
            text = response.text.replace(" ", "")
            if response.status_code != 200 or f'"structuredContent":{{"result":{i}}}' not in text:
                raise RuntimeError(
                    f"unexpected answer from {url}: {response.status_code} {text[:300]}"
                )

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    tally.seconds = time.perf_counter() - began
    tally.calls = len(tally.latencies)
    for p in replicas:
        tally.add_cpu(p.label, p.cpu() - before[p.label])
    pg_after = await pg.cpu()
    tally.add_cpu("postgresql", sum(pg_after[pid] - pg_before.get(pid, 0.0) for pid in pg_after))
    tally.add_cpu("load generator", time.process_time() - me_before)
    return tally


def merge(into: Tally, part: Tally) -> None:
    into.calls += part.calls
    into.seconds += part.seconds
    into.latencies.extend(part.latencies)
    for name, value in part.cpu.items():
        into.add_cpu(name, value)


def report(totals: dict[str, Tally]) -> list[str]:
    names = list(next(iter(totals.values())).cpu)
    lines = [
        f"| setup | calls/s | p50 ms | p99 ms | {' | '.join(f'CPU {n}' for n in names)} |",
        "| --- | ---: | ---: | ---: |" + " ---: |" * len(names),
    ]
    for label, t in totals.items():
        lat = sorted(t.latencies)
        p50 = statistics.median(lat) * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        cpu = " | ".join(f"{t.cpu[n] / t.seconds * 100:.0f}%" for n in names)
        lines.append(f"| {label} | {t.calls / t.seconds:,.0f} | {p50:.1f} | {p99:.1f} | {cpu} |")
    one, two = totals["one replica"], totals["two replicas"]
    ratio = (two.calls / two.seconds) / (one.calls / one.seconds)
    lines.append("")
    lines.append(f"two replicas / one: {ratio:.2f}x throughput")
    return lines


async def run(quick: bool) -> None:
    rounds, seconds = (1, 1.5) if quick else (4, 6.0)
    pg = Postgres(f"callgate_bench_replicas_{uuid.uuid4().hex[:10]}")
    await pg.create()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "bench_tools.py").write_text(TOOLS)
            config = work / "callgate.toml"
            config.write_text(CONFIG)
            env = {
                **os.environ,
                "CALLGATE_STORE": pg.url,
                "CALLGATE_SERVER_SECRET": secrets.token_urlsafe(32),
            }
            os.environ.update(env)  # spawn() passes this process's environment on
            ports = [free_port(), free_port()]
            argv = [*SERVE, "--config", str(config), "--principal", "bench", "--tenant", "t"]
            log = work / "serve.log"
            with (
                spawn(
                    "replica a",
                    [*argv, "--port", str(ports[0])],
                    f"http://127.0.0.1:{ports[0]}/mcp",
                    log=log,
                    cwd=work,
                    ready=ready,
                ) as a,
                spawn(
                    "replica b",
                    [*argv, "--port", str(ports[1])],
                    f"http://127.0.0.1:{ports[1]}/mcp",
                    log=log,
                    cwd=work,
                    ready=ready,
                ) as b,
            ):
                print(f"machine: {machine()}")
                setups = {"one replica": [a], "two replicas": [a, b]}
                limits = httpx.Limits(
                    max_connections=CONCURRENCY * 2, max_keepalive_connections=CONCURRENCY * 2
                )
                counter = itertools.count(1)
                totals = {label: Tally() for label in setups}
                async with httpx.AsyncClient(limits=limits, timeout=30) as http:
                    # Warm both (imports, pools, caches) before anything is measured.
                    await burst(http, [a, b], [a, b], pg, 1.0, counter)
                    order = list(setups)
                    for r in range(rounds):
                        shift = r % len(order)
                        for label in order[shift:] + order[:shift]:
                            part = await burst(http, setups[label], [a, b], pg, seconds, counter)
                            merge(totals[label], part)
                print(f"concurrency {CONCURRENCY}, {rounds} round(s) of {seconds} s per setup")
                print("\n".join(report(totals)))
    finally:
        await pg.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run; figures mean little")
    asyncio.run(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
