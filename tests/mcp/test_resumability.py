"""Resumable SSE streams (2025-11-25 Streamable HTTP): priming events, ``retry``,
replay after ``Last-Event-ID`` on the same session only, and the store's bounds.

The HTTP tests serve a real app with uvicorn in this process (so a tool can wait
on an event the test sets) and speak raw HTTP with httpx, to see the SSE fields.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage

from callgate import Gate, Principal, Toolbox
from callgate.contract import ToolContext
from callgate.mcp import MemoryEventStore
from tests.mcp.serving import LEGACY, MODERN_META, events_of, open_session, rpc, serve_app

pytestmark = pytest.mark.anyio

CALLER = Principal("mcp-client", tenant="acme")


@dataclass
class Steps:
    """Lets the test decide when the tool's second step runs."""

    go: anyio.Event = field(default_factory=anyio.Event)


class WatchedStore(MemoryEventStore):
    """The real store, telling the test when a response has been stored."""

    def __init__(self, **bounds: Any) -> None:
        super().__init__(**bounds)
        self.responded = anyio.Event()

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = await super().store_event(stream_id, message)
        if isinstance(message, types.JSONRPCResponse) and message.id == 1:
            self.responded.set()
        return event_id


def steps_gate(steps: Steps) -> Gate:
    box = Toolbox("steps")

    @box.tool(read_only=True)
    async def two_steps(ctx: ToolContext) -> str:
        """Log a step, wait for the test, log another, finish."""
        await ctx.log("info", "step 1")
        await steps.go.wait()
        await ctx.log("info", "step 2")
        return "done"

    @box.tool(read_only=True)
    def quick() -> str:
        """Answer at once."""
        return "quick"

    return Gate([box], store="memory://")


@asynccontextmanager
async def served(gate: Gate, **app_options: Any) -> AsyncIterator[str]:
    """The gate's MCP app on a loopback port (uvicorn, in process); yields the URL."""
    async with serve_app(gate, principal=CALLER, **app_options) as url:
        yield url


async def read_until(response: httpx.Response, *, log: str | None = None) -> list[dict[str, str]]:
    """The stream's events until a log message with ``log`` (or the stream's end)."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        lines.append(line)
        if log is not None and line.startswith("data: ") and log in line:
            break
    return events_of(lines)


def logged(events: list[dict[str, str]]) -> list[str]:
    datas = [json.loads(e["data"]) for e in events if e.get("data")]
    return [d["params"]["data"] for d in datas if d.get("method") == "notifications/message"]


def results(events: list[dict[str, str]]) -> list[Any]:
    datas = [json.loads(e["data"]) for e in events if e.get("data")]
    return [d["result"]["structuredContent"] for d in datas if "result" in d]


CALL = rpc(1, "tools/call", {"name": "steps__two_steps", "arguments": {}})


async def test_a_post_stream_opens_with_a_priming_event_and_retry() -> None:
    steps = Steps()
    steps.go.set()
    async with served(steps_gate(steps)) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            headers = await open_session(http, url)
            async with http.stream("POST", url, json=CALL, headers=headers) as response:
                events = await read_until(response)
    priming, *rest = events
    assert priming["data"] == "" and priming["retry"] == "1000" and priming["id"]
    assert logged(rest) == ["step 1", "step 2"]
    assert results(rest) == [{"result": "done"}]
    ids = [e["id"] for e in events]
    assert len(set(ids)) == len(ids) == 4
    # One unguessable token per stream, then the event's number.
    assert {i.rpartition(":")[0] for i in ids} == {priming["id"].rpartition(":")[0]}
    assert len(priming["id"].rpartition(":")[0]) >= 22


async def test_a_dropped_stream_resumes_with_only_the_missed_events() -> None:
    steps = Steps()
    store = WatchedStore()
    async with served(steps_gate(steps), event_store=store) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            headers = await open_session(http, url)
            async with http.stream("POST", url, json=CALL, headers=headers) as response:
                seen = await read_until(response, log="step 1")
            # The client's connection is gone; the tool goes on and finishes.
            steps.go.set()
            await store.responded.wait()
            resume = {**headers, "accept": "text/event-stream", "last-event-id": seen[-1]["id"]}
            async with http.stream("GET", url, headers=resume) as response:
                assert response.status_code == 200
                missed = await read_until(response)  # ends after the response
    assert logged(seen) == ["step 1"]
    assert logged(missed) == ["step 2"]
    assert results(missed) == [{"result": "done"}]
    assert all(e.get("data") for e in missed)  # neither the priming event nor step 1 again


async def test_an_event_id_replays_only_on_its_own_session() -> None:
    steps = Steps()
    steps.go.set()
    async with served(steps_gate(steps)) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            alice = await open_session(http, url)
            async with http.stream("POST", url, json=CALL, headers=alice) as response:
                first_id = (await read_until(response))[0]["id"]
            bob = await open_session(http, url)
            # The same request id on another session is another stream.
            async with http.stream("POST", url, json=CALL, headers=bob) as response:
                bobs_id = (await read_until(response))[0]["id"]
            replays: list[list[dict[str, str]]] = []
            for headers, last in ((bob, first_id), (alice, "nope:1"), (alice, first_id)):
                resume = {**headers, "accept": "text/event-stream", "last-event-id": last}
                async with http.stream("GET", url, headers=resume) as response:
                    assert response.status_code == 200
                    replays.append(await read_until(response))
    others, unknown, own = replays
    assert bobs_id.rpartition(":")[0] != first_id.rpartition(":")[0]
    assert others == [] and unknown == []
    assert logged(own) == ["step 1", "step 2"] and results(own) == [{"result": "done"}]


async def test_a_deleted_session_leaves_no_events() -> None:
    steps = Steps()
    steps.go.set()
    store = MemoryEventStore()
    async with served(steps_gate(steps), event_store=store) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            headers = await open_session(http, url)
            async with http.stream("POST", url, json=CALL, headers=headers) as response:
                await read_until(response)
            held = store.stored_events
            deleted = await http.delete(url, headers=headers)
    assert held >= 4  # at least the call's priming event, two logs and its response
    assert deleted.status_code == 200
    assert (store.stored_events, store.stored_bytes) == (0, 0)


async def test_2026_07_28_requests_are_stateless_and_store_nothing() -> None:
    store = MemoryEventStore()
    headers = {**LEGACY, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    call = rpc(3, "tools/call", {"name": "steps__quick", "arguments": {}, "_meta": MODERN_META})
    async with (
        served(steps_gate(Steps()), event_store=store) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            response = await http.post(
                url, json=call, headers={**headers, "mcp-name": "steps__quick"}
            )
    if response.headers["content-type"].startswith("text/event-stream"):
        answer = json.loads(events_of(response.text.splitlines())[-1]["data"])
    else:
        answer = response.json()
    assert answer["result"]["structuredContent"] == {"result": "quick"}
    assert "mcp-session-id" not in response.headers
    assert store.stored_events == 0


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_works_against_resumable_streams(mode: str) -> None:
    steps = Steps()
    steps.go.set()
    async with served(steps_gate(steps)) as url:
        with anyio.fail_after(10):
            async with Client(url, mode=mode) as client:
                result = await client.call_tool("steps__two_steps", {})
    assert not result.is_error
    assert result.structured_content == {"result": "done"}


async def test_resumability_can_be_turned_off() -> None:
    steps = Steps()
    steps.go.set()
    async with (
        served(steps_gate(steps), resumable=False) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            headers = await open_session(http, url)
            async with http.stream("POST", url, json=CALL, headers=headers) as response:
                events = await read_until(response)
    assert results(events) == [{"result": "done"}]
    assert not any("id" in e or "retry" in e for e in events)


# --- the store on its own (no middleware: one session space) ---


def note(text: str) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": text}
    )


def answer(id_: int) -> types.JSONRPCResponse:
    return types.JSONRPCResponse(jsonrpc="2.0", id=id_, result={"n": id_})


async def replay(store: MemoryEventStore, last: str) -> tuple[str | None, list[EventMessage]]:
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    return await store.replay_events_after(last, send), sent


def texts(sent: list[EventMessage]) -> list[Any]:
    out: list[Any] = []
    for event in sent:
        message = event.message
        if isinstance(message, types.JSONRPCNotification):
            out.append((message.params or {})["data"])
        elif isinstance(message, types.JSONRPCResponse):
            out.append(message.result)
    return out


async def test_the_store_replays_after_the_id_and_says_when_a_stream_is_complete() -> None:
    store = MemoryEventStore()
    priming = await store.store_event("1", None)
    first = await store.store_event("1", note("a"))
    await store.store_event("1", note("b"))
    stream, sent = await replay(store, first)
    assert (stream, texts(sent)) == ("1", ["b"])  # still running: the SDK goes on tailing it
    last = await store.store_event("1", answer(1))
    stream, sent = await replay(store, priming)
    assert (stream, texts(sent)) == (None, ["a", "b", {"n": 1}])  # complete: the GET ends
    assert [e.event_id for e in sent][-1] == last
    assert await replay(store, "unknown:1") == (None, [])
    assert await replay(store, "garbage") == (None, [])
    # The same request id again, once answered, is a new stream: old ids replay nothing.
    fresh = await store.store_event("1", None)
    assert fresh.rpartition(":")[0] != priming.rpartition(":")[0]
    assert await replay(store, priming) == (None, [])


async def test_the_standalone_stream_is_never_complete() -> None:
    store = MemoryEventStore()
    first = await store.store_event(GET_STREAM_KEY, note("listed"))
    await store.store_event(
        GET_STREAM_KEY,
        types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=-1, message="x")),
    )
    stream, sent = await replay(store, first)
    assert stream == GET_STREAM_KEY and len(sent) == 1


async def test_the_store_caps_events_per_stream_oldest_first() -> None:
    store = MemoryEventStore(max_events_per_stream=3)
    ids = [await store.store_event("7", note(str(i))) for i in range(6)]
    assert store.stored_events == 3
    stream, sent = await replay(store, ids[0])  # evicted, but its stream is known
    assert (stream, texts(sent)) == ("7", ["3", "4", "5"])
    _, sent = await replay(store, ids[4])
    assert texts(sent) == ["5"]


async def test_the_store_caps_events_and_bytes_in_total() -> None:
    store = MemoryEventStore(max_events=4)
    old = await store.store_event("1", note("old"))
    for stream in ("2", "3", "4", "5"):
        await store.store_event(stream, note(stream))
    assert store.stored_events == 4
    assert await replay(store, old) == (None, [])  # its stream was emptied and dropped

    small = MemoryEventStore(max_bytes=300)
    await small.store_event("1", note("x" * 100))
    await small.store_event("1", note("y" * 100))
    assert small.stored_events == 1 and small.stored_bytes <= 300
    huge = await small.store_event("2", note("z" * 1000))
    assert (small.stored_events, small.stored_bytes > 300) == (1, True)  # the newest stays
    await small.store_event("2", answer(2))
    _, sent = await replay(small, huge)
    assert texts(sent) == [{"n": 2}]


async def test_idle_streams_expire() -> None:
    now = [0.0]
    store = MemoryEventStore(ttl=60, clock=lambda: now[0])
    idle = await store.store_event("1", note("idle"))
    now[0] = 30.0
    busy = await store.store_event("2", note("busy"))
    now[0] = 61.0
    assert await replay(store, idle) == (None, [])
    stream, _ = await replay(store, busy)
    assert stream == "2"
    assert store.stored_events == 1


def test_bounds_must_be_positive() -> None:
    for bounds in ({"max_events": 0}, {"max_events_per_stream": -1}, {"ttl": 0}):
        with pytest.raises(ValueError, match="positive"):
            MemoryEventStore(**bounds)  # type: ignore[arg-type]
