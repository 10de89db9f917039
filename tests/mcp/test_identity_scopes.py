"""A call lacking a scope: refused before its arguments are looked at, with a
``permission`` answer naming the scope; at 2026-07-28 over HTTP also ``403`` with an
``insufficient_scope`` challenge, which a client steps up from (a token granting
more, the same request again). At 2025-11-25 the answer travels on an SSE stream
already begun, so it is the tool's error result; the same session goes on with a
token granting more."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from tests.mcp.identity import MODES, StepUp, build_gate, connect, serve
from tests.mcp.serving import LEGACY, MODERN_META, answer_of, rpc

pytestmark = pytest.mark.anyio

READ = frozenset({"deploy:read"})
BOTH = frozenset({"deploy:read", "deploy:rollback"})
ISSUE = {READ: "t-alice-read", BOTH: "t-alice"}
ROLLBACK = {"service": "api", "version": 6}
BAD = {"service": 5, "versoin": "six"}  # wrong type, a misspelt and a missing field
SCHEMA_WORDS = ("version", "versoin", "integer", "string", "service", "required")


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_missing_scope_is_403_with_a_challenge_before_validation() -> None:
    gate = build_gate()
    headers = {
        **LEGACY,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "deploy__rollback",
        "authorization": "Bearer t-alice-read",
    }
    call = rpc(
        1, "tools/call", {"name": "deploy__rollback", "arguments": BAD, "_meta": MODERN_META}
    )
    async with serve(gate) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            refused = await http.post(url, json=call, headers=headers)
        audit = await gate.audit()

    assert refused.status_code == 403
    assert refused.headers["www-authenticate"] == (
        'Bearer realm="callgate", error="insufficient_scope", '
        'error_description="the call needs the scopes deploy:read deploy:rollback", '
        'scope="deploy:read deploy:rollback"'
    )
    error = answer_of(refused)["error"]
    assert "'deploy:rollback'" in error["message"] and "not allowed" in error["message"]
    assert error["data"]["kind"] == "permission"
    assert error["data"]["scope"] == "deploy:read deploy:rollback"
    assert error["data"]["missingScopes"] == ["deploy:rollback"]
    # The scope check came first: nothing of the tool's schema is revealed.
    message = error["message"].replace("deploy:rollback", "").replace("deploy__rollback", "")
    assert not [word for word in SCHEMA_WORDS if word in message]
    [final] = [r for r in audit if r.phase == "final"]
    assert (final.user, final.outcome) == ("alice", "permission")


async def test_with_the_scope_the_same_bad_arguments_get_the_validation_error() -> None:
    # The control of the test above: these arguments are refused by validation.
    async with serve(build_gate()) as url:
        with anyio.fail_after(10):
            async with connect(url, "2026-07-28", token="t-alice") as alice:
                result = await alice.call_tool("deploy__rollback", BAD)

    assert result.is_error and "version" in _text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_does_not_step_up_is_told_which_scope_it_lacks(mode: str) -> None:
    async with serve(build_gate()) as url:
        with anyio.fail_after(10):
            async with connect(url, mode, token="t-alice-read") as alice:
                if mode == "legacy":  # the tool's error result, on the call's stream
                    result = await alice.call_tool("deploy__rollback", BAD)
                    assert result.is_error
                    text = _text(result)
                else:  # the JSON-RPC error of the 403, as the SDK hands it over
                    with pytest.raises(MCPError) as refused:
                        await alice.call_tool("deploy__rollback", BAD)
                    text = refused.value.error.message

    assert "it needs the scope 'deploy:rollback'" in text and "'alice' does not have" in text
    assert "Next step:" in text


async def test_step_up_from_the_challenge_gets_the_call_through() -> None:
    gate = build_gate()
    flow = StepUp(READ, ISSUE)
    async with serve(gate) as url:
        with anyio.fail_after(20):
            async with connect(url, "2026-07-28", auth=flow) as alice:
                status = await alice.call_tool("deploy__status", {"service": "api"})
                rolled = await alice.call_tool("deploy__rollback", ROLLBACK)
        audit = await gate.audit()

    assert not status.is_error and not rolled.is_error
    assert rolled.structured_content == {"result": "api rolled back to v6"}
    [challenge] = flow.challenges  # one step up, from deploy:read to both
    assert flow.held == BOTH and 'scope="deploy:read deploy:rollback"' in challenge
    finals = [(r.tool, r.user, r.outcome) for r in audit if r.phase == "final"]
    assert finals == [
        ("deploy.status", "alice", "ok"),
        ("deploy.rollback", "alice", "permission"),
        ("deploy.rollback", "alice", "ok"),
    ]


class _Switch(httpx2.Auth):
    """Sends whichever token the test holds now."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


async def test_a_2025_11_25_session_goes_on_with_a_token_granting_more() -> None:
    gate = build_gate()
    token = _Switch("t-alice-read")
    async with serve(gate) as url:
        with anyio.fail_after(20):
            async with connect(url, "legacy", auth=token) as alice:
                refused = await alice.call_tool("deploy__rollback", ROLLBACK)
                token.token = "t-alice"  # stepped up elsewhere; same person, same session
                rolled = await alice.call_tool("deploy__rollback", ROLLBACK)
        audit = await gate.audit()

    assert refused.is_error and "'deploy:rollback'" in _text(refused)
    assert not rolled.is_error
    calls = [r for r in audit if r.phase == "final" and r.tool == "deploy.rollback"]
    assert [r.outcome for r in calls] == ["permission", "ok"]
    assert len({r.session_id for r in calls}) == 1


TASKS_META = {
    **MODERN_META,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


async def _rpc(
    http: httpx.AsyncClient, url: str, token: str, method: str, params: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    headers = {
        **LEGACY,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        "authorization": f"Bearer {token}",
    }
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    body = rpc(1, method, {**params, "_meta": TASKS_META})
    response = await http.post(url, json=body, headers=headers)
    return response.status_code, answer_of(response)


async def _ended(http: httpx.AsyncClient, url: str, token: str, task_id: str) -> dict[str, Any]:
    while True:
        _, answer = await _rpc(http, url, token, "tasks/get", {"taskId": task_id})
        if answer["result"]["status"] != "working":
            return dict(answer["result"])
        await anyio.sleep(0.02)


async def test_tasks_are_their_callers_and_a_refusal_in_one_is_no_403() -> None:
    gate = build_gate()
    migrate = {"name": "deploy__migrate", "arguments": {"service": "api"}}
    async with serve(gate) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(20):
            created = await _rpc(http, url, "t-alice", "tools/call", migrate)
            task_id = created[1]["result"]["taskId"]
            done = await _ended(http, url, "t-alice", task_id)
            _, by_bob = await _rpc(http, url, "t-bob", "tasks/get", {"taskId": task_id})
            refused = await _rpc(http, url, "t-alice-read", "tools/call", migrate)
            not_allowed = await _ended(http, url, "t-alice-read", refused[1]["result"]["taskId"])
        audit = await gate.audit()

    assert created[0] == 200 and created[1]["result"]["resultType"] == "task"
    assert done["status"] == "completed" and done["result"]["isError"] is False
    assert by_bob["error"]["message"] == f"Unknown task: {task_id}"  # alice's only
    # The answer was the task already: the refusal is the task's result.
    assert refused[0] == 200
    assert not_allowed["status"] == "completed" and not_allowed["result"]["isError"] is True
    assert "'deploy:rollback'" in not_allowed["result"]["content"][0]["text"]
    finals = [(r.user, r.outcome) for r in audit if r.phase == "final"]
    assert finals == [("alice", "ok"), ("alice", "permission")]


async def test_a_listing_over_raw_http_is_the_tokens() -> None:
    async with serve(build_gate()) as url, httpx.AsyncClient() as http:
        with anyio.fail_after(10):
            status, answer = await _rpc(http, url, "t-bob", "tools/list", {})

    assert status == 200
    names = {tool["name"] for tool in answer["result"]["tools"]}
    assert "deploy__rollback" not in names and "deploy__status" in names
