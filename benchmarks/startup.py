"""Start-up: how long until a command has done its job, as a user starts it.

Timed from spawning the process, in interleaved rounds (every subject once a
round, in a rotating order, so all share the machine's drift):

- ``import mcp``: ``python -c 'import mcp'``, the floor of anything on the SDK;
- ``callgate --help``: the console script printing its help;
- spawn to first answer, for three servers serving the same async ``echo``
  tool over Streamable HTTP (see ``_servers.py``): ``callgate serve -c
  cfg.toml`` as the CLI starts it (SQLite store; restarted on one database,
  and once a round on a new one, whose schema is then made), the bare SDK
  ``MCPServer`` and FastMCP (own venv under ``.cache/``). The time runs until the first
  ``tools/call`` is answered: a stateless 2026-07-28 request, polled every
  5 ms; a server that does not speak 2026-07-28 (FastMCP) gets a 2025-11-25
  ``initialize`` + ``notifications/initialized`` + ``tools/call`` once it
  answers at all, so its figure includes that handshake.

``--against SRC`` adds ``callgate --help`` and ``callgate serve`` run from
another checkout's ``src`` (``PYTHONPATH=SRC``, e.g. from ``git archive main``)
as the "before" figures, in the same rounds.

    python benchmarks/startup.py [--rounds 9] [--against /tmp/before/src] [--no-fastmcp]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _servers

TARGET_SERVE = 1.3
"""callgate serve's first answer within this multiple of the bare server's."""


def _run(argv: list[str], env: dict[str, str] | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - began


def _ready(kind: str, env_src: str | None, log: Path, workdir: Path | None = None) -> float:
    """Seconds from spawning ``kind`` to its first answer; ``workdir`` keeps its
    files (callgate's database) from one start to the next, else a new one."""
    saved = os.environ.get("PYTHONPATH")
    if env_src is not None:
        os.environ["PYTHONPATH"] = env_src
    try:
        with contextlib.ExitStack() as stack:
            if workdir is None:
                workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            return stack.enter_context(_servers.start(kind, workdir, log=log)).ready
    finally:
        if env_src is not None:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved


def subjects(args: argparse.Namespace, log: Path, keep: Path) -> dict[str, Callable[[], float]]:
    """What is timed. callgate serve restarts on one database (``keep``), as a
    deployed server does; "new database" is its first start, migrations included."""
    now = keep / "now"
    before = keep / "before"
    now.mkdir(exist_ok=True)
    before.mkdir(exist_ok=True)
    python = sys.executable
    script = str(Path(python).with_name("callgate"))
    out: dict[str, Callable[[], float]] = {
        "import mcp": lambda: _run([python, "-c", "import mcp"]),
        "callgate --help": lambda: _run([script, "--help"]),
    }
    if args.against:
        before_env = dict(os.environ, PYTHONPATH=args.against)
        out["callgate --help (before)"] = lambda: _run([script, "--help"], before_env)
    out["serve: bare SDK MCPServer"] = lambda: _ready("bare", None, log)
    out["serve: callgate serve"] = lambda: _ready("callgate", None, log, now)
    if args.against:
        out["serve: callgate serve (before)"] = lambda: _ready(
            "callgate", args.against, log, before
        )
    out["serve: callgate serve, new database"] = lambda: _ready("callgate", None, log)
    if args.against:
        out["serve: callgate serve, new database (before)"] = lambda: _ready(
            "callgate", args.against, log
        )
    if not args.no_fastmcp:
        out["serve: FastMCP"] = lambda: _ready("fastmcp", None, log)
    return out


def _cell(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):,.0f} ({min(ms):,.0f}-{max(ms):,.0f})"


def _ratio(values: list[float], base: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(values, base, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--against", metavar="SRC", help="another checkout's src directory")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    args = parser.parse_args()
    log = Path(tempfile.gettempdir()) / "callgate-startup-bench.log"
    if not args.no_fastmcp:
        _servers.fastmcp_python()  # made before the clock starts, with progress on stderr
    keep = Path(tempfile.mkdtemp(prefix="callgate-startup-"))
    table = subjects(args, log, keep)
    times: dict[str, list[float]] = {name: [] for name in table}
    for run in table.values():  # warm-up: file caches, .pyc files
        run()
    names = list(table)
    for index in range(args.rounds):
        print(f"round {index + 1}/{args.rounds}", file=sys.stderr)
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(table[name]())
    print(f"## Start-up: {args.rounds} interleaved rounds, ms median (min-max)\n")
    print("| what | ms | / import mcp | / bare server |")
    print("|---|---:|---:|---:|")
    base = times["import mcp"]
    bare = times["serve: bare SDK MCPServer"]
    for name, values in times.items():
        over_bare = f"{_ratio(values, bare):.2f}" if name.startswith("serve") else ""
        print(f"| {name} | {_cell(values)} | {_ratio(values, base):.2f} | {over_bare} |")
    share = _ratio(times["serve: callgate serve"], bare)
    verdict = "met" if share <= TARGET_SERVE else "missed"
    print(
        f"\ncallgate serve's first answer: {share:.2f}x the bare server's "
        f"(target {TARGET_SERVE}x): {verdict}"
    )


if __name__ == "__main__":
    main()
