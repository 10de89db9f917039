"""Two ``callgate serve`` processes on one PostgreSQL database, as a test's gateway.

Each test gets a database of its own (so tests run in parallel), a ledger file
the served tools append every side effect to (:mod:`tests.replicas.toolbox`),
and the replicas started from one config file, as a deployment would.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import asyncpg
import pytest
from anyio.abc import Process
from sqlalchemy.engine import make_url

from callgate.cli._replicas import SECRET_ENV
from callgate.store import AuditRecord
from tests.mcp.serving import started
from tests.pg import POSTGRES_URL
from tests.replicas.toolbox import LEDGER_ENV

SERVE = [sys.executable, "-m", "callgate", "serve"]
TOOLBOX = Path(__file__).with_name("toolbox.py")
REQUESTER = ["--principal", "alice@acme.example", "--tenant", "acme"]
REQUESTER_SCOPES = ["--scopes", "rep:read,rep:write"]

CONFIG = f"""\
toolboxes = ["{TOOLBOX}:toolboxes"]

[policy]
default = "allow"
approvers = {{ roles = ["approver"] }}

[[policy.rules]]
name = "large-payments-need-a-second-person"
effect = "require_approval"
tools = ["rep.pay"]
when = "args.amount > 1000"
reason = "payments over 1000 need a second person"

[[policy.rules]]
name = "medium-payments-need-a-confirmation"
effect = "require_approval"
tools = ["rep.pay"]
when = "args.amount > 100 && args.amount <= 1000"
reason = "payments over 100 need the requester's confirmation"
approved_by = "requester"
"""


def _admin_dsn() -> str:
    return make_url(POSTGRES_URL).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for one test; its URL (dropped afterwards)."""
    name = f"callgate_replicas_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(_admin_dsn())
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(_admin_dsn())
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


@dataclass
class Replica:
    """One ``callgate serve`` process: its MCP URL and the process."""

    url: str
    process: Process
    stderr: list[bytes] = field(default_factory=list)

    def kill(self) -> None:
        """SIGKILL: the process dies at once, nothing cleaned up (a crash)."""
        self.process.send_signal(signal.SIGKILL)


@dataclass
class Deployment:
    """The files every replica of a test shares."""

    store: str
    config: Path
    ledger: Path
    env: dict[str, str]

    def cli(self, *args: str) -> list[str]:
        """A ``callgate`` command line on this deployment's store and config."""
        return [sys.executable, "-m", "callgate", *args, "--config", str(self.config)]


@pytest.fixture
def deployment(database: str, tmp_path: Path) -> Deployment:
    config = tmp_path / "callgate.toml"
    config.write_text(CONFIG)
    ledger = tmp_path / "ledger.txt"
    env = {
        **os.environ,
        LEDGER_ENV: str(ledger),
        "CALLGATE_STORE": database,
        SECRET_ENV: secrets.token_urlsafe(32),
    }
    return Deployment(store=database, config=config, ledger=ledger, env=env)


async def _drain(process: Process, sink: list[bytes]) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        sink.append(chunk)


@asynccontextmanager
async def replicas(
    deployment: Deployment,
    count: int = 2,
    *,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[list[Replica]]:
    """``count`` ``callgate serve`` processes on the deployment, started at once
    (they migrate the empty database together); stopped (SIGTERM) on exit."""
    argv = [
        *SERVE,
        "--port",
        "0",
        "--config",
        str(deployment.config),
        *REQUESTER,
        *REQUESTER_SCOPES,
        *args,
    ]
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        running: list[Replica] = []

        async def start() -> None:
            process = await anyio.open_process(argv, env={**deployment.env, **(env or {})})
            stack.push_async_callback(_stop, process)
            url, seen = await started(process, timeout=60)
            replica = Replica(url, process, [seen.encode()])
            tg.start_soon(_drain, process, replica.stderr)
            running.append(replica)

        async with anyio.create_task_group() as starting:
            for _ in range(count):
                starting.start_soon(start)
        try:
            yield running
        finally:
            tg.cancel_scope.cancel()


async def _stop(process: Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with anyio.fail_after(20):
        await process.wait()
    await process.aclose()


def finals(records: Sequence[AuditRecord], tool: str | None = None) -> list[AuditRecord]:
    """The ``final`` audit records (one per call), of ``tool`` if given; each
    call id at most once, whichever replica served the call."""
    kept = [r for r in records if r.phase == "final" and (tool is None or r.tool == tool)]
    ids = [r.call_id for r in kept]
    assert len(ids) == len(set(ids)), f"a call recorded twice: {ids}"
    return kept


def ran(records: Sequence[AuditRecord], tool: str) -> list[AuditRecord]:
    """The final records of ``tool``'s calls that ran it (not replays of another's)."""
    return [r for r in finals(records, tool) if r.outcome == "ok" and "replay_of" not in r.detail]
