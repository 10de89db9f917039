"""Who is calling, per HTTP request: credentials checked at the edge (401 and a
challenge without them), each caller served as themselves (listing, calls and their
audit, sealed request state, sessions), one authenticate seam for the MCP endpoint
and the approvals API. Served by uvicorn on a loopback port; the official SDK client
and raw httpx requests."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.context import ClientRequestContext
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from callgate import Principal
from callgate.console import approvals_app
from callgate.mcp import build_server, run_stdio, streamable_http_app
from tests.mcp.identity import (
    ALICE,
    AUTHENTICATE,
    MODES,
    STATIC,
    build_gate,
    connect,
    serve,
)
from tests.mcp.serving import LEGACY, MODERN_META, answer_of, open_session, rpc, serve_asgi

pytestmark = pytest.mark.anyio

MODERN = {**LEGACY, "mcp-protocol-version": "2026-07-28"}
INITIALIZE = rpc(
    0,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def modern_call(name: str, arguments: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    return rpc(id_, "tools/call", {"name": name, "arguments": arguments, "_meta": MODERN_META})


def call_headers(name: str, token: str | None) -> dict[str, str]:
    headers = {**MODERN, "mcp-method": "tools/call", "mcp-name": name}
    return {**headers, **bearer(token)} if token is not None else headers


async def test_a_request_without_credentials_gets_401_with_a_challenge_and_reaches_nothing() -> (
    None
):
    gate = build_gate()
    async with serve(gate) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            answers = [
                await http.post(url, json=INITIALIZE, headers=LEGACY),
                await http.post(
                    url, json=modern_call("deploy__status", {"service": "api"}), **_no_token()
                ),
                await http.get(url, headers={"accept": "text/event-stream"}),
                await http.delete(url, headers={"mcp-session-id": "any"}),
            ]
        audit = await gate.audit()

    assert [a.status_code for a in answers] == [401, 401, 401, 401]
    for answer in answers:
        # RFC 6750: no credentials offered, so no error code in the challenge.
        assert answer.headers["www-authenticate"] == 'Bearer realm="callgate"'
        assert answer.json()["error"]["message"] == "Unauthorized: a bearer token is required"
        assert "mcp-session-id" not in answer.headers
    assert audit == []  # the call never reached the chain


def _no_token() -> dict[str, Any]:
    return {"headers": call_headers("deploy__status", None)}


async def test_a_bad_token_gets_401_invalid_token_from_the_given_challenge() -> None:
    # What the lead wires: the resource metadata URL in every challenge.
    challenge = functools.partial(_challenge, "https://gw.example/.well-known/x")
    async with serve(build_gate(), challenge=challenge) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            unknown = await http.post(url, json=INITIALIZE, headers={**LEGACY, **bearer("nope")})
            basic = await http.post(
                url, json=INITIALIZE, headers={**LEGACY, "authorization": "Basic YTpi"}
            )

    assert unknown.status_code == basic.status_code == 401
    assert unknown.headers["www-authenticate"] == (
        'Bearer error="invalid_token" description="the token is not valid" '
        'metadata="https://gw.example/.well-known/x"'
    )
    assert 'error="invalid_token"' in basic.headers["www-authenticate"]
    assert unknown.json()["error"]["message"] == "Unauthorized: the token is not valid"
    assert "nope" not in unknown.text  # the offered credentials are never echoed


def _challenge(
    metadata: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    parts = [f'error="{error}"', f'description="{description}"'] if error else []
    parts += [f'scope="{scope}"'] if scope else []
    return "Bearer " + " ".join([*parts, f'metadata="{metadata}"'])


async def test_an_authenticate_function_that_fails_answers_503_not_a_pass() -> None:
    def broken(request: Request) -> Principal:
        raise RuntimeError("identity provider at 10.0.0.7 unreachable")

    async with serve(build_gate(), authenticate=broken) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            answer = await http.post(url, json=INITIALIZE, headers={**LEGACY, **bearer("t-alice")})

    assert answer.status_code == 503
    assert "10.0.0.7" not in answer.text
    assert "try again later" in answer.json()["error"]["message"]


@pytest.mark.parametrize("mode", MODES)
async def test_each_caller_sees_what_their_scopes_and_tenant_allow(mode: str) -> None:
    async with serve(build_gate()) as url:
        with anyio.fail_after(20):
            async with connect(url, mode, token="t-alice") as alice:
                alices = {tool.name for tool in (await alice.list_tools()).tools}
            async with connect(url, mode, token="t-bob") as bob:
                bobs = {tool.name for tool in (await bob.list_tools()).tools}
            async with connect(url, mode, token="t-alice-read") as reader:
                readers = {tool.name for tool in (await reader.list_tools()).tools}

    deploy = {"deploy__status", "deploy__rollback", "deploy__whoami"}
    acme = {"acme__roadmap", "acme__wire"}
    assert deploy | acme <= alices
    assert "deploy__status" in bobs and not bobs & (acme | {"deploy__rollback"})  # globex, read
    assert "deploy__rollback" not in readers and acme <= readers  # acme, read only


@pytest.mark.parametrize("mode", MODES)
async def test_each_call_runs_and_is_audited_as_its_own_caller(mode: str) -> None:
    gate = build_gate()
    async with serve(gate) as url:
        with anyio.fail_after(20):
            async with (
                connect(url, mode, token="t-alice") as alice,
                connect(url, mode, token="t-bob") as bob,
            ):
                first = await alice.call_tool("deploy__status", {"service": "api"})
                second = await bob.call_tool("deploy__status", {"service": "db"})
                third = await alice.call_tool("deploy__rollback", {"service": "api", "version": 6})
        audit = await gate.audit()

    assert not any(result.is_error for result in (first, second, third))
    assert [(r.tool, r.user, r.tenant) for r in audit if r.phase == "final"] == [
        ("deploy.status", "alice", "acme"),
        ("deploy.status", "bob", "globex"),
        ("deploy.rollback", "alice", "acme"),
    ]


async def test_a_2025_11_25_session_is_only_its_creators() -> None:
    async with serve(build_gate()) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(20):
            headers = await _open_session(http, url, "t-alice")
            listing = rpc(2, "tools/list", {})
            as_bob = {**headers, **bearer("t-bob")}
            stolen = [
                await http.post(url, json=listing, headers=as_bob),
                await http.get(url, headers={**as_bob, "accept": "text/event-stream"}),
                await http.delete(url, headers=as_bob),
            ]
            # The same person with a refreshed token, or one granting less, keeps it.
            refreshed = await http.post(
                url, json=listing, headers={**headers, **bearer("t-alice-refreshed")}
            )
            narrower = await http.post(
                url, json=rpc(3, "tools/list", {}), headers={**headers, **bearer("t-alice-read")}
            )

    # As the SDK answers it: for anyone else the session does not exist.
    assert [answer.status_code for answer in stolen] == [404, 404, 404]
    assert all(answer.json()["error"]["message"] == "Session not found" for answer in stolen)
    assert refreshed.status_code == 200
    names = {tool["name"] for tool in answer_of(refreshed)["result"]["tools"]}
    assert "deploy__rollback" in names
    narrow = {tool["name"] for tool in answer_of(narrower)["result"]["tools"]}
    assert "deploy__rollback" not in narrow and "deploy__status" in narrow  # this token's scopes


async def _open_session(http: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    original = http.headers.copy()
    http.headers.update(bearer(token))
    try:
        return {**await open_session(http, url), **bearer(token)}
    finally:
        http.headers = original


class _Name:
    def __init__(self, name: str) -> None:
        self.name = name

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": self.name})


NAME = _Name("x").elicit


async def test_a_request_state_sealed_for_alice_is_refused_for_bob() -> None:
    async with serve(build_gate()) as url:
        with anyio.fail_after(20):
            async with connect(
                url, "2026-07-28", token="t-alice", elicitation_callback=NAME
            ) as alice:
                asked = await alice.session.call_tool(
                    "deploy__whoami", {}, allow_input_required=True
                )
                assert isinstance(asked, types.InputRequiredResult)
                assert asked.input_requests is not None and asked.request_state is not None
                answers = {
                    key: {"action": "accept", "content": {"name": "x"}}
                    for key in asked.input_requests
                }
                async with connect(
                    url, "2026-07-28", token="t-bob", elicitation_callback=NAME
                ) as bob:
                    with pytest.raises(MCPError) as refused:
                        await bob.session.call_tool(
                            "deploy__whoami",
                            {},
                            input_responses=answers,  # type: ignore[arg-type]
                            request_state=asked.request_state,
                            allow_input_required=True,
                        )
                done = await alice.session.call_tool(
                    "deploy__whoami",
                    {},
                    input_responses=answers,  # type: ignore[arg-type]
                    request_state=asked.request_state,
                    allow_input_required=True,
                )

    assert refused.value.error.message == "Invalid or expired requestState"
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert done.structured_content == {"user": "alice", "answer": {"name": "x"}}


@pytest.mark.parametrize("authenticate", [STATIC, AUTHENTICATE], ids=["sync", "async"])
@pytest.mark.parametrize("mode", MODES)
async def test_another_person_approves_through_the_console_with_the_same_seam(
    mode: str, authenticate: Any
) -> None:
    gate = build_gate()
    console = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=approvals_app(gate, authenticate=authenticate)),
        base_url="http://console",
    )
    wire = {"to": "ACC-9", "amount": 5000}
    async with serve(gate, authenticate=authenticate) as url, console:
        with anyio.fail_after(20):
            async with connect(url, mode, token="t-alice") as alice:
                parked = await alice.call_tool("acme__wire", wire)
                assert parked.is_error and parked.meta is not None
                approval = parked.meta["callgate/approvalId"]
                path = f"/api/approvals/{approval}"
                by_bob = await console.get(path, headers=bearer("t-bob"))  # globex
                by_self = await console.post(f"{path}/approve", json={}, headers=bearer("t-alice"))
                shown = await console.get(path, headers=bearer("t-carol"))
                decided = await console.post(
                    f"{path}/approve", json={"note": "ok"}, headers=bearer("t-carol")
                )
                ran = await alice.call_tool("acme__wire", wire)
        audit = await gate.audit()

    assert by_bob.status_code == 404  # another tenant's approval does not exist for bob
    assert by_self.status_code == 409 and by_self.json()["error"]["code"] == "self_approval"
    assert shown.json()["arguments"] == wire  # the exact inputs that will run
    assert decided.status_code == 200 and decided.json()["state"] == "approved"
    assert not ran.is_error and ran.structured_content == {"result": "wired 5000 to ACC-9"}
    decisions = [(r.user, r.decision) for r in audit if r.phase == "decision"]
    assert ("carol", "approved") in decisions
    finals = [(r.user, r.status) for r in audit if r.phase == "final" and r.tool == "acme.wire"]
    assert finals == [("alice", "pending_approval"), ("alice", "ok")]


async def test_public_routes_need_no_credentials_and_the_endpoint_still_does() -> None:
    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse({"resource": "https://gw.example/mcp"})

    route = Route("/.well-known/oauth-protected-resource/mcp", metadata)
    async with serve(build_gate(), routes=[route]) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            published = await http.get(url.replace("/mcp", route.path))
            endpoint = await http.post(url, json=INITIALIZE, headers=LEGACY)

    assert published.status_code == 200 and published.json()["resource"].endswith("/mcp")
    assert endpoint.status_code == 401


async def test_a_server_without_a_principal_serves_authenticated_callers_only() -> None:
    gate = build_gate()
    server = build_server(gate)

    with pytest.raises(ValueError, match="authenticate"):
        streamable_http_app(server)
    with pytest.raises(ValueError, match="principal"):
        await run_stdio(server)
    async with gate, Client(server) as client:
        with pytest.raises(MCPError, match="authenticated callers only"):
            await client.list_tools()


@pytest.mark.parametrize("mode", MODES)
async def test_with_authentication_the_fixed_principal_is_never_used(mode: str) -> None:
    gate = build_gate()
    local = Principal("local", "acme", scopes={"deploy:read", "deploy:rollback"})
    async with serve(gate, principal=local) as url:
        with anyio.fail_after(20):
            async with connect(url, mode, token="t-bob") as bob:
                names = {tool.name for tool in (await bob.list_tools()).tools}
                await bob.call_tool("deploy__status", {"service": "api"})
        audit = await gate.audit()

    assert "deploy__rollback" not in names
    assert {r.user for r in audit} == {"bob"}
    assert ALICE.user not in {r.user for r in audit}


def _docs_example() -> str:
    doc = (Path(__file__).parents[2] / "docs" / "mcp.md").read_text()
    section = doc.split("## Who is calling", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert found is not None
    return found[1]


@pytest.mark.parametrize("mode", MODES)
async def test_the_docs_example_serves_each_caller_as_themselves(mode: str) -> None:
    gate = build_gate()
    example = _docs_example()
    assert "from myapp import gate" in example
    scope: dict[str, Any] = {"__name__": "docs_example"}
    exec(example.replace("from myapp import gate", "gate = GATE"), {**scope, "GATE": gate}, scope)
    console = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=scope["console_app"]), base_url="http://console"
    )
    async with gate, serve_asgi(scope["mcp_app"]) as url, console, httpx.AsyncClient() as http:
        with anyio.fail_after(20):
            async with connect(url, mode, token="token-of-alice") as alice:
                names = {tool.name for tool in (await alice.list_tools()).tools}
                parked = await alice.call_tool("acme__wire", {"to": "ACC-9", "amount": 5})
            assert parked.meta is not None
            path = f"/api/approvals/{parked.meta['callgate/approvalId']}/approve"
            decided = await console.post(path, json={}, headers=bearer("token-of-carol"))
            stranger = await http.post(url, json=INITIALIZE, headers={**LEGACY, **bearer("x")})

    assert "deploy__status" in names and "deploy__rollback" not in names
    assert decided.status_code == 200 and decided.json()["decided_by"] == "carol"
    assert stranger.status_code == 401
