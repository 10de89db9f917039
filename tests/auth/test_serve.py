"""``callgate serve`` with an ``[auth]`` table, as the CLI starts it: the MCP endpoint
takes its callers from real signed tokens (tests/auth/issuer.py), publishes its
Protected Resource Metadata, answers ``401`` with the challenge that points to it,
and a second person, authenticated the same way, approves through the approvals
API what the first one asked; the first one's call then runs, once."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import MCPError

from tests.auth.issuer import AUDIENCE, ISSUER, Issuer, public_pem
from tests.mcp.identity import connect
from tests.mcp.serving import started
from tests.replicas.conftest import CONFIG as REPLICAS_CONFIG
from tests.replicas.toolbox import LEDGER_ENV, runs

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

METADATA = "https://gateway.acme.example/.well-known/oauth-protected-resource/mcp"
MODE = "2026-07-28"


def config(tmp_path: Path, issuer: Issuer) -> Path:
    key = tmp_path / "issuer.pem"
    key.write_text(public_pem(issuer.key("rsa-1").private))
    path = tmp_path / "callgate.toml"
    # The replica tests' toolbox and policy (a payment over 1000 needs a second
    # person), and the issuer's key.
    auth = f"""
[auth]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
public_key_file = "issuer.pem"
algorithms = ["RS256"]
"""
    path.write_text(REPLICAS_CONFIG + auth, encoding="utf-8")
    return path


@asynccontextmanager
async def serve(tmp_path: Path, issuer: Issuer, *args: str) -> AsyncIterator[tuple[str, str]]:
    """``callgate serve`` on a free loopback port: (its MCP URL, its startup lines)."""
    argv = [sys.executable, "-m", "callgate", "serve", "--port", "0"]
    argv += ["--config", str(config(tmp_path, issuer)), "--store"]
    argv += [f"sqlite:///{tmp_path / 'callgate.db'}", *args]
    env = {**os.environ, LEDGER_ENV: str(tmp_path / "ledger")}
    process = await anyio.open_process(argv, env=env)
    try:
        yield await started(process, timeout=60)
    finally:
        if process.returncode is None:
            process.terminate()
        with anyio.fail_after(20):
            await process.wait()
        await process.aclose()


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


async def test_without_a_token_the_endpoint_says_where_to_get_one(
    tmp_path: Path, issuer: Issuer
) -> None:
    async with serve(tmp_path, issuer) as (url, startup), httpx.AsyncClient() as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        forged = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"authorization": f"Bearer {issuer.token(aud='https://other.example/mcp')}"},
        )
        base = url.removesuffix("/mcp")
        health = await http.get(base + "/healthz")
        documents = [
            (await http.get(base + path)).json()
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
            )
        ]

    assert "callers: bearer tokens of https://login.acme.example" in startup
    assert "principal: " not in startup
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA}"'
    # A validly signed token for another resource: refused, and told why.
    assert forged.status_code == 401
    challenge = forged.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and "not for this resource" in challenge
    assert health.status_code == 200 and health.json()["status"] == "ok"  # no token needed
    for document in documents:
        assert document["resource"] == AUDIENCE
        assert document["authorization_servers"] == [ISSUER]
        assert {"rep:read", "rep:write"} <= set(document["scopes_supported"])


async def test_each_caller_is_who_their_token_says(tmp_path: Path, issuer: Issuer) -> None:
    alice = issuer.token(scope="rep:read")
    async with serve(tmp_path, issuer) as (url, _), connect(url, MODE, token=alice) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        balance = await client.call_tool("rep__balance", {"account": "A-1"})
        # Beyond them: 403 insufficient_scope (the SDK raises it), before validation.
        with pytest.raises(MCPError, match="needs the scope 'rep:write'"):
            await client.call_tool("rep__pay", {"account": "A-1"})

    # Only what alice's scopes allow is listed; a call beyond them is refused.
    assert "rep__balance" in tools and "rep__pay" not in tools
    assert not balance.is_error
    assert runs(tmp_path / "ledger") == []


@pytest.mark.parametrize("mode", ["legacy", MODE])
async def test_a_second_person_approves_through_the_api_and_the_call_runs_once(
    tmp_path: Path, issuer: Issuer, mode: str
) -> None:
    pay = {"account": "A-9", "amount": 5000}
    alice = issuer.token(scope="rep:read rep:write")
    bob = issuer.token(sub="bob@acme.example", scope="", roles=["approver"])
    outsider = issuer.token(sub="eve@globex.example", tenant="globex", roles=["approver"])
    async with (
        serve(tmp_path, issuer) as (url, _),
        connect(url, mode, token=alice) as client,
        httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http,
    ):
        parked = await client.call_tool("rep__pay", pay)
        assert parked.is_error and parked.meta is not None, parked
        approval = parked.meta["callgate/approvalId"]

        def decide(token: str | None) -> Any:
            headers = {"authorization": f"Bearer {token}"} if token else {}
            return http.post(f"/api/approvals/{approval}/approve", json={}, headers=headers)

        shown = await http.get(
            f"/api/approvals/{approval}", headers={"authorization": f"Bearer {bob}"}
        )
        anonymous = await decide(None)
        own = await decide(alice)
        other_tenant = await decide(outsider)
        approved = await decide(bob)
        status = await client.call_tool("callgate__approval_status", {"approval_id": approval})
        ran = await client.call_tool("rep__pay", pay)

    assert shown.status_code == 200
    # The approver sees exactly the inputs that will run, and who asked.
    assert shown.json()["arguments"] == pay | {"tenant_id": "acme"}
    assert shown.json()["requested_by"] == "alice@acme.example"
    assert anonymous.status_code == 401
    assert own.status_code == 409 and own.json()["error"]["code"] == "self_approval"
    assert other_tenant.status_code == 404
    assert approved.status_code == 200, approved.text
    assert isinstance(status.content[0], types.TextContent)
    assert "approved" in status.content[0].text
    assert not ran.is_error, ran.content
    assert isinstance(ran.content[0], types.TextContent)
    assert [line.split(" pid=")[0] for line in runs(tmp_path / "ledger")] == ["pay acme:A-9 5000"]
