"""The MCP server in memory, driven by the official SDK client at both protocol versions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate, Principal
from callgate.mcp import build_server, default_principal
from tests.mcp.tools import ALICE, build_gate

pytestmark = pytest.mark.anyio

# "legacy" is the 2025-11-25 initialize handshake; the other is the stateless generation.
MODES = ["legacy", "2026-07-28"]


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with build_gate() as gate:
        yield gate


@pytest.fixture(params=MODES)
async def client(request: pytest.FixtureRequest, gate: Gate) -> AsyncIterator[Client]:
    server = build_server(gate, principal=ALICE)
    async with Client(server, mode=request.param) as client:
        yield client


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_both_protocol_versions_are_negotiated(gate: Gate) -> None:
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as old:
            assert old.protocol_version == "2025-11-25"
        async with Client(server, mode="2026-07-28") as new:
            assert new.protocol_version == "2026-07-28"


async def test_tools_list_is_name_ordered_and_filtered_by_scope(client: Client) -> None:
    with anyio.fail_after(5):
        tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    assert names == sorted(names)
    assert "shop__order_get" in names
    # alice lacks the admin scope: the tool is not offered.
    assert "shop__purge" not in names


async def test_header_checks_see_the_schemas_of_listed_tools_only(gate: Gate) -> None:
    # The SDK checks Mcp-Param-* headers of 2026-07-28 calls against this lookup
    # (before any middleware): a tool alice is not shown must not be found by probing.
    server = build_server(gate, principal=ALICE)
    lookup = server.get_tool_input_schema
    assert lookup is not None
    schema = lookup("shop__order_get")
    assert schema is not None and set(schema["properties"]) == {"order_id"}
    assert lookup("shop__purge") is None
    assert lookup("shop__nothing") is None


async def test_tool_schemas_hide_trusted_fields_and_carry_annotations(client: Client) -> None:
    with anyio.fail_after(5):
        tools = {t.name: t for t in (await client.list_tools()).tools}
    get = tools["shop__order_get"]
    assert set(get.input_schema["properties"]) == {"order_id"}
    assert "tenant_id" not in json.dumps(get.input_schema)
    assert get.output_schema is not None and get.output_schema["type"] == "object"
    assert get.annotations is not None
    assert get.annotations.read_only_hint is True
    assert get.annotations.open_world_hint is False
    refund = tools["shop__refund"].annotations
    assert refund is not None and refund.destructive_hint is True


async def test_non_object_output_schema_is_wrapped(client: Client) -> None:
    with anyio.fail_after(5):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("shop__order_count", {"status": "closed"})
    schema = tools["shop__order_count"].output_schema
    assert schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert not result.is_error
    assert result.structured_content == {"result": 35}
    assert json.loads(_text(result)) == 35


async def test_call_ok_returns_structured_content_and_json_text(client: Client, gate: Gate) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__order_get", {"order_id": "O-1"})
    assert not result.is_error
    # The tenant comes from the principal, never from the model.
    assert result.structured_content == {"id": "O-1", "tenant": "acme", "lines": 3}
    assert json.loads(_text(result)) == result.structured_content
    # Compact JSON: no token spent on spaces between keys and values.
    assert _text(result) == '{"id":"O-1","tenant":"acme","lines":3}'
    records = await gate.audit()
    assert [r.tool for r in records] == ["shop.order_get"]


async def test_model_supplied_trusted_field_is_dropped(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__order_get", {"order_id": "O-1", "tenant_id": "evil"})
    assert result.structured_content is not None
    assert result.structured_content["tenant"] == "acme"


async def test_validation_error_is_a_tool_error_with_the_fix(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__order_count", {"status": "opne"})
    assert result.is_error
    text = _text(result)
    assert 'Argument \'status\': "opne" is not allowed. Allowed values: "open", "closed".' in text
    assert "Did you mean 'open'?" in text
    assert "Next step: Fix the arguments and call shop__order_count again." in text
    assert result.structured_content is None


async def test_unknown_tool_is_a_protocol_error_naming_close_matches(
    client: Client, gate: Gate
) -> None:
    # Both protocol versions list an unknown tool as a protocol error (-32602).
    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
        await client.call_tool("shop__order_gets", {"order_id": "O-1"})
    assert caught.value.error.code == types.INVALID_PARAMS
    assert "'shop__order_get'" in caught.value.error.message
    # The attempt is audited like any call, under the name the client sent.
    (record,) = await gate.audit()
    assert (record.tool, record.outcome) == ("shop__order_gets", "construction")


async def test_permission_is_checked_on_call_whatever_the_list_showed(
    client: Client, gate: Gate
) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__purge", {})
    assert result.is_error
    assert "purged" not in _text(result)
    assert result.meta is not None and result.meta["callgate/status"] == "error"
    (record,) = [r for r in await gate.audit() if r.tool == "shop.purge"]
    assert record.outcome == "permission"


async def test_pending_approval_carries_the_approval_id(client: Client, gate: Gate) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__refund", {"order_id": "O-1", "amount": 500})
    assert result.is_error
    assert result.meta is not None
    approval_id = result.meta["callgate/approvalId"]
    assert f"approval_id: {approval_id}" in _text(result)
    approvals = await gate.approvals()
    (pending,) = await approvals.list()
    assert pending.id == approval_id
    assert pending.model_arguments == {"order_id": "O-1", "amount": 500}


async def test_approved_call_runs_when_called_again(client: Client, gate: Gate) -> None:
    args = {"order_id": "O-1", "amount": 500}
    with anyio.fail_after(5):
        first = await client.call_tool("shop__refund", args)
        assert first.meta is not None
        approvals = await gate.approvals()
        await approvals.approve(first.meta["callgate/approvalId"], by=Principal("boss", "acme"))
        second = await client.call_tool("shop__refund", args)
    assert not second.is_error
    assert second.structured_content == {"refunded": 500, "order": "O-1"}


async def test_truncated_result_carries_the_notice(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("shop__order_lines", {"n": 300})
    assert not result.is_error
    assert len(result.content) == 2
    notice = result.content[-1]
    assert isinstance(notice, types.TextContent)
    assert "truncated" in notice.text.lower()
    assert "call callgate__read_more with cursor" in notice.text


async def test_unknown_method_stays_a_protocol_error(client: Client) -> None:
    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
        await client.list_prompts()
    assert caught.value.error.code == types.METHOD_NOT_FOUND


async def test_default_principal_holds_every_served_scope(gate: Gate) -> None:
    principal = default_principal(gate)
    assert (principal.user, principal.tenant) == ("local", "acme")
    assert principal.scopes == {"orders:read", "orders:write", "admin"}
    server = build_server(gate, principal=principal)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
    assert "shop__purge" in names


@pytest.mark.parametrize("mode", MODES)
async def test_a_toolbox_can_be_served_without_its_prefix(gate: Gate, mode: str) -> None:
    server = build_server(gate, principal=ALICE, unprefixed=["shop"])
    with anyio.fail_after(5):
        async with Client(server, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("order_count", {"status": "closed"})
        records = await gate.audit()
    assert "order_count" in names and "shop__order_count" not in names
    assert result.is_error is False
    # Policy, audit and Envelopes keep the full name.
    assert records[-1].tool == "shop.order_count"


async def test_unprefixed_names_must_not_clash(gate: Gate) -> None:
    with pytest.raises(ValueError, match="no toolbox"):
        build_server(gate, principal=ALICE, unprefixed=["nope"])
