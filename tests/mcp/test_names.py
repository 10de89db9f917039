"""Tool names on the wire: host-safe by default, the dotted form on request, refused
when ambiguous or too long, and every text the model reads naming tools the same way."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate, Principal, Toolbox
from callgate.contract import ToolContext
from callgate.demo import demo_policy, toolboxes
from callgate.discovery import DiscoverySettings
from callgate.errors import ConstructionError
from callgate.mcp import build_server
from callgate.store import MemoryStore
from tests.mcp.tools import ALICE, build_gate

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
HOST_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with build_gate() as gate:
        yield gate


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_every_name_a_client_sees_is_host_safe(gate: Gate, mode: str) -> None:
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("shop__order_get", {"order_id": "O-1"})
    assert names and all(HOST_SAFE.match(name) for name in names), names
    assert {"shop__order_get", "callgate__read_more"} <= set(names)
    assert names == sorted(names)
    assert not result.is_error
    # The audit and policy keep callgate's own names.
    assert [r.tool for r in await gate.audit()] == ["shop.order_get"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_dotted_names_are_an_option(gate: Gate, mode: str) -> None:
    server = build_server(gate, principal=ALICE, tool_separator=".")
    with anyio.fail_after(5):
        async with Client(server, mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("shop.order_get", {"order_id": "O-1"})
            with pytest.raises(MCPError) as other:
                await client.call_tool("shop__order_get", {"order_id": "O-1"})
    assert "shop.order_get" in names and "shop__order_get" not in names
    assert not result.is_error
    assert other.value.error.code == types.INVALID_PARAMS


async def test_a_full_name_is_not_an_alias_of_the_wire_name(gate: Gate) -> None:
    # A name is the tool it was made from, or no tool: nothing is guessed.
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("shop.order_get", {"order_id": "O-1"})
    assert caught.value.error.code == types.INVALID_PARAMS
    assert "Did you mean 'shop__order_get'" in caught.value.error.message


def _box(name: str, *tools: str) -> Toolbox:
    box = Toolbox(name)
    for tool_name in tools:

        def fn() -> str:
            """Answer."""
            return "ok"

        fn.__name__ = tool_name
        box.tool(read_only=True)(fn)
    return box


async def test_two_tools_that_would_share_a_name_are_refused_at_start() -> None:
    gate = Gate([_box("a_b", "c"), _box("a", "b_c")], store="memory://")
    with pytest.raises(ValueError, match=r"'a\.b_c' and 'a_b\.c' would both be served as 'a_b_c'"):
        build_server(gate, principal=ALICE, tool_separator="_")
    # The default separator tells them apart.
    server = build_server(gate, principal=ALICE)
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
    assert {"a_b__c", "a__b_c"} <= names


async def test_a_name_over_64_characters_is_refused_at_start() -> None:
    gate = Gate([_box("warehouse_inventory", "reconcile_" + "x" * 40)], store="memory://")
    with pytest.raises(ValueError, match="71 characters; hosts accept at most 64") as caught:
        build_server(gate, principal=ALICE)
    assert "serve its toolbox unprefixed" in str(caught.value)
    # Served unprefixed, it fits.
    build_server(gate, principal=ALICE, unprefixed=["warehouse_inventory"])


async def test_a_served_toolbox_that_gains_and_loses_tools_is_named_in_step() -> None:
    # A gateway adds an upstream's tools one by one while serving; each new name
    # is checked when it is added.
    box = _box("a_b", "c")
    other = _box("a")
    # Listed directly, all 31 (above 15 the meta-tools would be listed instead).
    gate = Gate([box, other], store="memory://", discovery=DiscoverySettings(mode="direct"))
    server = build_server(gate, principal=ALICE, tool_separator="_")
    with pytest.raises(ValueError, match=r"'a\.b_c' and 'a_b\.c' would both be served as 'a_b_c'"):
        other.tool(read_only=True)(_named("b_c"))
    other.remove("b_c")
    for index in range(30):
        other.tool(read_only=True)(_named(f"t{index}"))
    box.remove("c")
    other.tool(read_only=True)(_named("b_c"))  # the name 'a_b_c' is free again
    with anyio.fail_after(5):
        async with Client(server, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("a_b_c", {})
    assert {n for n in names if not n.startswith("callgate_")} == {
        "a_b_c",
        *(f"a_t{i}" for i in range(30)),
    }
    assert not result.is_error
    assert [r.tool for r in await gate.audit()][-1] == "a.b_c"


def _named(name: str) -> Callable[[], str]:
    def fn() -> str:
        """Answer."""
        return "ok"

    fn.__name__ = name
    return fn


@pytest.mark.parametrize("separator", ["", "/", "::", "a", "_____"])
async def test_an_unusable_separator_is_refused(gate: Gate, separator: str) -> None:
    with pytest.raises(ValueError, match="tool separator"):
        build_server(gate, principal=ALICE, tool_separator=separator)


# -- texts name tools as the client sees them ------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_unprefixed_texts_name_the_bare_tools(gate: Gate, mode: str) -> None:
    # The case: --unprefixed shop, and the texts said "call shop.order_count".
    server = build_server(gate, principal=ALICE, unprefixed=["shop"])
    with anyio.fail_after(5):
        async with Client(server, mode=mode) as client:
            invalid = await client.call_tool("order_count", {"status": "opne"})
            parked = await client.call_tool("refund", {"order_id": "O-1", "amount": 500})
            long = await client.call_tool("order_lines", {"n": 300})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("order_gets", {"order_id": "O-1"})
    notice = long.content[-1]
    assert isinstance(notice, types.TextContent)
    texts = [_text(invalid), _text(parked), notice.text, unknown.value.error.message]
    assert "call order_count again" in _text(invalid)
    assert "call refund again with exactly the same arguments" in _text(parked)
    assert "call callgate__read_more with cursor" in notice.text
    assert "Did you mean 'order_get'" in unknown.value.error.message
    for text in texts:
        assert "shop." not in text and "callgate.read_more" not in text, text


ALICE_OPS = Principal(
    "alice@acme.example",
    tenant="acme",
    scopes={"campaigns:read", "campaigns:write", "notes:read"},
    attributes={"domain": "acme.example"},
)


@pytest.mark.parametrize("mode", MODES)
async def test_preview_apply_hints_and_descriptions_use_the_wire_names(mode: str) -> None:
    gate = Gate(toolboxes(), store=MemoryStore(), policy=demo_policy())
    server = build_server(gate, principal=ALICE_OPS)
    change = {"campaign_id": "C-101", "new_daily_budget": 1500}
    async with gate:
        with anyio.fail_after(10):
            async with Client(server, mode=mode) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                preview = await client.call_tool("ops__budget_change_preview", change)
                big = await client.call_tool(
                    "ops__budget_change_preview", {**change, "new_daily_budget": 900_000}
                )
                stale = await client.call_tool(
                    "ops__budget_change_apply", {"preview_id": "pv_nosuchpreview"}
                )
    assert not preview.is_error and isinstance(preview.structured_content, dict)
    assert (
        "call ops__budget_change_apply with this preview_id"
        in (preview.structured_content["next_step"])
    )
    assert isinstance(big.structured_content, dict)
    assert (
        "call ops__budget_change_apply with this preview_id"
        in (big.structured_content["next_step"])
    )
    assert "Call ops__budget_change_preview again" in _text(stale)
    # Descriptions, and the descriptions in schemas, name sibling tools as listed.
    find = tools["ops__budget_change_preview"]
    assert find.description is not None and "ops__campaigns_find" in find.description
    assert "ops.campaigns_find" not in find.description
    schema_text = str(find.input_schema)
    assert "ops__campaigns_find" in schema_text and "ops.campaigns_find" not in schema_text


async def test_a_tool_names_other_tools_through_its_context() -> None:
    box = Toolbox("crm")

    @box.tool(read_only=True)
    def lookup(customer_id: str, ctx: ToolContext) -> str:
        """Look a customer up by id."""
        raise ConstructionError(
            f"No customer {customer_id!r}.",
            next_step=f"Find the id with {ctx.shown('search')}.",
        )

    @box.tool(read_only=True)
    def search(query: str) -> list[str]:
        """Search customers by name."""
        return []

    gate = Gate([box], store="memory://")
    server = build_server(gate, principal=ALICE)
    async with gate:
        with anyio.fail_after(5):
            async with Client(server, mode="legacy") as client:
                result = await client.call_tool("crm__lookup", {"customer_id": "X"})
    assert "Find the id with crm__search." in _text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_s_own_error_text_names_tools_as_the_client_sees_them(mode: str) -> None:
    gate = Gate(toolboxes(), store=MemoryStore(), policy=demo_policy())
    server = build_server(gate, principal=ALICE_OPS)
    async with gate:
        with anyio.fail_after(10):
            async with Client(server, mode=mode) as client:
                # The demo's message was written with full names ("... with ops.campaigns_find").
                unknown = await client.call_tool(
                    "ops__budget_change_preview",
                    {"campaign_id": "C-999", "new_daily_budget": 1500},
                )
    text = _text(unknown)
    assert unknown.is_error
    assert "ops__campaigns_find" in text and "ops.campaigns_find" not in text
