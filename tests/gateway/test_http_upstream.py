"""Streamable HTTP upstreams: both protocol generations, the gateway's own
credentials, questions passed to the gateway's caller, and the circuit breaker.

The upstream is callgate's own MCP server on a loopback port (it speaks both
2025-11-25 and 2026-07-28), wrapped in a small ASGI layer that checks the
credential the gateway must send and can play dead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import Gate, Principal, Toolbox, ToolContext
from callgate.config import load_config
from callgate.errors import ErrorKind
from callgate.gateway import upstream_toolboxes
from callgate.mcp import build_server, streamable_http_app
from callgate.store import MemoryStore
from tests.gateway.sinks import Answering
from tests.mcp.identity import connect, serve
from tests.mcp.serving import serve_asgi

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
TOKEN = "upstream-token-1"

up = Toolbox("up")


@up.tool(read_only=True, open_world=False)
def echo(text: str) -> str:
    """Say it back."""
    return text


@up.tool(read_only=True, open_world=False)
async def ask(question: str, ctx: ToolContext) -> str:
    """Ask the user and say what they answered."""
    answer = await ctx.elicit(
        question, {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    )
    return f"{answer.action}: {json.dumps(answer.content)}"


@dataclass
class Upstream:
    url: str
    seen_auth: list[str] = field(default_factory=list)
    dead: bool = False
    token_requests: int = 0


@asynccontextmanager
async def serve_upstream(expect: str = f"Bearer {TOKEN}") -> AsyncIterator[Upstream]:
    """callgate serving ``up`` on a loopback port, behind a credential check."""
    gate = Gate([up], store=MemoryStore())
    server = build_server(gate, principal=Principal("upstream", tenant="acme"))
    app = streamable_http_app(server)
    state = Upstream(url="")  # known once it serves

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if state.dead:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"down"})
                return
            if scope["path"] == "/token":
                state.token_requests += 1
                body = json.dumps({"access_token": TOKEN, "expires_in": 3600}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            headers = dict(scope["headers"])
            given = headers.get(b"authorization", b"").decode()
            state.seen_auth.append(given)
            if given != expect:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await app(scope, receive, send)

    async with gate, serve_asgi(guarded) as url:
        state.url = url
        yield state


def bearer_table(url: str, protocol: str = "auto") -> str:
    """An ``[[upstreams]]`` table for ``url``, trusted, with the gateway's own bearer."""
    return (
        f'url = "{url}"\ntrust = "trusted"\nprotocol = "{protocol}"\n'
        'auth = { type = "bearer", env = "GW_TOKEN" }'
    )


@asynccontextmanager
async def gateway(
    tmp_path: Path, table: str, *, wait: float = 10, **env: str
) -> AsyncIterator[Gate]:
    path = tmp_path / "gw.toml"
    path.write_text(
        f'[[upstreams]]\nname = "remote"\n{table}\nstartup_wait = {wait}\nreconnect_max = 1\n'
    )
    cfg = load_config(path)
    environ = {"GW_TOKEN": TOKEN, **env}
    async with Gate(
        upstream_toolboxes(cfg.upstreams, cfg.label, environ), store=MemoryStore()
    ) as gate:
        yield gate


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25", "2026-07-28"])
async def test_either_protocol_generation_through_the_gateway(
    tmp_path: Path, protocol: str
) -> None:
    async with serve_upstream() as upstream:
        table = bearer_table(upstream.url, protocol)
        async with gateway(tmp_path, table) as gate:
            (box,) = gate.upstreams()
            stats = box.connection.stats  # type: ignore[attr-defined]
            assert stats.protocol == ("2026-07-28" if protocol == "auto" else protocol)
            echo = gate.tool("remote.up__echo")
            assert echo is not None and echo.risk.value == "read"
            env = await gate.call("remote.up__echo", {"text": "hi"}, principal=ALICE)
            assert env.status == "ok", env
            assert env.payload == {"result": "hi"}
        # The gateway's own credential, never anything of the caller's.
        assert set(upstream.seen_auth) == {f"Bearer {TOKEN}"}


async def test_client_credentials_against_a_token_url(tmp_path: Path) -> None:
    async with serve_upstream() as upstream:
        token_url = upstream.url.replace("/mcp", "/token")
        table = (
            f'url = "{upstream.url}"\nauth = {{ type = "client_credentials", token_url = '
            f'"{token_url}", client_id = "gateway", client_secret_env = "GW_SECRET" }}'
        )
        async with gateway(tmp_path, table, GW_SECRET="s3cret") as gate:
            env = await gate.call("remote.up__echo", {"text": "hi"}, principal=ALICE)
            assert env.status == "ok", env
        assert upstream.token_requests == 1


async def test_a_bad_credential_is_a_down_upstream_that_names_no_secret(tmp_path: Path) -> None:
    async with serve_upstream(expect="Bearer other") as upstream:
        table = f'url = "{upstream.url}"\nauth = {{ type = "bearer", env = "GW_TOKEN" }}'
        async with gateway(tmp_path, table, wait=1) as gate:
            (box,) = gate.upstreams()
            connection = box.connection  # type: ignore[attr-defined]
            # The refusal may take longer than startup_wait on a loaded machine.
            with anyio.fail_after(20):
                while connection.state.value == "starting":  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            assert connection.state.value == "down"
            error = connection.stats.last_error
            assert error.startswith("the upstream refused the gateway's credential (HTTP 401")
            assert TOKEN not in error
            env = await gate.call("remote.up__echo", {"text": "hi"}, principal=ALICE)
            assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
            # Never reached: its tools are not known, so none is served.
            assert env.error.message_for_model == "Unknown tool 'remote.up__echo'."


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_an_upstreams_question_reaches_the_gateways_caller(
    tmp_path: Path, protocol: str
) -> None:
    async with serve_upstream() as upstream:
        table = bearer_table(upstream.url, protocol)
        async with gateway(tmp_path, table) as gate:
            caller = Answering()
            env = await gate.call(
                "remote.up__ask", {"question": "Go ahead?"}, principal=ALICE, sink=caller
            )
            assert env.status == "ok", env
            assert caller.asked == ["Go ahead?"]
            assert env.payload == {"result": 'accept: {"ok": true}'}
            # A caller whose client cannot ask: the upstream is refused, and says so.
            env = await gate.call("remote.up__ask", {"question": "Again?"}, principal=ALICE)
            assert env.status == "error"


async def test_a_failing_upstream_is_broken_off_and_probed_back(tmp_path: Path) -> None:
    async with serve_upstream() as upstream:
        table = bearer_table(upstream.url)
        async with gateway(tmp_path, table) as gate:
            (box,) = gate.upstreams()
            connection = box.connection  # type: ignore[attr-defined]
            upstream.dead = True
            kinds = set()
            for _ in range(4):
                env = await gate.call("remote.up__echo", {"text": "x"}, principal=ALICE)
                assert env.error is not None
                kinds.add(env.error.kind)
                assert "remote" in env.error.message_for_model
            assert kinds == {ErrorKind.TRANSIENT}
            assert connection.state.value in ("down", "starting")
            upstream.dead = False
            with anyio.fail_after(20):
                while True:
                    env = await gate.call("remote.up__echo", {"text": "back"}, principal=ALICE)
                    if env.status == "ok":
                        break
                    await anyio.sleep(0.25)
            assert connection.stats.connects >= 2


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_callers_token_never_reaches_an_upstream(tmp_path: Path, mode: str) -> None:
    # The gateway authenticates its callers by token; its upstream gets the
    # gateway's own credential only, and the audit names the caller.
    caller_token = "t-alice"
    async with serve_upstream() as upstream:
        table = bearer_table(upstream.url)
        async with gateway(tmp_path, table) as gate:
            async with serve(gate) as url, connect(url, mode, token=caller_token) as client:
                result = await client.call_tool("remote__up__echo", {"text": "hi"})
            records = [r for r in await gate.audit() if r.tool == "remote.up__echo"]

    assert not result.is_error, result.content
    assert upstream.seen_auth and set(upstream.seen_auth) == {f"Bearer {TOKEN}"}
    assert {r.user for r in records} == {"alice"}
