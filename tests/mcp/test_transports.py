"""``callgate serve`` as a real process, over stdio and Streamable HTTP, with the SDK client."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.mcp.serving import SERVE, audit_of, serve_http

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FIND = ("ops__campaigns_find", {"query": "autumn"})


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.db'}"


async def _list_and_call(client: Client) -> types.CallToolResult:
    names = [t.name for t in (await client.list_tools()).tools]
    assert names == sorted(names)
    assert FIND[0] in names
    return await client.call_tool(*FIND)


def _assert_found(result: types.CallToolResult) -> None:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    rows = result.structured_content["result"]
    assert {row["id"] for row in rows} >= {"C-101", "C-102"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_stdio_list_call_and_audit(tmp_path: Path, mode: str) -> None:
    store = _store(tmp_path)
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--stdio", "--store", store])
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
            _assert_found(await _list_and_call(client))
            bad = await client.call_tool("ops__campaigns_find", {})
            assert bad.is_error
    records = await audit_of(store)
    assert [(r.tool, r.outcome) for r in records] == [
        ("ops.campaigns_find", "ok"),
        ("ops.campaigns_find", "construction"),
    ]
    assert {(r.user, r.tenant) for r in records} == {("local", "acme")}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_http_list_call_and_audit(tmp_path: Path, mode: str) -> None:
    store = _store(tmp_path)
    async with serve_http("--store", store) as (url, process):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        with anyio.fail_after(30):
            async with Client(url, mode=mode) as client:
                assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
                _assert_found(await _list_and_call(client))
    # The server stopped gracefully: its audit records are durable.
    assert process.returncode == 0
    (record,) = await audit_of(store)
    assert (record.tool, record.outcome, record.user) == ("ops.campaigns_find", "ok", "local")
    # Every call has a session the server chose: the connection's at 2025-11-25,
    # the principal's at 2026-07-28 (see callgate.mcp._sessions).
    assert record.session_id is not None and record.session_id.startswith("mcp-")


async def test_http_refuses_foreign_origin(tmp_path: Path) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with serve_http("--store", _store(tmp_path)) as (url, _), httpx.AsyncClient() as http:
        with anyio.fail_after(30):
            evil = await http.post(
                url, content=json.dumps(request), headers={**headers, "origin": "http://evil.test"}
            )
            local = await http.post(
                url,
                content=json.dumps(request),
                headers={
                    **headers,
                    "origin": url.removesuffix("/mcp"),
                    "content-type": "application/json",
                },
            )
    assert evil.status_code == 403
    assert local.status_code == 200


async def test_http_bad_requests_are_json_rpc_errors(tmp_path: Path) -> None:
    modern = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
    }
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def body(method: str, params: dict[str, object]) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})

    async with serve_http("--store", _store(tmp_path)) as (url, _), httpx.AsyncClient() as http:
        with anyio.fail_after(30):
            no_meta = await http.post(
                url, content=body("tools/list", {}), headers={**modern, "mcp-method": "tools/list"}
            )
            unknown = await http.post(
                url,
                content=body("nope/nope", {"_meta": envelope}),
                headers={**modern, "mcp-method": "nope/nope"},
            )
            garbage = await http.post(url, content="{not json", headers=modern)
            listed = await http.post(
                url,
                content=body("tools/list", {"_meta": envelope}),
                headers={**modern, "mcp-method": "tools/list"},
            )
    assert no_meta.json()["error"]["code"] == types.INVALID_PARAMS
    assert unknown.json()["error"]["code"] == types.METHOD_NOT_FOUND
    assert garbage.json()["error"]["code"] == types.PARSE_ERROR
    assert listed.status_code == 200
    assert "ops__campaigns_find" in {t["name"] for t in listed.json()["result"]["tools"]}
