"""callgate as a gateway: one upstream tool direct, through callgate, through FastMCP's proxy.

Side by side in one run, over Streamable HTTP (2026-07-28, stateless requests),
the same upstream tool ``echo(text) -> text`` is called:

1. **direct**: at the upstream (the official SDK's ``MCPServer``, stateless, JSON
   responses; see ``_upstream.py``);
2. **callgate gateway**: through ``callgate serve -c gateway.toml`` with that upstream
   in ``[[upstreams]]`` (every call validated, policy-checked, audited in SQLite);
3. **SDK proxy, ungoverned**: the official SDK's ``MCPServer`` whose ``echo`` forwards
   through one connected SDK ``Client`` (the client callgate holds per upstream),
   governing nothing: the floor of any gateway built on the SDK's server and client;
4. **FastMCP proxy**: through ``fastmcp.server.create_proxy(url)`` (FastMCP's own venv),
   which opens a fresh upstream session per request (its default for a URL), and
   **FastMCP proxy, one session**: ``create_proxy`` given one connected ``Client``.

The load comes from this process: ``httpx`` posting raw JSON-RPC ``tools/call``
requests (no SDK client: far cheaper per request), every answer checked, each
call with its own argument. The paths take turns in short timed bursts,
rotating the order each round, so they share the machine's noise. Reported per
path and concurrency: requests/s, p50 and p99 latency, and the CPU per call of
the process in the middle (the gateway or proxy) and of the upstream
(``/proc/PID/stat`` utime + stime around each burst); then callgate's added
p50 latency and its throughput against direct and against FastMCP.

Second part: the cost of many upstreams. One upstream process serves 20
endpoints of 50 generated tools each; one ``callgate serve`` has all 20 in its
config, another only the first, and they take turns: ``tools/list`` latency,
and one tool's call (concurrency 1).

    python benchmarks/gateway.py            # about 4 minutes
    python benchmarks/gateway.py --quick    # a smoke test (about 30 s): its figures mean little
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _harness import machine
from _servers import LATEST, META, free_port
from _upstream import FASTMCP, Process, fastmcp_python, gateway_config, spawn

HERE = Path(__file__).resolve().parent
SERVE = [sys.executable, "-m", "callgate", "serve"]
FASTMCP_PATHS = {
    "FastMCP proxy": "fastmcp-proxy",
    "FastMCP proxy, one session": "fastmcp-proxy-shared",
}
"""FastMCP's default (a fresh upstream session per request) and one shared session."""
FLOOR = "SDK proxy, ungoverned"
"""The official SDK's server forwarding through its client, governing nothing."""
TARGET_ADDED_MS = 1.5
TARGET_SHARE = 0.70
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": LATEST,
}


@dataclass
class Subject:
    """One way to reach the upstream tool, and the processes whose CPU it costs."""

    label: str
    url: str
    tool: str
    middle: Process | None
    """The gateway or proxy (None: direct)."""
    upstream: Process
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = HEADERS | {"mcp-method": "tools/call", "mcp-name": self.tool}


@dataclass
class Tally:
    calls: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    middle_cpu: float = 0.0
    upstream_cpu: float = 0.0

    @property
    def rps(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def p(self, q: float) -> float:
        """The ``q`` quantile of the latencies, in ms."""
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) * 1000

    def cpu_us(self, seconds: float) -> float:
        return seconds / self.calls * 1e6 if self.calls else 0.0


_ids = itertools.count(1)


def call_body(tool: str) -> bytes:
    i = next(_ids)
    params = {"name": tool, "arguments": {"text": f"bench {i}"}, "_meta": META}
    return json.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    ).encode()


def list_body() -> bytes:
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/list", "params": {"_meta": META}}
    return json.dumps(body).encode()


async def call(http: httpx.AsyncClient, subject: Subject) -> float:
    started = time.perf_counter()
    response = await http.post(
        subject.url, content=call_body(subject.tool), headers=subject.headers
    )
    elapsed = time.perf_counter() - started
    if response.status_code != 200 or b'"isError":false' not in response.content:
        raise RuntimeError(
            f"{subject.label}: unexpected answer {response.status_code} {response.text[:300]}"
        )
    return elapsed


async def burst(
    http: httpx.AsyncClient, subject: Subject, concurrency: int, seconds: float
) -> Tally:
    """``concurrency`` workers calling for ``seconds``; the CPU of the processes around it."""
    tally = Tally()
    middle = subject.middle.cpu() if subject.middle else 0.0
    upstream = subject.upstream.cpu()
    began = time.perf_counter()
    deadline = began + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            tally.latencies.append(await call(http, subject))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    tally.seconds = time.perf_counter() - began
    tally.calls = len(tally.latencies)
    tally.middle_cpu = (subject.middle.cpu() - middle) if subject.middle else 0.0
    tally.upstream_cpu = subject.upstream.cpu() - upstream
    return tally


def merge(into: Tally, part: Tally) -> None:
    into.calls += part.calls
    into.seconds += part.seconds
    into.latencies.extend(part.latencies)
    into.middle_cpu += part.middle_cpu
    into.upstream_cpu += part.upstream_cpu


async def alternate(
    http: httpx.AsyncClient,
    subjects: list[Subject],
    concurrency: int,
    rounds: int,
    seconds: float,
) -> dict[str, Tally]:
    totals = {s.label: Tally() for s in subjects}
    for r in range(rounds):
        shift = r % len(subjects)
        for subject in subjects[shift:] + subjects[:shift]:
            merge(totals[subject.label], await burst(http, subject, concurrency, seconds))
    return totals


def count_tools(url: str) -> int:
    """How many tools ``url`` lists (0 while it does not answer)."""
    try:
        response = httpx.post(
            url, content=list_body(), headers=HEADERS | {"mcp-method": "tools/list"}, timeout=10
        )
    except httpx.TransportError:
        return 0
    if response.status_code != 200:
        return 0
    return len(response.json().get("result", {}).get("tools", []))


def lists(at_least: int) -> Callable[[str], bool]:
    return lambda url: count_tools(url) >= at_least


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# Part 1: one tool, three paths ------------------------------------------------------
async def three_paths(args: argparse.Namespace, work: Path, fastmcp: Path | None) -> None:
    log = work / "servers.log"
    with contextlib.ExitStack() as stack:
        port = free_port()
        upstream = stack.enter_context(
            spawn(
                "upstream",
                [sys.executable, str(HERE / "_upstream.py"), "upstream", str(port)],
                f"http://127.0.0.1:{port}/u0/mcp",
                log=log,
                cwd=work,
                ready=lists(1),
            )
        )
        subjects = [Subject("direct", upstream.url, "echo", None, upstream)]
        config = gateway_config(work, {"up": upstream.url})
        port = free_port()
        store = f"sqlite:///{work / 'gateway.db'}"
        gateway = stack.enter_context(
            spawn(
                "callgate gateway",
                [*SERVE, "-c", str(config), "--port", str(port), "--store", store],
                f"http://127.0.0.1:{port}/mcp",
                log=log,
                cwd=work,
                ready=lists(1),
            )
        )
        subjects.append(Subject("callgate gateway", gateway.url, "up__echo", gateway, upstream))
        port = free_port()
        floor = stack.enter_context(
            spawn(
                FLOOR,
                [sys.executable, str(HERE / "_upstream.py"), "sdk-proxy", str(port), upstream.url],
                f"http://127.0.0.1:{port}/mcp",
                log=log,
                cwd=work,
                ready=lists(1),
            )
        )
        subjects.append(Subject(FLOOR, floor.url, "echo", floor, upstream))
        for label, kind in FASTMCP_PATHS.items():
            if fastmcp is None:
                break
            port = free_port()
            proxy = stack.enter_context(
                spawn(
                    label,
                    [str(fastmcp), str(HERE / "_upstream.py"), kind, str(port), upstream.url],
                    f"http://127.0.0.1:{port}/mcp",
                    log=log,
                    cwd=work,
                    ready=lists(1),
                )
            )
            subjects.append(Subject(label, proxy.url, "echo", proxy, upstream))

        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        results: dict[int, dict[str, Tally]] = {}
        async with httpx.AsyncClient(limits=limits, timeout=30) as http:
            await alternate(http, subjects, 4, 1, args.warmup)
            for concurrency in args.concurrency:
                results[concurrency] = await alternate(
                    http, subjects, concurrency, args.rounds, args.seconds
                )
        rss = {s.label: rss_mb((s.middle or s.upstream).proc.pid) for s in subjects}

    print(f"## One upstream tool over Streamable HTTP: direct, callgate, FastMCP ({machine()})\n")
    print(
        f"{args.rounds} rounds of {args.seconds:g} s per path and level, the paths in turn; "
        f"protocol {LATEST}, stateless; FastMCP {FASTMCP}.\n"
    )
    print(
        "| concurrency | path | requests/s | p50 ms | p99 ms | gateway/proxy CPU µs/call "
        "| upstream CPU µs/call | calls |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for concurrency, tallies in results.items():
        for label, t in tallies.items():
            middle = f"{t.cpu_us(t.middle_cpu):,.0f}" if label != "direct" else "-"
            print(
                f"| {concurrency} | {label} | {t.rps:,.0f} | {t.p50:.2f} | {t.p(0.99):.2f} "
                f"| {middle} | {t.cpu_us(t.upstream_cpu):,.0f} | {t.calls:,} |"
            )
    print()
    print("RSS at the end: " + ", ".join(f"{k} {v:.1f} MB" for k, v in rss.items()))
    print()
    print(
        "| concurrency | callgate added p50 ms | callgate throughput % of direct "
        "| callgate / FastMCP throughput | callgate / FastMCP one-session throughput "
        "| FastMCP added p50 ms | FastMCP one-session added p50 ms "
        "| ungoverned SDK proxy added p50 ms | callgate over it: p50 ms | callgate / it: CPU |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for concurrency, t in results.items():
        direct, ours, floor = t["direct"], t["callgate gateway"], t[FLOOR]
        cells = [f"{ours.p50 - direct.p50:.2f}", f"{ours.rps / direct.rps:.0%}"]
        for label in FASTMCP_PATHS:
            theirs = t.get(label)
            cells.append(f"{ours.rps / theirs.rps:.2f}" if theirs else "-")
        for label in FASTMCP_PATHS:
            theirs = t.get(label)
            cells.append(f"{theirs.p50 - direct.p50:.2f}" if theirs else "-")
        cells.append(f"{floor.p50 - direct.p50:.2f}")
        cells.append(f"{ours.p50 - floor.p50:.2f}")
        ours_cpu, floor_cpu = ours.cpu_us(ours.middle_cpu), floor.cpu_us(floor.middle_cpu)
        cells.append(f"{ours_cpu / floor_cpu:.2f}" if floor_cpu else "-")
        print(f"| {concurrency} | " + " | ".join(cells) + " |")
    print()
    print(
        f"Targets (not asserted): callgate adds < {TARGET_ADDED_MS} ms at p50, keeps >= "
        f"{TARGET_SHARE:.0%} of direct throughput, is faster than FastMCP's proxy."
    )
    for concurrency, t in results.items():
        direct, ours = t["direct"], t["callgate gateway"]
        verdicts = [
            f"added p50 {'met' if ours.p50 - direct.p50 < TARGET_ADDED_MS else 'MISSED'}",
            f"throughput share {'met' if ours.rps / direct.rps >= TARGET_SHARE else 'MISSED'}",
        ]
        for label in FASTMCP_PATHS:
            if (theirs := t.get(label)) is not None:
                faster = "met" if ours.rps > theirs.rps else "MISSED"
                verdicts.append(f"faster than {label}: {faster}")
        print(f"- concurrency {concurrency}: " + ", ".join(verdicts))
    print()


# Part 2: many upstreams -----------------------------------------------------------
async def list_round(http: httpx.AsyncClient, url: str, times: int) -> list[float]:
    headers = HEADERS | {"mcp-method": "tools/list"}
    out = []
    for _ in range(times):
        started = time.perf_counter()
        response = await http.post(url, content=list_body(), headers=headers)
        out.append(time.perf_counter() - started)
        if response.status_code != 200 or b'"tools"' not in response.content:
            raise RuntimeError(f"tools/list at {url}: {response.status_code} {response.text[:300]}")
    return out


async def many_upstreams(args: argparse.Namespace, work: Path) -> None:
    log = work / "servers.log"
    n, tools = args.upstreams, args.tools
    with contextlib.ExitStack() as stack:
        port = free_port()
        argv = [sys.executable, str(HERE / "_upstream.py"), "upstream", str(port)]
        upstream = stack.enter_context(
            spawn(
                "upstreams",
                [*argv, "--endpoints", str(n), "--tools", str(tools)],
                f"http://127.0.0.1:{port}/u{n - 1}/mcp",
                log=log,
                cwd=work,
                ready=lists(tools),
            )
        )
        urls = {f"up{i}": f"http://127.0.0.1:{port}/u{i}/mcp" for i in range(n)}
        subjects: list[Subject] = []
        ready: dict[str, float] = {}
        for count in (1, n):
            label = f"{count} x {tools}"
            config = gateway_config(work, dict(list(urls.items())[:count]), name=f"scale{count}")
            gport = free_port()
            store = f"sqlite:///{work / f'scale{count}.db'}"
            began = time.perf_counter()
            gateway = stack.enter_context(
                spawn(
                    label,
                    [*SERVE, "-c", str(config), "--port", str(gport), "--store", store],
                    f"http://127.0.0.1:{gport}/mcp",
                    log=log,
                    cwd=work,
                    ready=lists(count * tools),
                )
            )
            ready[label] = time.perf_counter() - began
            subjects.append(Subject(label, gateway.url, "up0__echo", gateway, upstream))

        listed = {s.label: count_tools(s.url) for s in subjects}
        lists_ms: dict[str, list[float]] = {s.label: [] for s in subjects}
        list_cpu = dict.fromkeys(lists_ms, 0.0)
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http:
            await alternate(http, subjects, 1, 1, args.warmup)
            for r in range(args.rounds):
                for subject in subjects if r % 2 == 0 else subjects[::-1]:
                    assert subject.middle is not None
                    before = subject.middle.cpu()
                    lists_ms[subject.label] += await list_round(http, subject.url, args.lists)
                    list_cpu[subject.label] += subject.middle.cpu() - before
            calls = await alternate(http, subjects, 1, args.rounds, args.seconds)
        rss = {s.label: rss_mb(s.middle.proc.pid) for s in subjects if s.middle}

    print(f"## Many upstreams: tools/list and one call through callgate ({machine()})\n")
    print(
        f"One upstream process serving {n} endpoints of {tools} tools; one callgate gateway "
        f"with 1 of them, one with all {n}, in turn ({args.rounds} rounds; {args.lists} "
        f"tools/list and {args.seconds:g} s of calls to up0__echo per round, concurrency 1).\n"
    )
    print(
        "| upstreams x tools | tools listed | tools/list p50 ms | tools/list p99 ms "
        "| tools/list CPU ms | call requests/s | call p50 ms | call p99 ms "
        "| gateway CPU µs/call | ready s | RSS MB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in subjects:
        t = calls[s.label]
        lat = Tally(latencies=lists_ms[s.label])
        per_list = list_cpu[s.label] / len(lists_ms[s.label]) * 1000
        print(
            f"| {s.label} | {listed[s.label]:,} | {lat.p50:.2f} | {lat.p(0.99):.2f} "
            f"| {per_list:.2f} | {t.rps:,.0f} | {t.p50:.2f} | {t.p(0.99):.2f} "
            f"| {t.cpu_us(t.middle_cpu):,.0f} | {ready[s.label]:.1f} | {rss[s.label]:.1f} |"
        )
    one, many = (calls[s.label] for s in subjects)
    list_one, list_many = (statistics.median(lists_ms[s.label]) for s in subjects)
    print()
    print(
        f"- {n} upstreams against 1: tools/list {list_many / list_one:.1f}x the time "
        f"({listed[subjects[1].label]:,} tools against {listed[subjects[0].label]:,}); "
        f"a call's p50 {many.p50 / one.p50:.2f}x, its gateway CPU "
        f"{many.cpu_us(many.middle_cpu) / one.cpu_us(one.middle_cpu):.2f}x "
        "(target: a call's cost does not grow with the number of upstreams)"
    )
    print()


async def main(args: argparse.Namespace) -> None:
    fastmcp: Path | None = None
    if not args.no_fastmcp:
        made = fastmcp_python()
        if isinstance(made, str):
            print(f"FastMCP path skipped: {made}", file=sys.stderr)
        else:
            fastmcp = made
    with tempfile.TemporaryDirectory(prefix="callgate-gateway-bench-") as tmp:
        work = Path(tmp)
        try:
            if not args.scale_only:
                await three_paths(args, work, fastmcp)
            if args.upstreams > 0:
                await many_upstreams(args, work)
        except Exception:
            log = work / "servers.log"
            if log.exists():
                print(log.read_text()[-3000:], file=sys.stderr)
            raise


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: short bursts")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=8, help="turns per path and level")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one burst")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds per path, untimed")
    parser.add_argument("--upstreams", type=int, default=20, help="0: skip the second part")
    parser.add_argument("--tools", type=int, default=50, help="tools per upstream (part two)")
    parser.add_argument("--lists", type=int, default=20, help="tools/list per round (part two)")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave out FastMCP's proxy")
    parser.add_argument("--scale-only", action="store_true", help="only the second part")
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.rounds, parsed.seconds, parsed.warmup, parsed.lists = 2, 0.5, 0.3, 5
    asyncio.run(main(parsed))
