"""An upstream's answer over its ``max_answer_bytes`` is refused while it is read:
the call answers at once saying how large it was, the limit and what to do, and
the upstream's session goes on serving.

Over stdio the upstream is tests/gateway/huge_server.py (it writes 100 MB without
holding it); over HTTP the official SDK's server on a loopback port, behind an
ASGI layer that answers the ``flood`` tools' calls with bodies of any size.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from callgate import Gate, Principal
from callgate.config import ConfigError, load_config
from callgate.errors import ErrorKind
from callgate.gateway import upstream_toolboxes
from callgate.gateway._stdio import KEEP, LineSplitter, Overlong, answer_id
from callgate.mcp import build_server
from callgate.runtime.envelope import Envelope
from callgate.store import MemoryStore
from tests.mcp.serving import serve_asgi

pytestmark = pytest.mark.anyio

HUGE = Path(__file__).with_name("huge_server.py")
ALICE = Principal("alice", tenant="acme")
MB100 = 100 * 1024 * 1024
DEFAULT_LIMIT = 32 * 1024 * 1024

GateOf = Callable[..., Any]


@pytest.fixture
def gate_of(tmp_path: Path) -> GateOf:
    @asynccontextmanager
    async def make(table: str) -> AsyncIterator[Gate]:
        path = tmp_path / f"gw-{uuid.uuid4().hex[:6]}.toml"
        path.write_text(
            f'[[upstreams]]\nname = "huge"\ntrust = "trusted"\nstartup_wait = 20\n{table}\n',
            encoding="utf-8",
        )
        cfg = load_config(path)
        async with Gate(upstream_toolboxes(cfg.upstreams, cfg.label), store=MemoryStore()) as gate:
            yield gate

    return make


def stdio(extra: str = "") -> str:
    return f'command = "{sys.executable}"\nargs = ["{HUGE}"]\nprotocol = "2025-11-25"\n{extra}'


def refused(env: Envelope, kind: ErrorKind, seen: int | None, limit: int) -> str:
    """The Envelope's message, checked to say what the caller must know: the
    upstream, how large the answer was at least (``None``: more than the limit),
    the limit and its key."""
    assert env.status == "error" and env.error is not None, env
    assert env.error.kind is kind, env.error
    message = env.error.message_for_model
    assert "'huge'" in message
    found = re.search(r"at least ([\d,]+) bytes", message)
    assert found is not None, message
    if seen is None:
        assert int(found[1].replace(",", "")) > limit
    else:
        assert found[1] == f"{seen:,}"
    assert f"over its limit of {limit:,} bytes (max_answer_bytes)" in message
    return message


async def still_serving(gate: Gate) -> None:
    """The same session answers the next call: nothing was restarted."""
    env = await gate.call("huge.fill", {"size": 1000}, principal=ALICE)
    assert env.status == "ok", env
    (box,) = gate.upstreams()
    connection = box.connection  # type: ignore[attr-defined]
    assert connection.state.value == "ready"
    assert connection.stats.connects == 1


# stdio ------------------------------------------------------------------------------
async def test_a_100_mb_answer_is_refused_while_read_and_the_next_call_works(
    gate_of: GateOf,
) -> None:
    async with gate_of(stdio()) as gate:
        env = await gate.call("huge.fill", {"size": MB100}, principal=ALICE)
        refused(env, ErrorKind.CONSTRUCTION, MB100, DEFAULT_LIMIT)
        assert env.error is not None and env.error.next_step is not None
        assert env.error.next_step.startswith("Ask for less")
        await still_serving(gate)


async def test_an_answer_of_the_limit_gets_through_and_one_byte_more_does_not(
    gate_of: GateOf,
) -> None:
    async with gate_of(stdio("max_answer_bytes = 200000")) as gate:
        env = await gate.call("huge.fill", {"size": 200_000}, principal=ALICE)
        assert env.status == "ok", env
        env = await gate.call("huge.fill", {"size": 200_001}, principal=ALICE)
        refused(env, ErrorKind.CONSTRUCTION, 200_001, 200_000)
        await still_serving(gate)


async def test_the_id_is_found_at_the_end_as_the_typescript_sdk_writes_it(
    gate_of: GateOf,
) -> None:
    async with gate_of(stdio("max_answer_bytes = 100000")) as gate:
        env = await gate.call("huge.fill", {"size": 3_000_000, "order": "tail"}, principal=ALICE)
        refused(env, ErrorKind.CONSTRUCTION, 3_000_000, 100_000)
        await still_serving(gate)


async def test_a_resource_read_too_large_says_so_and_the_next_call_works(
    gate_of: GateOf,
) -> None:
    async with gate_of(stdio("max_answer_bytes = 100000")) as gate:
        async with Client(build_server(gate, principal=ALICE), mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource("huge+huge://big")
        message = str(caught.value)
        assert "'huge' answered too much to read huge://big" in message
        assert "at least 3,000,000 bytes, over its limit of 100,000 bytes" in message
        assert "callgate:" not in message  # the transport's own text stays in the log
        await still_serving(gate)


async def test_a_writes_answer_too_large_is_an_unknown_outcome(gate_of: GateOf) -> None:
    async with gate_of(stdio("max_answer_bytes = 100000")) as gate:
        env = await gate.call("huge.fill_write", {"size": 3_000_000}, principal=ALICE)
        message = refused(env, ErrorKind.UNKNOWN_OUTCOME, 3_000_000, 100_000)
        assert "ran this call" in message
        assert env.error is not None and env.error.next_step is not None
        assert env.error.next_step.startswith("Do not retry")
        await still_serving(gate)


async def test_a_line_whose_id_cannot_be_told_is_dropped_and_the_call_times_out(
    gate_of: GateOf, caplog: pytest.LogCaptureFixture
) -> None:
    extra = "max_answer_bytes = 100000\n[upstreams.tools.fill]\ntimeout = 0.5"
    async with gate_of(stdio(extra)) as gate:
        with caplog.at_level(logging.WARNING, logger="callgate.gateway._stdio"):
            env = await gate.call(
                "huge.fill", {"size": 3_000_000, "order": "middle"}, principal=ALICE
            )
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT, env
        assert "answers no request it can be matched to: dropped" in caplog.text
        await still_serving(gate)


async def test_an_oversize_notification_is_dropped_and_the_call_answers(
    gate_of: GateOf, caplog: pytest.LogCaptureFixture
) -> None:
    async with gate_of(stdio("max_answer_bytes = 100000")) as gate:
        with caplog.at_level(logging.WARNING, logger="callgate.gateway._stdio"):
            env = await gate.call("huge.chatter", {"size": 3_000_000}, principal=ALICE)
        assert env.status == "ok", env
        assert env.payload == {"content": [{"type": "text", "text": "ok"}]}
        assert "at least 3000000 bytes" in caplog.text


# HTTP -------------------------------------------------------------------------------
upstream = MCPServer("huge-http")


@upstream.tool(annotations=ToolAnnotations(read_only_hint=True))
def fill(size: int) -> str:
    """Answer with ``size`` bytes of text (the SDK's server, as it answers)."""
    return "x" * size


@upstream.tool(annotations=ToolAnnotations(read_only_hint=True))
def flood(size: int, framing: str) -> str:
    """Answered by the ASGI layer below, never here."""
    raise AssertionError("not reached")


@upstream.tool()
def flood_write(size: int, framing: str) -> str:
    """Answered by the ASGI layer below, never here."""
    raise AssertionError("not reached")


async def _flood(send: Any, request: Any, size: int, framing: str) -> None:
    """An answer to ``request`` of ``size`` bytes, sent 1 MiB at a time: with its
    ``Content-Length`` (``length``), without (``chunked``) or as one SSE event."""
    prefix = b'{"jsonrpc":"2.0","id":%b,"result":{"content":[{"type":"text","text":"' % (
        json.dumps(request).encode()
    )
    suffix = b'"}]}}'
    headers = [(b"content-type", b"application/json")]
    if framing == "sse":
        headers = [(b"content-type", b"text/event-stream")]
        prefix, suffix = b"event: message\ndata: " + prefix, suffix + b"\n\n"
    elif framing == "length":
        headers.append((b"content-length", str(size).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": prefix, "more_body": True})
    left = size - len(prefix) - len(suffix)
    block = b"x" * (1 << 20)
    while left > 0:
        await send({"type": "http.response.body", "body": block[:left], "more_body": True})
        left -= len(block)
    await send({"type": "http.response.body", "body": suffix})


@asynccontextmanager
async def serve_upstream() -> AsyncIterator[str]:
    """The SDK's server on a loopback port; yields its URL."""
    app = upstream.streamable_http_app()

    async def layer(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        message = json.loads(body) if body else None
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message["params"]
            if params["name"] in ("flood", "flood_write"):
                arguments = params["arguments"]
                await _flood(send, message["id"], arguments["size"], arguments["framing"])
                return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    async with serve_asgi(layer, "/mcp") as url:
        yield url


def http(url: str, limit: int) -> str:
    return f'url = "{url}"\nprotocol = "2025-11-25"\nmax_answer_bytes = {limit}'


@pytest.mark.parametrize(
    ("framing", "size", "seen"),
    [
        # Refused before a byte of the body is read: the length says it all.
        ("length", MB100, MB100),
        # Refused once the bytes read pass the limit (where, the network's reads say).
        ("chunked", 3 << 20, None),
        # The SDK's own bound on one event, set to the limit.
        ("sse", 3 << 20, (1 << 20) + 1),
    ],
)
async def test_an_http_answer_over_the_limit_is_refused(
    gate_of: GateOf,
    framing: str,
    size: int,
    seen: int | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with serve_upstream() as url, gate_of(http(url, 1 << 20)) as gate:
        with caplog.at_level(logging.INFO):
            env = await gate.call("huge.flood", {"size": size, "framing": framing}, principal=ALICE)
        refused(env, ErrorKind.CONSTRUCTION, seen, 1 << 20)
        await still_serving(gate)
    # One line in the gateway's log, no traceback from the SDK's client.
    assert "over max_answer_bytes" in caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text


async def test_an_http_writes_answer_too_large_is_an_unknown_outcome(gate_of: GateOf) -> None:
    async with serve_upstream() as url, gate_of(http(url, 1 << 20)) as gate:
        arguments = {"size": 3 << 20, "framing": "chunked"}
        env = await gate.call("huge.flood_write", arguments, principal=ALICE)
        refused(env, ErrorKind.UNKNOWN_OUTCOME, None, 1 << 20)
        await still_serving(gate)


async def test_an_sse_answer_over_the_sdks_default_of_1_mib_gets_through(
    gate_of: GateOf,
) -> None:
    # The SDK's server answers with an SSE event of about 3 MB (the text twice:
    # content and structured content); the SDK's client bounds events to 1 MiB
    # unless told otherwise.
    async with serve_upstream() as url, gate_of(http(url, 8 << 20)) as gate:
        env = await gate.call("huge.fill", {"size": 1_500_000}, principal=ALICE)
        assert env.status == "ok", env
        assert env.truncated is not None and env.truncated.total is not None


# the pieces ---------------------------------------------------------------------------
def test_the_limit_is_32_mib_unless_configured(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        '[[upstreams]]\nname = "a"\ncommand = "x"\n'
        '[[upstreams]]\nname = "b"\nurl = "http://h/mcp"\nmax_answer_bytes = 1000\n',
        encoding="utf-8",
    )
    a, b = load_config(path).upstreams
    assert (a.max_answer_bytes, b.max_answer_bytes) == (DEFAULT_LIMIT, 1000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "Input should be greater than 0"),
        ("-5", "Input should be greater than 0"),
        ("1.5", "Input should be a valid integer"),
        ('"32MB"', "Input should be a valid integer"),
        ("true", "Input should be a valid integer"),
    ],
)
def test_a_limit_that_is_no_positive_integer_is_refused_naming_the_key(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        f'[[upstreams]]\nname = "a"\ncommand = "x"\nmax_answer_bytes = {value}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"upstreams[0].max_answer_bytes: {expected}" in str(info.value)


def test_lines_are_split_across_chunks_and_none_over_the_limit_is_kept() -> None:
    lines = LineSplitter(10)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"c\nde") == [b"abc"]
    assert lines.feed(b"f\n0123456789\n\nxy") == [b"def", b"0123456789", b""]
    over = Overlong(head=b"xy" + b"z" * 20, tail=b"xy" + b"z" * 20, size=22)
    assert lines.feed(b"z" * 20 + b"\nok\n") == [over, b"ok"]
    # Over the limit with no end yet: dropped as it comes, its end still found.
    assert lines.feed(b"a" * 11) == []
    assert lines.feed(b"b" * 5) == []
    over = Overlong(head=b"a" * 11, tail=b"a" * 11 + b"b" * 6, size=17)
    assert lines.feed(b"b\nnext\n") == [over, b"next"]
    assert lines.feed(b"\n") == [b""]


def test_a_100_mb_line_keeps_only_its_ends() -> None:
    lines = LineSplitter(1 << 20)
    block = b"x" * (1 << 16)
    out: list[Any] = lines.feed(b'{"jsonrpc":"2.0","id":7,"result":"')
    for _ in range(MB100 // len(block)):
        out += lines.feed(block)
    out += lines.feed(b'"}\n{"jsonrpc":"2.0","id":8,"result":{}}\n')
    over, after = out
    assert isinstance(over, Overlong)
    assert over.size == MB100 + 36
    assert len(over.head) == len(over.tail) == KEEP
    assert over.tail.endswith(b'xx"}')
    assert answer_id(over.head, over.tail) == 7
    assert after == b'{"jsonrpc":"2.0","id":8,"result":{}}'


@pytest.mark.parametrize(
    ("head", "tail", "found"),
    [
        # The Python SDK's order, and the TypeScript SDK's.
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"te', b'xx"}]}}', 7),
        (b'{"result":{"content":[{"te', b'xx"}]},"jsonrpc":"2.0","id":"a\\"b"}', 'a"b'),
        (b' { "jsonrpc" : "2.0" , "id" : 7 , "error" : {"message":"', b'xx"}}\r', 7),
        (b'{"result":{"content":[{"te', b'xx"}]},"jsonrpc":"2.0","id":7 }\r', 7),
        # Both ends agree, or nothing is certain.
        (b'{"jsonrpc":"2.0","id":7,"result":{"x":"', b'xx"},"id":7}', 7),
        (b'{"jsonrpc":"2.0","id":7,"result":{"x":"', b'xx"},"id":8}', None),
        # A number cut off at the end of the head may be longer.
        (b'{"jsonrpc":"2.0","id":71', b'xx"}}', None),
        # A request or notification of the server's: no request of ours to answer.
        (b'{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"', b'"}}', None),
        (b'{"method":"notifications/message","params":{"data":"', b'xx"},"id":3}', None),
        (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', b'"}}', None),
        # An id nested in the result, or in the middle: not the top-level one for certain.
        (b'{"jsonrpc":"2.0","result":{"x":"', b'xx","a":{"id":8}}', None),
        (b'{"jsonrpc":"2.0","result":{"x":"', b'xx"},"id":7,"pad":"xxx"}', None),
        (b'{"jsonrpc":"2.0","result":{"id":5,"x":"', b'xx"}}', None),
        # Not an object at all.
        (b'[{"jsonrpc":"2.0","id":7,"result":"', b'xx"}]', None),
        (b"xxxx", b'xx","id":7}', None),
        # An id that is no JSON-RPC id.
        (b'{"jsonrpc":"2.0","id":true,"result":"', b'xx"}', None),
    ],
)
def test_the_id_of_an_answer_is_found_only_when_certain(
    head: bytes, tail: bytes, found: object
) -> None:
    assert answer_id(head, tail) == found
