"""``callgate serve`` as a real process for the MCP tests, and its audit trail."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import Process

from callgate import Gate
from callgate.store import AuditRecord

SERVE = [sys.executable, "-m", "callgate", "serve"]


@asynccontextmanager
async def serve_http(*args: str) -> AsyncIterator[tuple[str, Process]]:
    """``callgate serve ARGS`` on a free loopback port; yields its URL, stops it on exit."""
    process = await anyio.open_process([*SERVE, "--port", "0", *args])
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            async for chunk in process.stderr:
                seen += chunk
                if b"serving MCP at " in seen and seen.endswith(b"\n"):
                    break
        lines = [x for x in seen.decode(errors="replace").splitlines() if "serving MCP at " in x]
        # A StopIteration here would surface as a baffling "generator raised StopIteration".
        assert lines, f"callgate serve {' '.join(args)} stopped before serving:\n{seen.decode()}"
        line = lines[0]
        yield line.split("serving MCP at ", 1)[1].strip(), process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            await process.wait()
        await process.aclose()


async def audit_of(store: str) -> list[AuditRecord]:
    """The audit records a served gate left in ``store``."""
    async with Gate([], store=store) as gate:
        return await gate.audit()
