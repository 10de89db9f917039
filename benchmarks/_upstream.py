"""The processes of the gateway benchmark: the upstream, callgate's gateway, FastMCP's proxy.

Not a benchmark itself: ``gateway.py`` starts them through :func:`spawn`.

- The **upstream** is the official SDK's ``MCPServer`` (callgate's venv), stateless
  and answering with JSON (no SSE stream), on uvicorn: the cheapest correct MCP
  server at hand, so it is not the bottleneck. One process serves ``--endpoints``
  servers at ``/u0/mcp``, ``/u1/mcp``, ... (one uvicorn, one event loop: 20
  upstreams fit on 2 cores), each with ``echo(text) -> text`` and ``--tools - 1``
  generated tools of the same shape (``tool_01`` ...).
- **callgate**: ``python -m callgate serve -c gateway.toml`` exactly as the CLI starts
  it, the upstreams in ``[[upstreams]]`` (trusted), a SQLite store, the principal
  from ``[principal]``.
- **SDK proxy, ungoverned**: the official SDK's ``MCPServer`` with one ``echo`` that
  forwards through one connected SDK ``Client`` (the same client callgate holds per
  upstream): what any gateway built on the SDK's server and client costs before it
  governs anything, the floor callgate's figures are read against.
- **FastMCP**: ``fastmcp.server.create_proxy(url)`` (FastMCP's current spelling of
  ``FastMCP.as_proxy``), served with ``http_app`` on uvicorn, from its own venv under
  ``.cache/bench-fastmcp`` (created on first use, fastmcp pinned to :data:`FASTMCP`).
  Given a URL, FastMCP opens a fresh client session for every request (its default,
  against context mixing); ``fastmcp-proxy-shared`` gives it one connected ``Client``
  instead, which it reuses for all requests (documented, with a warning).

    python benchmarks/_upstream.py upstream PORT [--endpoints N] [--tools M]
    python benchmarks/_upstream.py sdk-proxy PORT URL
    .cache/bench-fastmcp/bin/python benchmarks/_upstream.py fastmcp-proxy[-shared] PORT URL
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FASTMCP_VENV = ROOT / ".cache" / "bench-fastmcp"
FASTMCP = "4.2.3"
"""The FastMCP release measured (its proxy API moved between major versions)."""

GATEWAY_CONFIG = """\
[principal]
user = "bench"
tenant = "bench"

[limits]
max_result_tokens = 2000000

[discovery]
mode = "direct"
"""

UPSTREAM_TABLE = """
[[upstreams]]
name = "{name}"
url = "{url}"
trust = "trusted"
startup_wait = 30
connect_timeout = 30
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process ``pid`` has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fastmcp_python() -> Path | str:
    """FastMCP's venv's Python, made or brought to :data:`FASTMCP` if needed; a
    string saying why not if it cannot be made (no network, no wheel)."""
    python = FASTMCP_VENV / "bin" / "python"
    try:
        if not python.exists():
            print(f"creating {FASTMCP_VENV} (once; about a minute)", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
        probe = "import importlib.metadata as m; print(m.version('fastmcp'))"
        have = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
        if have.stdout.strip() != FASTMCP:
            print(f"installing fastmcp=={FASTMCP} into {FASTMCP_VENV}", file=sys.stderr)
            pip = [python, "-m", "pip", "install", "-q", f"fastmcp=={FASTMCP}"]
            subprocess.run(pip, check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot make FastMCP's venv at {FASTMCP_VENV}: {type(exc).__name__}: {exc}"
    return python


def gateway_config(workdir: Path, upstreams: dict[str, str], name: str = "gateway") -> Path:
    """A ``callgate serve`` config putting ``upstreams`` (name -> URL) behind the gate."""
    text = GATEWAY_CONFIG + "".join(
        UPSTREAM_TABLE.format(name=key, url=url) for key, url in upstreams.items()
    )
    path = workdir / f"{name}.toml"
    path.write_text(text)
    return path


@dataclass
class Process:
    """A server under test, in its own process."""

    label: str
    url: str
    proc: subprocess.Popen[bytes]

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)


@contextlib.contextmanager
def spawn(
    label: str, argv: list[str], url: str, *, log: Path, cwd: Path, ready: Any
) -> Iterator[Process]:
    """Start ``argv``; wait until ``ready(url)`` returns true (60 s at most); stop it on exit."""
    with log.open("ab") as errors:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            deadline = time.monotonic() + 60
            while not ready(url):
                if proc.poll() is not None:
                    raise RuntimeError(f"{label} exited with {proc.returncode}: see {log}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{label} did not answer at {url} within 60 s: see {log}")
                time.sleep(0.05)
            yield Process(label, url, proc)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# The servers, run as this script ---------------------------------------------------
def _upstream_app(endpoints: int, tools: int) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    from starlette.applications import Starlette

    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def echo(text: str) -> str:
        """Say the text back."""
        return text

    servers = []
    routes = []
    for index in range(endpoints):
        server = MCPServer(f"upstream-{index}")
        server.add_tool(echo, name="echo", annotations=read)
        for number in range(1, tools):
            server.add_tool(
                echo,
                name=f"tool_{number:02d}",
                description=f"Generated tool {number}: says the text back.",
                annotations=read,
            )
        app = server.streamable_http_app(
            streamable_http_path=f"/u{index}/mcp", stateless_http=True, json_response=True
        )
        servers.append(server)
        routes.extend(app.routes)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    return Starlette(routes=routes, lifespan=lifespan)


async def _sdk_proxy(url: str, port: int) -> None:
    """The floor of an SDK-built gateway: the official SDK's ``MCPServer`` (stateless,
    JSON responses) whose ``echo`` forwards to ``url`` through one connected SDK
    ``Client``, exactly the client callgate's gateway holds per upstream, with no
    governance at all (no validation, policy, audit)."""
    import uvicorn
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    async with Client(streamable_http_client(url), mode="auto", cache=None) as client:
        server = MCPServer("sdk-proxy")

        async def echo(text: str) -> str:
            """Say the text back (asks the upstream)."""
            result = await client.call_tool("echo", {"text": text})
            block = result.content[0]
            return block.text if hasattr(block, "text") else ""

        server.add_tool(echo, name="echo", annotations=ToolAnnotations(read_only_hint=True))
        app = server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()


async def _fastmcp_proxy(url: str, port: int, shared: bool) -> None:
    """FastMCP's proxy of ``url``: by default (a URL target) each request gets a fresh
    client session; ``shared``: one connected client serves every request."""
    import uvicorn
    from fastmcp import Client  # type: ignore[import-not-found]
    from fastmcp.server import create_proxy  # type: ignore[import-not-found]

    async with contextlib.AsyncExitStack() as stack:
        target: Any = url
        if shared:
            target = await stack.enter_async_context(Client(url))
        app = create_proxy(target, name="fastmcp-proxy").http_app(path="/mcp")
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()


def _main() -> None:
    parser = argparse.ArgumentParser()
    kinds = ["upstream", "sdk-proxy", "fastmcp-proxy", "fastmcp-proxy-shared"]
    parser.add_argument("kind", choices=kinds)
    parser.add_argument("port", type=int)
    parser.add_argument("url", nargs="?")
    parser.add_argument("--endpoints", type=int, default=1)
    parser.add_argument("--tools", type=int, default=1)
    args = parser.parse_args()
    if args.kind == "upstream":
        import uvicorn

        app = _upstream_app(args.endpoints, args.tools)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    elif args.kind == "sdk-proxy":
        import asyncio

        asyncio.run(_sdk_proxy(args.url, args.port))
    else:
        import asyncio

        shared = args.kind == "fastmcp-proxy-shared"
        asyncio.run(_fastmcp_proxy(args.url, args.port, shared))


if __name__ == "__main__":
    _main()
