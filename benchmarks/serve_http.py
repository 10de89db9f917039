"""tools/call over Streamable HTTP, server against server, loaded by ``wrk``.

``callgate serve`` as the CLI starts it, the official SDK's bare ``MCPServer``
and FastMCP serve the same trivial async tool (see ``_servers.py``), each in its
own process. ``wrk`` (a C load generator, Debian package ``wrk``; one thread)
drives them, so the client is not the bottleneck: each request is a
``tools/call`` with its own id and argument. Per protocol (stateless 2026-07-28
requests; 2025-11-25 requests on one initialized session) and concurrency
level, the servers take turns in short rounds, in rotating order, so they share
the machine's noise. Reported: requests/s, p50/p99 latency (median of the
rounds' wrk figures), the server's CPU per request (user + system from
``/proc/PID/stat``, all threads), and callgate's ratios to the bare server.

Every response is checked: a status other than 200, or a result with
``"isError":true``, counts as an error and is reported.

    python benchmarks/serve_http.py [--seconds 3] [--rounds 5] [--concurrency 1 16 64]
        [--protocol 2026-07-28 2025-11-25] [--servers callgate bare fastmcp]
        [--before REV]

``--before REV`` adds ``callgate serve`` as of git revision REV (its ``src``
from ``git archive``), so a change is measured before and after in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import _servers

TARGET_SHARE = 0.85
TARGET_CPU = 1.2

LUA = """\
counter = 0
errors = 0
local threads = {}
local template = %(template)s
%(headers)s
wrk.method = "POST"

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  -- Every run starts where the last one ended: no two calls are the same call.
  counter = tonumber(args[1])
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, string.format(template, counter, counter))
end

function response(status, headers, body)
  if status ~= 200 or body:find('"isError":%%s*true') or not body:find('"result"') then
    errors = errors + 1
  end
end

function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("errors")
  end
  io.write(string.format("CALLGATE_BENCH p50_us=%%d p99_us=%%d errors=%%d\\n",
    latency:percentile(50), latency:percentile(99), total))
end
"""


def lua_script(protocol: str, session: str | None, rows: int = 0) -> str:
    """wrk's script: ``tools/call`` of ``echo`` (or of ``rows`` with ``n=rows``)."""
    if rows:
        name, arguments = "rows", {"n": rows, "x": 0}
    else:
        name, arguments = _servers.TOOL, None
    body = json.dumps(_servers.call_body(0, protocol, name, arguments))
    template = body.replace("%", "%%").replace('"id": 0', '"id": %d').replace('"x": 0', '"x": %d')
    headers = _servers.headers(protocol, name)
    if session:
        headers["mcp-session-id"] = session
    lines = "\n".join(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items())
    return LUA % {"template": json.dumps(template), "headers": lines}


@dataclass
class Tally:
    requests: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    errors: int = 0
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)

    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def cpu_us(self) -> float:
        return self.cpu / self.requests * 1e6 if self.requests else 0.0


_next_id = [1]
"""The first call id (and argument) of the next wrk run: no two calls are the same."""


def run_wrk(
    url: str, script: Path, concurrency: int, seconds: float
) -> tuple[int, float, dict[str, int]]:
    """One wrk run; (requests, seconds, {p50_us, p99_us, errors})."""
    argv = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
        "--",
        str(_next_id[0]),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    out = done.stdout
    match = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    extra = re.search(r"CALLGATE_BENCH p50_us=(\d+) p99_us=(\d+) errors=(\d+)", out)
    if not match or not extra:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    _next_id[0] += int(match.group(1)) + 10 * concurrency
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(3)]
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    failures = int(extra.group(3)) + (sum(map(int, socket_errors.groups())) if socket_errors else 0)
    figures = {"p50_us": int(extra.group(1)), "p99_us": int(extra.group(2)), "errors": failures}
    return int(match.group(1)), float(match.group(2)) * scale, figures


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="callgate-serve-bench-"))
    tallies: dict[tuple[str, int, str], Tally] = defaultdict(Tally)
    print(
        f"## tools/call over Streamable HTTP, loaded by wrk (nproc {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.seconds:g} s per "
        f"server, protocol and concurrency; tool: {f'rows(n={args.rows})' if args.rows else 'echo'})\n",
        flush=True,
    )
    with ExitStack() as stack:
        servers = []
        for kind in args.servers:
            home = workdir / kind
            home.mkdir()
            servers.append(stack.enter_context(_servers.start(kind, home, log=home / "stderr.log")))
        if args.before:
            home = workdir / "before"
            src = _servers.checkout(args.before, home / "code")
            label = f"callgate serve @{args.before}"
            running = _servers.start(
                "callgate", home, log=home / "stderr.log", src=src, label=label
            )
            servers.append(stack.enter_context(running))
        for protocol in args.protocol:
            scripts = {}
            for server in servers:
                session = (
                    _servers.open_session(server.url) if protocol == _servers.SESSIONS else None
                )
                script = workdir / f"{len(scripts)}-{protocol}.lua"
                script.write_text(lua_script(protocol, session, args.rows))
                scripts[server.label] = script
                run_wrk(server.url, script, 4, 1.0)  # warm up
            for concurrency in args.concurrency:
                for r in range(args.rounds):
                    turn = servers[r % len(servers) :] + servers[: r % len(servers)]
                    for server in turn:
                        before = server.cpu_seconds()
                        count, seconds, figures = run_wrk(
                            server.url, scripts[server.label], concurrency, args.seconds
                        )
                        tally = tallies[(protocol, concurrency, server.label)]
                        tally.cpu += server.cpu_seconds() - before
                        tally.requests += count
                        tally.seconds += seconds
                        tally.errors += figures["errors"]
                        tally.p50.append(figures["p50_us"] / 1000)
                        tally.p99.append(figures["p99_us"] / 1000)
                print(f"... {protocol} c={concurrency} done", file=sys.stderr, flush=True)
        rss = {server.label: server.rss_mb() for server in servers}
        labels = [server.label for server in servers]
    print_tables(args, labels, tallies, rss)
    errors = sum(t.errors for t in tallies.values())
    if errors:
        print(f"\n**{errors} responses were errors** (see the errors column)")
    return 1 if errors else 0


def print_tables(
    args: argparse.Namespace,
    labels: list[str],
    tallies: dict[tuple[str, int, str], Tally],
    rss: dict[str, float],
) -> None:
    print(
        "| protocol | concurrency | server | requests/s | p50 ms | p99 ms | server CPU µs/request | errors |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for protocol in args.protocol:
        for concurrency in args.concurrency:
            for label in labels:
                t = tallies[(protocol, concurrency, label)]
                print(
                    f"| {protocol} | {concurrency} | {label} | {t.rps():,.0f} | "
                    f"{statistics.median(t.p50):.2f} | {statistics.median(t.p99):.2f} | "
                    f"{t.cpu_us():,.0f} | {t.errors} |"
                )
    print()
    print(
        "Server RSS at the end: " + ", ".join(f"{label} {mb:.1f} MB" for label, mb in rss.items())
    )
    ours_label, bare_label = _servers.LABELS["callgate"], _servers.LABELS["bare"]
    if ours_label not in labels or bare_label not in labels:
        return
    others = [label for label in labels if label not in (ours_label, bare_label)]
    print()
    print(
        "| protocol | concurrency | callgate / bare throughput | callgate / bare CPU per request | "
        + " | ".join(f"callgate / {label} throughput" for label in others)
        + " |"
    )
    print("| --- | ---: | ---: | ---: |" + " ---: |" * len(others))
    for protocol in args.protocol:
        for concurrency in args.concurrency:
            ours = tallies[(protocol, concurrency, ours_label)]
            bare = tallies[(protocol, concurrency, bare_label)]
            share = ours.rps() / bare.rps()
            cpu = ours.cpu_us() / bare.cpu_us()
            marks = (
                "" if share >= TARGET_SHARE else " (below 0.85)",
                "" if cpu <= TARGET_CPU else " (above 1.2)",
            )
            versus = [ours.rps() / tallies[(protocol, concurrency, o)].rps() for o in others]
            print(
                f"| {protocol} | {concurrency} | {share:.2f}{marks[0]} | {cpu:.2f}{marks[1]} |"
                + "".join(f" {v:.2f} |" for v in versus)
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="length of one wrk run")
    parser.add_argument("--rounds", type=int, default=5, help="turns per server and level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument(
        "--protocol",
        nargs="+",
        default=[_servers.LATEST, _servers.SESSIONS],
        choices=[_servers.LATEST, _servers.SESSIONS],
    )
    parser.add_argument(
        "--servers", nargs="+", default=list(_servers.KINDS), choices=_servers.KINDS
    )
    parser.add_argument(
        "--before", metavar="REV", help="also serve callgate as of this git revision"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=0,
        metavar="N",
        help="call rows(n=N) instead of echo: N records of about 100 bytes (1000: ~92 KB)",
    )
    sys.exit(main(parser.parse_args()))
