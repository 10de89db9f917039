"""Serving for the MCP tests: ``callgate serve`` as a real process, a gate's app
on a loopback port in this process, raw HTTP helpers, and the audit trail."""

from __future__ import annotations

import json
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
import uvicorn
from anyio.abc import Process

from callgate import Gate, Principal
from callgate.mcp import MCP_PATH, build_server, streamable_http_app
from callgate.store import AuditRecord

SERVE = [sys.executable, "-m", "callgate", "serve"]


async def started(process: Process, timeout: float = 30) -> tuple[str, str]:
    """Wait for a ``callgate serve`` process to serve: (its MCP URL, what it printed
    on stderr until then). Fails with that output if it stops first."""
    assert process.stderr is not None
    seen = b""
    with anyio.fail_after(timeout):
        async for chunk in process.stderr:
            seen += chunk
            if b"serving MCP at " in seen and seen.endswith(b"\n"):
                break
    text = seen.decode(errors="replace")
    lines = [x for x in text.splitlines() if "serving MCP at " in x]
    # A StopIteration here would surface as a baffling "generator raised StopIteration".
    assert lines, f"callgate serve stopped before serving:\n{text}"
    return lines[0].split("serving MCP at ", 1)[1].strip(), text


@asynccontextmanager
async def serve_http(*args: str) -> AsyncIterator[tuple[str, Process]]:
    """``callgate serve ARGS`` on a free loopback port; yields its URL, stops it on exit."""
    process = await anyio.open_process([*SERVE, "--port", "0", *args])
    try:
        url, _ = await started(process)
        yield url, process
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


LEGACY = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class _Uvicorn(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:  # pytest owns the signals
        yield


@asynccontextmanager
async def serve_asgi(app: Any, path: str = MCP_PATH) -> AsyncIterator[str]:
    """An ASGI app on a free loopback port (uvicorn in this process, its lifespan
    run); yields the URL of ``path`` there and stops the server on exit."""
    sock = socket.create_server(("127.0.0.1", 0))
    uv = _Uvicorn(
        uvicorn.Config(
            app, log_level="warning", lifespan="on", ws="none", timeout_graceful_shutdown=5
        )
    )
    async with anyio.create_task_group() as tg:
        # The socket listens already: requests wait in its backlog until uvicorn accepts.
        tg.start_soon(uv.serve, [sock])
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
        finally:
            uv.should_exit = True


@asynccontextmanager
async def serve_app(
    gate: Gate,
    *,
    principal: Principal,
    server_options: dict[str, Any] | None = None,
    **app_options: Any,
) -> AsyncIterator[str]:
    """The gate's MCP app on a loopback port (uvicorn, in process); yields the URL.

    ``server_options`` go to ``build_server``, the rest to ``streamable_http_app``.
    """
    server = build_server(gate, principal=principal, **(server_options or {}))
    async with gate, serve_asgi(streamable_http_app(server, **app_options)) as url:
        yield url


def rpc(id_: int | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id_ is not None:
        message["id"] = id_
    return message


async def open_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a 2025-11-25 session (log level info); its request headers."""
    init = rpc(
        0,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    response = await http.post(url, json=init, headers=LEGACY)
    assert response.status_code == 200
    headers = {
        **LEGACY,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    await http.post(url, json=rpc(None, "notifications/initialized"), headers=headers)
    await http.post(url, json=rpc(9, "logging/setLevel", {"level": "info"}), headers=headers)
    return headers


def events_of(lines: list[str]) -> list[dict[str, str]]:
    """SSE lines -> events (field -> value)."""
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in lines:
        if not line:
            if current:
                events.append(current)
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = value.removeprefix(" ")
    if current:
        events.append(current)
    return events


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response (JSON, or the last event of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [e["data"] for e in events_of(response.text.splitlines()) if e.get("data")]
        message: dict[str, Any] = json.loads(datas[-1])
        return message
    answer: dict[str, Any] = response.json()
    return answer
