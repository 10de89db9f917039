"""Real, third-party MCP servers for the gateway's tests, and configs naming them.

``scripts/upstreams.sh install`` puts them, at pinned versions, under .cache/
(once per test session; concurrent runs wait for one install):
@modelcontextprotocol/server-everything and server-filesystem (npm, run with
Node 22), mcp-server-time and mcp-server-git (PyPI, in a venv of their own).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from tests.npm import install

SCRIPT = Path(__file__).parents[2] / "scripts" / "upstreams.sh"


@dataclass(frozen=True)
class Servers:
    """Where the installed servers are (``scripts/upstreams.sh paths``)."""

    node: str
    everything: str
    filesystem: str
    time: str
    git: str


@pytest.fixture(scope="session", name="servers")
def servers_fixture() -> Servers:
    install(SCRIPT, "the upstream MCP servers")
    done = subprocess.run(
        ["bash", str(SCRIPT), "paths"], capture_output=True, text=True, check=True, timeout=60
    )
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return Servers(**{key: paths[key] for key in Servers.__dataclass_fields__})


def toml(value: object) -> str:
    """A TOML string, array or table value (JSON's syntax is TOML's for these)."""
    return json.dumps(value)


def upstream(name: str, command: str, args: Sequence[str] = (), extra: str = "") -> str:
    """An ``[[upstreams]]`` table for a stdio server (``extra``: more keys and tables)."""
    return (
        f"[[upstreams]]\nname = {toml(name)}\ncommand = {toml(command)}\n"
        f"args = {toml(list(args))}\nstartup_wait = 20\n{extra}\n"
    )


def everything(servers: Servers, extra: str = "") -> str:
    return upstream("everything", servers.node, [servers.everything, "stdio"], extra)


def time_server(servers: Servers, extra: str = "") -> str:
    return upstream("time", servers.time, ["--local-timezone", "UTC"], extra)


def filesystem(servers: Servers, root: Path, extra: str = "") -> str:
    return upstream("fs", servers.node, [servers.filesystem, str(root)], extra)


def git_server(servers: Servers, repo: Path, extra: str = "") -> str:
    return upstream("git", servers.git, ["--repository", str(repo)], extra)


def write_config(tmp_path: Path, *tables: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(tables), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def everything_over_http(
    servers: Servers, log: Path, port: int | None = None
) -> AsyncIterator[tuple[str, Process]]:
    """server-everything's Streamable HTTP transport on a loopback port (a free one by
    default); yields its URL and process, and stops it on exit."""
    port = port or free_port()
    with log.open("wb") as err:
        process = await anyio.open_process(
            [servers.node, servers.everything, "streamableHttp"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # it logs every request there
            stderr=err,
            env={**os.environ, "PORT": str(port)},
        )
    try:
        said = anyio.Path(log)
        with anyio.fail_after(20):
            while f"listening on port {port}" not in await said.read_text(errors="replace"):
                assert process.returncode is None, await said.read_text(errors="replace")
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


def children_running(path: str) -> list[int]:
    """Pids of this process's children whose command line has ``path`` (from /proc)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # it exited meanwhile
            continue
        # The command may have spaces or parentheses: the fields follow the last ')'.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and state != "Z" and path.encode() in cmdline:
            found.append(int(entry.name))
    return found


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def git_repo(path: Path) -> Path:
    """A repository with one commit (README.md) and an author configured."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Repo Owner")
    git(path, "config", "user.email", "owner@example.com")
    (path / "README.md").write_text("# demo\n", encoding="utf-8")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "Initial commit")
    return path
