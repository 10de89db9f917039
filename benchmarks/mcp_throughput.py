"""tools/call over Streamable HTTP: callgate's server against a bare SDK server.

Both serve the same trivial function (``echo(x: int) -> int``), each in its own
process (uvicorn, loopback), and this process drives them with raw 2026-07-28
JSON-RPC requests (stateless: no handshake), alternating between the two in
short rounds so both share the machine's noise. Reported per server and
concurrency level: requests per second, p50 and p99 latency; and callgate's
throughput as a share of the bare server's (target: governance costs less than
15%, i.e. at least 85%).

callgate's server runs the full governed chain with a SQLite audit store (WAL),
exactly as ``callgate serve`` does.

    python benchmarks/mcp_throughput.py [--requests 2000] [--concurrency 1 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}
TARGET_SHARE = 0.85


def serve(kind: str, port: int, store: str) -> None:
    """Run one server in this process (the benchmark starts two of these)."""
    import uvicorn

    if kind == "bare":
        from mcp.server.mcpserver import MCPServer

        bare = MCPServer("bare")

        @bare.tool()
        def echo(x: int) -> int:
            """Return x unchanged."""
            return x

        app = bare.streamable_http_app(host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
        return

    from callgate import Gate, Principal, Toolbox
    from callgate.mcp import build_server, streamable_http_app

    box = Toolbox("bench")

    @box.tool(read_only=True, open_world=False)
    async def echo_tool(x: int) -> int:
        """Return x unchanged."""
        return x

    gate = Gate([box], store=store)
    server = build_server(gate, principal=Principal("bench", tenant="t"), unprefixed=["bench"])
    app = streamable_http_app(server, host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def server_process(kind: str, store: str) -> AsyncIterator[str]:
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, before any timing
        [sys.executable, __file__, "--serve", kind, "--port", str(port), "--store", store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient() as http:
            deadline = time.monotonic() + 30
            while True:
                try:
                    await http.post(url, content=b"{}", headers=HEADERS)
                    break
                except httpx.TransportError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        raise RuntimeError(f"{kind} server did not start: {err[-2000:]}") from None
                    await asyncio.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stderr:
            proc.stderr.close()


def body(name: str, i: int) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": name, "arguments": {"x": i}, "_meta": ENVELOPE},
        }
    ).encode()


async def one(http: httpx.AsyncClient, url: str, name: str, i: int) -> float:
    started = time.perf_counter()
    response = await http.post(url, content=body(name, i), headers={**HEADERS, "mcp-name": name})
    elapsed = time.perf_counter() - started
    text = response.text
    if response.status_code != 200 or '"isError":true' in text.replace(" ", ""):
        raise RuntimeError(f"unexpected answer from {name}: {response.status_code} {text[:300]}")
    return elapsed


async def burst(
    http: httpx.AsyncClient, url: str, name: str, count: int, concurrency: int, start: int
) -> tuple[float, list[float]]:
    """``count`` calls by ``concurrency`` workers; (wall seconds, latencies)."""
    latencies: list[float] = []
    queue = iter(range(start, start + count))

    async def worker() -> None:
        for i in queue:
            latencies.append(await one(http, url, name, i))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began, latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="callgate-mcp-bench-"))
    store = f"sqlite:///{workdir / 'bench.db'}"
    print(
        f"## MCP tools/call over Streamable HTTP (x86_64, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f})\n"
    )
    rows = []
    async with server_process("callgate", store) as gated, server_process("bare", store) as bare:
        subjects = {"callgate": (gated, "echo_tool"), "bare SDK MCPServer": (bare, "echo")}
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(limits=limits, timeout=30) as http:
            for url, tool in subjects.values():  # warm up both
                await burst(http, url, tool, 200, 4, 0)
            for concurrency in args.concurrency:
                wall = dict.fromkeys(subjects, 0.0)
                lat: dict[str, list[float]] = {name: [] for name in subjects}
                rounds = 10
                per_round = max(args.requests // rounds, concurrency)
                for r in range(rounds):
                    order = list(subjects.items())
                    if r % 2:
                        order.reverse()
                    for name, (url, tool) in order:
                        seconds, values = await burst(
                            http, url, tool, per_round, concurrency, r * per_round
                        )
                        wall[name] += seconds
                        lat[name].extend(values)
                for name in subjects:
                    rps = len(lat[name]) / wall[name]
                    rows.append(
                        (
                            concurrency,
                            name,
                            rps,
                            statistics.median(lat[name]) * 1000,
                            pct(lat[name], 0.99) * 1000,
                        )
                    )
    print("| concurrency | server | requests/s | p50 ms | p99 ms |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for concurrency, name, rps, p50, p99 in rows:
        print(f"| {concurrency} | {name} | {rps:,.0f} | {p50:.2f} | {p99:.2f} |")
    print()
    for concurrency in args.concurrency:
        ours = next(r for r in rows if r[0] == concurrency and r[1] == "callgate")
        base = next(r for r in rows if r[0] == concurrency and r[1] != "callgate")
        share = ours[2] / base[2]
        verdict = "met" if share >= TARGET_SHARE else "MISSED"
        print(
            f"- concurrency {concurrency}: callgate serves {share:.0%} of the bare server's "
            f"throughput (target >= {TARGET_SHARE:.0%}): **{verdict}**"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="calls per server and level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--serve", choices=["callgate", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve:
        serve(parsed.serve, parsed.port, parsed.store)
    else:
        asyncio.run(main(parsed))
