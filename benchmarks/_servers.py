"""Three MCP servers serving the same trivial tool, each in its own process.

Not a benchmark itself: ``serve_http.py``, ``startup.py`` and ``soak.py`` start
servers through :func:`start`. The subjects, each on uvicorn with the same
settings (loopback, asyncio loop, h11):

- ``callgate``: ``callgate serve -c cfg.toml`` exactly as the CLI starts it (a
  subprocess of ``python -m callgate``), a SQLite store, one async tool;
- ``bare``: the official SDK's ``MCPServer`` with the same tool;
- ``fastmcp``: FastMCP (PyPI ``fastmcp``) with the same tool, in its own venv
  under ``.cache/bench-fastmcp`` (created on first use: its pins are its own).

Every server has the tools ``echo(x: int) -> int`` and ``rows(n: int, x: int = 0) ->
list[dict]`` (``n`` records of about 100 bytes of JSON each: large results; ``x``
only makes calls differ, as callgate refuses a fourth identical call in a session). Run as a script,
this file serves ``bare`` or ``fastmcp``: ``python benchmarks/_servers.py bare PORT``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FASTMCP_VENV = ROOT / ".cache" / "bench-fastmcp"
KINDS = ("callgate", "bare", "fastmcp")
LABELS = {"callgate": "callgate serve", "bare": "bare SDK MCPServer", "fastmcp": "FastMCP"}
TOOL = "echo"

TOOLS_MODULE = '''\
from callgate import Toolbox

bench = Toolbox("bench", description="A trivial tool for measuring the server.")


@bench.tool(read_only=True, open_world=False)
async def echo(x: int) -> int:
    """Return x unchanged."""
    return x


@bench.tool(read_only=True, open_world=False)
async def rows(n: int, x: int = 0) -> list[dict[str, object]]:
    """Return n records (about 100 bytes of JSON each); x is ignored."""
    return make_rows(n)


def make_rows(n: int) -> list[dict[str, object]]:
    return [
        {"id": i, "name": f"record {i}", "status": "active", "amount": i * 1.5, "tags": ["a", "b"]}
        for i in range(n)
    ]
'''

CONFIG = """\
toolboxes = ["./bench_tools.py:bench"]

[mcp]
unprefixed = ["bench"]

# Large results are not cut: every server sends the same records.
[limits]
max_result_tokens = 2000000
"""

LATEST = "2026-07-28"
SESSIONS = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": LATEST,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def headers(protocol: str, name: str = TOOL) -> dict[str, str]:
    """The HTTP headers of a ``tools/call`` for ``protocol``."""
    out = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": protocol,
    }
    if protocol == LATEST:
        out |= {"mcp-method": "tools/call", "mcp-name": name}
    return out


def call_body(
    i: int, protocol: str = LATEST, name: str = TOOL, arguments: dict[str, object] | None = None
) -> dict[str, object]:
    params: dict[str, object] = {
        "name": name,
        "arguments": {"x": i} if arguments is None else arguments,
    }
    if protocol == LATEST:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


def post(
    url: str, body: dict[str, object], extra: dict[str, str]
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=extra, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def answered(text: str) -> bool:
    """True if ``text`` (JSON or SSE) holds a successful tools/call result."""
    squeezed = text.replace(" ", "")
    return '"result"' in squeezed and '"isError":true' not in squeezed


def open_session(url: str) -> str:
    """Initialize a 2025-11-25 session on ``url``; its ``mcp-session-id``."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": SESSIONS,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    status, got, text = post(url, init, headers(SESSIONS))
    session = {k.lower(): v for k, v in got.items()}.get("mcp-session-id")
    if status != 200 or not session:
        raise RuntimeError(f"initialize failed at {url}: {status} {text[:300]}")
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    post(url, note, headers(SESSIONS) | {"mcp-session-id": session})
    return session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fastmcp_python() -> Path:
    """The Python of FastMCP's own venv, made (with progress on stderr) if missing."""
    python = FASTMCP_VENV / "bin" / "python"
    if python.exists():
        return python
    print(f"creating {FASTMCP_VENV} with fastmcp (once; about a minute)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "fastmcp"], check=True)
    return python


def prepare(workdir: Path) -> Path:
    """Write callgate's tool module and config into ``workdir``; the config's path."""
    (workdir / "bench_tools.py").write_text(TOOLS_MODULE)
    config = workdir / "callgate.toml"
    config.write_text(CONFIG)
    return config


def command(kind: str, port: int, workdir: Path) -> list[str]:
    """How ``kind`` is started, serving on ``port``."""
    if kind == "callgate":
        store = f"sqlite:///{workdir / 'callgate.db'}"
        config = prepare(workdir)
        serve = [sys.executable, "-m", "callgate", "serve", "-c", str(config)]
        return [*serve, "--port", str(port), "--store", store]
    if kind == "bare":
        return [sys.executable, __file__, "bare", str(port)]
    if kind == "fastmcp":
        return [str(fastmcp_python()), __file__, "fastmcp", str(port)]
    raise ValueError(f"unknown server {kind!r}; one of {', '.join(KINDS)}")


@dataclass
class Running:
    kind: str
    url: str
    proc: subprocess.Popen[bytes]
    started: float
    """``time.perf_counter()`` just before the process was spawned."""
    ready: float
    """Seconds from spawning to the first successful ``tools/call`` answer."""
    label: str

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used so far (all its threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Poll with stateless ``tools/call`` requests until one is answered."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, _, text = post(url, call_body(1), headers(LATEST))
            if status == 200 and answered(text):
                return
            if status not in (404, 502, 503):
                # A server that speaks only session-based MCP: try the old way once up.
                session = open_session(url)
                status, _, text = post(
                    url, call_body(1, SESSIONS), headers(SESSIONS) | {"mcp-session-id": session}
                )
                if status == 200 and answered(text):
                    return
                raise RuntimeError(f"{url} answered {status}: {text[:300]}")
        except (ConnectionError, urllib.error.URLError, TimeoutError):
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server at {url} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server at {url} did not answer within {timeout} s")
        time.sleep(0.005)


def checkout(rev: str, into: Path) -> Path:
    """callgate's ``src`` at git revision ``rev`` (``git archive``), for a
    before/after run in one go; the directory to put first on ``PYTHONPATH``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


@contextlib.contextmanager
def start(
    kind: str,
    workdir: Path,
    *,
    log: Path | None = None,
    src: Path | None = None,
    label: str | None = None,
) -> Iterator[Running]:
    """Start ``kind``, wait for its first answer, stop it on exit.

    ``src``: for ``callgate``, run the code in that directory (see :func:`checkout`)
    instead of the installed package.
    """
    port = free_port()
    argv = command(kind, port, workdir)
    url = f"http://127.0.0.1:{port}/mcp"
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    errors = log.open("ab") if log is not None else subprocess.DEVNULL
    began = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.DEVNULL, stderr=errors, env=env)
    try:
        wait_ready(url, proc)
        ready = time.perf_counter() - began
        yield Running(kind, url, proc, began, ready, label or LABELS[kind])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log is not None and not isinstance(errors, int):
            errors.close()


def make_rows(n: int) -> list[dict[str, object]]:
    """The ``rows`` tool's result (the same as in TOOLS_MODULE, for the other servers)."""
    return [
        {"id": i, "name": f"record {i}", "status": "active", "amount": i * 1.5, "tags": ["a", "b"]}
        for i in range(n)
    ]


def _serve(kind: str, port: int) -> None:
    import uvicorn

    if kind == "bare":
        from mcp.server.mcpserver import MCPServer

        bare = MCPServer("bare")

        @bare.tool()
        async def echo(x: int) -> int:
            """Return x unchanged."""
            return x

        @bare.tool()
        async def rows(n: int, x: int = 0) -> list[dict[str, object]]:
            """Return n records (about 100 bytes of JSON each); x is ignored."""
            return make_rows(n)

        app = bare.streamable_http_app(host="127.0.0.1")
    else:
        from fastmcp import FastMCP  # type: ignore[import-not-found]

        fast = FastMCP("fastmcp")

        @fast.tool
        async def echo(x: int) -> int:
            """Return x unchanged."""
            return x

        @fast.tool
        async def rows(n: int, x: int = 0) -> list[dict[str, object]]:
            """Return n records (about 100 bytes of JSON each); x is ignored."""
            return make_rows(n)

        app = fast.http_app(path="/mcp")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
