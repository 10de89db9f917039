"""The Streamable HTTP edge: stalled and abandoned request bodies, a request id used
twice at once on a session, and session ids on error responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from callgate import Gate, Principal, Toolbox
from tests.mcp.serving import LEGACY, answer_of, open_session, rpc, serve_app, serve_http

pytestmark = pytest.mark.anyio

CALLER = Principal("mcp-client", tenant="acme")
# Served unprefixed: the tools' names are "wait" and "quick" whatever the separator.
SERVED = {"unprefixed": ["steps"]}


class Gates:
    """A tool that waits for the test, and one that answers at once."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.go = anyio.Event()

    def gate(self) -> Gate:
        box = Toolbox("steps")

        @box.tool(read_only=True)
        async def wait() -> str:
            """Wait for the test."""
            self.started.set()
            await self.go.wait()
            return "waited"

        @box.tool(read_only=True)
        def quick() -> str:
            """Answer at once."""
            return "quick"

        return Gate([box], store="memory://")


async def _partial_post(url: str, *, sent: bytes = b'{"jsonrpc":') -> anyio.abc.SocketStream:
    """A connection that has sent a POST's headers and the start of a 1,000-byte body."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    stream = await anyio.connect_tcp(parts.hostname, parts.port)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 1000\r\n\r\n"
    )
    await stream.send(head.encode() + sent)
    return stream


async def test_a_stalled_request_body_gets_408() -> None:
    async with serve_app(
        Gates().gate(), principal=CALLER, server_options=SERVED, body_timeout=0.5
    ) as url:
        with anyio.fail_after(10):
            received = b""
            async with await _partial_post(url) as stream:
                # Nothing more is sent: the server answers, then closes the connection.
                while True:
                    try:
                        received += await stream.receive()
                    except anyio.EndOfStream:
                        break
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout"
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"mcp-session-id" not in headers.lower()
    assert json.loads(body)["error"]["code"] == -32600


async def test_a_get_without_a_session_hands_out_no_session_id() -> None:
    async with (
        serve_app(Gates().gate(), principal=CALLER, server_options=SERVED) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            response = await http.get(url, headers={"accept": "text/event-stream"})
            # Whatever the error, no session was opened: an id handed out would 404.
            listed = await http.post(
                url,
                json=rpc(1, "tools/list", {}),
                headers={**LEGACY, "mcp-session-id": "any", "mcp-protocol-version": "2025-11-25"},
            )
    assert response.status_code == 400
    assert "mcp-session-id" not in response.headers
    assert listed.status_code == 404
    assert "mcp-session-id" not in listed.headers


async def test_a_request_id_in_flight_on_a_session_is_refused_and_the_first_completes() -> None:
    steps = Gates()
    async with (
        serve_app(steps.gate(), principal=CALLER, server_options=SERVED) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            headers = await open_session(http, url)
            first_answer: dict[str, Any] = {}

            async def first() -> None:
                call = rpc(5, "tools/call", {"name": "wait", "arguments": {}})
                first_answer.update(answer_of(await http.post(url, json=call, headers=headers)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await steps.started.wait()
                # The same id again, while the first is running.
                again = rpc(5, "tools/call", {"name": "quick", "arguments": {}})
                duplicate = await http.post(url, json=again, headers=headers)
                steps.go.set()
            # The id is free again once the first request is answered.
            reused = answer_of(
                await http.post(
                    url,
                    json=rpc(5, "tools/call", {"name": "quick", "arguments": {}}),
                    headers=headers,
                )
            )
    assert duplicate.status_code == 400
    error = duplicate.json()
    assert error["id"] == 5 and error["error"]["code"] == -32600
    assert "already in flight" in error["error"]["message"]
    assert first_answer["id"] == 5
    assert first_answer["result"]["structuredContent"] == {"result": "waited"}
    assert reused["result"]["structuredContent"] == {"result": "quick"}


@pytest.mark.slow
async def test_clients_that_disconnect_mid_body_are_one_log_line_each(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    async with serve_http("--store", store) as (url, process):
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(20):
            for _ in range(3):
                stream = await _partial_post(url)
                await stream.aclose()
            # Read the log until the three events are in it (whatever their form).
            while seen.count(b"disconnected") + seen.count(b"ClientDisconnect") < 3:
                seen += await process.stderr.receive()
            # Then the server still serves.
            async with httpx.AsyncClient() as http:
                response = await http.get(url, headers={"accept": "text/event-stream"})
            assert response.status_code == 400
    lines = seen.decode().splitlines()
    assert "Traceback" not in seen.decode()
    events = [line for line in lines if "disconnect" in line.lower()]
    assert len(events) == 3, lines
    assert all("before sending the whole request body" in line for line in events)
