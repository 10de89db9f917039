"""Soak: many tools/call requests against ``callgate serve``, as the CLI starts it.

Starts ``python -m callgate serve -c cfg.toml --port P --store sqlite:///...`` in a
subprocess (a config whose toolbox holds one trivial async tool), then drives
``--calls`` stateless 2026-07-28 ``tools/call`` requests at ``--concurrency``
with ``wrk`` (a C load generator, so the client is not the bottleneck). The
load runs in ``--segments`` back-to-back wrk runs; between two of them (a few
milliseconds) the SQLite WAL, the database file and the server's resident
memory (VmRSS) are sampled, and a thread samples them every half second during
the load too, so the largest WAL seen under steady load is reported.

Every response is checked by wrk's Lua script: a status other than 200, or a
body with ``"isError":true``, counts as an error. At the end the server is
stopped (SIGINT, as a user would) and its stderr is searched for errors, and
the audit table is counted: one ``final`` record per answered call.

    python benchmarks/soak.py                      # 200K calls at concurrency 16
    python benchmarks/soak.py --calls 20000        # a shorter run
    python benchmarks/soak.py --result-kb 1024     # 1 MB results (truncated, spilled to the store)

Needs ``wrk`` on PATH (Debian: ``apt-get install wrk``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TOOLS = '''
from callgate import Toolbox

box = Toolbox("bench")
RESULT_KB = {result_kb}


@box.tool(read_only=True, open_world=False)
async def echo(x: int) -> int:
    """Return x unchanged."""
    return x


@box.tool(read_only=True, open_world=False)
async def blob(x: int) -> list[str]:
    """Return about RESULT_KB kilobytes of rows."""
    return [f"{{x}}-{{i}}-" + "y" * 1000 for i in range(RESULT_KB)]
'''

CONFIG = """
toolboxes = ["./soak_tools.py:box"]

[mcp]
unprefixed = ["bench"]

[limits]
result_ttl = {result_ttl}
"""

LUA = r"""
-- Globals, not locals: done() reads them from each thread with thread:get().
quota = tonumber(os.getenv("SOAK_QUOTA"))
tool = os.getenv("SOAK_TOOL")
counter = tonumber(os.getenv("SOAK_FIRST"))
answered = 0
not_ok = 0
is_error = 0
first_bad = nil

wrk.method = "POST"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["content-type"] = "application/json"
wrk.headers["mcp-protocol-version"] = "2026-07-28"
wrk.headers["mcp-method"] = "tools/call"
wrk.headers["mcp-name"] = tool

local envelope = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}'

request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":'
    .. '{"name":"' .. tool .. '","arguments":{"x":' .. counter .. '},' .. envelope .. '}}'
  return wrk.format(nil, nil, nil, body)
end

response = function(status, headers, body)
  answered = answered + 1
  if status ~= 200 then
    not_ok = not_ok + 1
    if first_bad == nil then first_bad = status .. " " .. string.sub(body, 1, 300) end
  elseif string.find(body, '"isError":true', 1, true) then
    is_error = is_error + 1
    if first_bad == nil then first_bad = string.sub(body, 1, 300) end
  end
  if answered == quota then
    -- wrk sleeps for its whole duration even once its threads stop: end it by
    -- SIGINT, which still runs done(). The shell's parent is wrk; sent from the
    -- background, since system() ignores SIGINT in wrk until the shell exits.
    wrk.thread:stop()
    os.execute("(sleep 0.05; kill -INT $PPID) >/dev/null 2>&1 &")
  end
end

local threads = {}
setup = function(thread) table.insert(threads, thread) end

done = function(summary, latency, requests)
  local a, n, e = 0, 0, 0
  local bad = ""
  for _, t in ipairs(threads) do
    a = a + t:get("answered")
    n = n + t:get("not_ok")
    e = e + t:get("is_error")
    local b = t:get("first_bad")
    if b ~= nil and bad == "" then bad = b end
  end
  local s = summary.errors
  io.write(string.format(
    "SOAK answered=%d not_ok=%d is_error=%d socket=%d p50_us=%d p99_us=%d bad=%s\n",
    a, n, e, s.connect + s.read + s.write + s.timeout, latency:percentile(50),
    latency:percentile(99), string.gsub(bad, "\n", " ")))
end
"""


@dataclass
class Sample:
    calls: int
    wal_mb: float
    db_mb: float
    rss_mb: float
    anon_mb: float
    index_mb: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mb(path: Path) -> float:
    try:
        return path.stat().st_size / 1e6
    except FileNotFoundError:
        return 0.0


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of /proc/PID/status in MB: VmRSS, or RssAnon (its part
    that is the process's own memory, not mapped files)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def mapped_mb(pid: int, suffix: str) -> float:
    """Resident MB of the process's mappings of files named ``*suffix`` (SQLite
    maps the WAL index, ``-shm``, into every process that uses the database)."""
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            inside = line.endswith(suffix)
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total / 1024


def sample(calls: int, wal: Path, db: Path, pid: int) -> Sample:
    return Sample(
        calls,
        mb(wal),
        mb(db),
        rss_mb(pid),
        rss_mb(pid, "RssAnon"),
        mapped_mb(pid, "-shm"),
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], errfile: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        request = urllib.request.Request(url, data=b"{}", method="POST")
        try:
            urllib.request.urlopen(request, timeout=5).close()
            return
        except urllib.error.HTTPError:
            return  # it answers: a 4xx for the empty body is fine
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {errfile.read_text()[-2000:]}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def server(workdir: Path, db: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    errfile = workdir / "server.stderr"
    with errfile.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "callgate", "serve", "-c", str(workdir / "cfg.toml")),
                *("--port", str(port), "--store", f"sqlite:///{db}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=workdir,
        )
    try:
        wait_ready(f"http://127.0.0.1:{port}/mcp", proc, errfile)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def drive(
    script: Path, url: str, tool: str, calls: int, concurrency: int, first: int, timeout: float
) -> dict[str, str]:
    env = {
        **os.environ,
        "SOAK_QUOTA": str(calls),
        "SOAK_TOOL": tool,
        "SOAK_FIRST": str(first),
    }
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            "-d3600s",
            "--timeout",
            f"{timeout}s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,  # interrupted by its own script: the exit status says nothing
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("SOAK ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    head, _, bad = line.partition(" bad=")
    fields = dict(part.split("=", 1) for part in head.split()[1:])
    fields["bad"] = bad
    return fields


class Poller(threading.Thread):
    """The largest WAL and RSS seen while the load runs."""

    def __init__(self, pid: int, wal: Path) -> None:
        super().__init__(daemon=True)
        self.pid, self.wal = pid, wal
        self.max_wal = 0.0
        self.max_rss = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            with contextlib.suppress(OSError):
                self.max_wal = max(self.max_wal, mb(self.wal))
                self.max_rss = max(self.max_rss, rss_mb(self.pid))


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="callgate-soak-"))
    (workdir / "soak_tools.py").write_text(TOOLS.format(result_kb=args.result_kb))
    (workdir / "cfg.toml").write_text(CONFIG.format(result_ttl=args.result_ttl))
    script = workdir / "soak.lua"
    script.write_text(LUA)
    db = workdir / "soak.db"
    wal = Path(f"{db}-wal")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    tool = "blob" if args.result_kb else "echo"
    per_segment = max(args.calls // args.segments, 1)
    load = os.getloadavg()[0]
    print(
        f"## Soak: {args.calls:,} calls of `{tool}` at concurrency {args.concurrency} "
        f"(nproc {os.cpu_count()}, load {load:.2f})\n"
    )
    samples: list[Sample] = []
    totals = {"answered": 0, "not_ok": 0, "is_error": 0, "socket": 0}
    bad = ""
    latencies: list[tuple[int, int]] = []
    started = time.monotonic()
    with server(workdir, db, port) as proc:
        drive(script, url, tool, args.warmup, args.concurrency, 10**9, args.client_timeout)
        samples.append(sample(0, wal, db, proc.pid))
        poller = Poller(proc.pid, wal)
        poller.start()
        done_calls = 0
        for segment in range(args.segments):
            figures = drive(
                script, url, tool, per_segment, args.concurrency, done_calls, args.client_timeout
            )
            for key in totals:
                totals[key] += int(figures[key])
            bad = bad or figures["bad"]
            latencies.append((int(figures["p50_us"]), int(figures["p99_us"])))
            done_calls += int(figures["answered"])
            samples.append(sample(done_calls, wal, db, proc.pid))
            if args.verbose:
                s = samples[-1]
                print(
                    f"  segment {segment + 1}: {s.calls:,} calls, WAL {s.wal_mb:.1f} MB, "
                    f"db {s.db_mb:.1f} MB, RSS {s.rss_mb:.1f} MB",
                    file=sys.stderr,
                )
        poller.stop.set()
        poller.join()
        elapsed = time.monotonic() - started
    stderr = (workdir / "server.stderr").read_text(errors="replace").splitlines()
    problems = [
        line
        for line in stderr
        if any(w in line for w in ("ERROR", "WARNING", "Traceback", "locked", "destroyed"))
    ]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        finals = conn.execute("SELECT count(*) FROM audit WHERE phase = 'final'").fetchone()[0]
        not_ok = conn.execute(
            "SELECT count(*) FROM audit WHERE phase = 'final' AND status != 'ok'"
        ).fetchone()[0]
        stored = conn.execute("SELECT count(*) FROM results").fetchone()[0]

    print(
        "| after calls | WAL MB | database MB | server RSS MB | of which anonymous | of which WAL index |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    middle = len(samples) // 2
    for index, s in enumerate(samples):
        if args.all_rows or index in (0, middle, len(samples) - 1):
            print(
                f"| {s.calls:,} | {s.wal_mb:.1f} | {s.db_mb:.1f} | {s.rss_mb:.1f} "
                f"| {s.anon_mb:.1f} | {s.index_mb:.2f} |"
            )
    print()
    first, half, last = samples[0], samples[middle], samples[-1]
    growth = (last.rss_mb - half.rss_mb) * 1e6 / max(last.calls - half.calls, 1)
    p50 = sorted(p for p, _ in latencies)[len(latencies) // 2] / 1000
    p99 = max(p for _, p in latencies) / 1000
    print(
        f"- {last.calls:,} calls in {elapsed:.0f} s ({last.calls / elapsed:,.0f}/s with sampling); "
        f"p50 {p50:.1f} ms (median of segments), p99 {p99:.1f} ms (worst segment)"
    )
    print(
        f"- largest WAL seen under load (sampled every 0.5 s): {poller.max_wal:.1f} MB; "
        f"largest RSS: {poller.max_rss:.1f} MB"
    )
    print(
        f"- RSS from first to last sample: {last.rss_mb - first.rss_mb:+.1f} MB; over the "
        f"second half: {last.rss_mb - half.rss_mb:+.1f} MB ({growth:+.1f} bytes per call), "
        f"anonymous {last.anon_mb - half.anon_mb:+.1f} MB, "
        f"WAL index {last.index_mb - half.index_mb:+.2f} MB"
    )
    print(
        f"- errors: {totals['not_ok']} non-200, {totals['is_error']} isError, "
        f"{totals['socket']} socket errors" + (f"; first: {bad}" if bad.strip() else "")
    )
    print(
        f"- audit: {finals:,} final records, {not_ok} not ok, for {last.calls + args.warmup:,} "
        f"answered calls (warm-up included; each wrk run also hangs up on the calls in "
        f"flight when it stops, and these are recorded too); {stored:,} stored full results"
    )
    print(f"- server stderr: {len(problems)} warning/error lines")
    for line in problems[:10]:
        print(f"    {line[:300]}")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"- kept {workdir}")
    failed = totals["not_ok"] or totals["is_error"] or totals["socket"]
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls after the warm-up")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--segments", type=int, default=10, help="samples between wrk runs")
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument(
        "--result-kb", type=int, default=0, help="call a tool returning this many KB (0: echo)"
    )
    parser.add_argument(
        "--result-ttl", type=float, default=86400, help="the config's limits.result_ttl (s)"
    )
    parser.add_argument(
        "--client-timeout",
        type=float,
        default=60,
        help="wrk's --timeout (s): a shorter one hangs up on slow calls, as clients do",
    )
    parser.add_argument("--all-rows", action="store_true", help="print every sample")
    parser.add_argument("--verbose", action="store_true", help="each segment on stderr")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    sys.exit(main(parser.parse_args()))
