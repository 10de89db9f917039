"""The switch between every tool and the meta-tools: in the agent loop, and through
the MCP server as the official SDK client sees it (both protocol generations, and
over HTTP with ``?tools=search``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from callgate import Gate, Principal, Toolbox
from callgate.agent import ModelRequest, ScriptedModel, call, reply
from callgate.agent.loop import Agent
from callgate.agent.names import OPENAI_NAMES
from callgate.discovery import DiscoveryRule, DiscoverySettings
from callgate.mcp import build_server
from callgate.store import MemoryStore
from tests.discovery.catalogue import catalogue
from tests.mcp.serving import serve_asgi

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
META = ["callgate.call_tool", "callgate.describe_tools", "callgate.search_tools"]


def many(count: int) -> Toolbox:
    """``count`` plain read tools (``bulk.report_0``...), to pass the threshold."""
    box = Toolbox("bulk")
    for index in range(count):

        def report() -> str:
            """Make a report."""
            return "ok"

        report.__name__ = f"report_{index}"
        report.__doc__ = f"Make the quarterly report number {index} for the finance team."
        box.tool(read_only=True, open_world=False)(report)
    return box


def settings(**options: Any) -> DiscoverySettings:
    return DiscoverySettings(embeddings="off", **options)


def offered(request: ModelRequest) -> list[str]:
    return [tool.name for tool in request.tools]


async def run(gate: Gate, steps: Iterable[Any], **options: Any) -> ScriptedModel:
    model = ScriptedModel(list(steps))
    with anyio.fail_after(20):
        result = await Agent(gate, model, principal=ALICE, **options).run("Do it")
    assert result.status == "completed", result.reason
    return model


# -- the agent loop ------------------------------------------------------------------
async def test_a_small_catalogue_is_offered_directly() -> None:
    async with Gate(catalogue(), store=MemoryStore(), discovery=settings()) as gate:
        model = await run(gate, [reply("Done.")])

    assert "mail.send_email" in offered(model.requests[0])
    assert not set(META) & set(offered(model.requests[0]))


async def test_above_the_threshold_the_model_searches_describes_and_calls() -> None:
    async with Gate([*catalogue(), many(20)], store=MemoryStore(), discovery=settings()) as gate:
        model = await run(
            gate,
            [
                call("callgate.search_tools", {"query": "send an email"}),
                call("callgate.describe_tools", {"names": ["mail.send_email"]}),
                call(
                    "callgate.call_tool",
                    {
                        "name": "mail.send_email",
                        "arguments": {"to": "bob@acme.example", "subject": "Hi", "body": "Hello"},
                    },
                ),
                reply("Sent."),
            ],
        )
        audit = await gate.audit()

    first, *_ = model.requests
    assert offered(first) == META
    results = [m for m in model.requests[-1].messages if getattr(m, "results", None)]
    texts = [r.content for m in results for r in m.results]  # type: ignore[attr-defined]
    assert "mail.send_email" in texts[0]  # found first
    assert "recipient" in texts[1]  # described
    assert texts[2] == "sent"
    assert [r.tool for r in audit if r.phase == "final"] == [
        "callgate.search_tools",
        "callgate.describe_tools",
        "mail.send_email",
    ]
    # The array stayed the same on every request: prompt caches hold.
    assert all(offered(request) == META for request in model.requests)


async def test_the_threshold_counts_tools_and_is_configurable() -> None:
    async with Gate(catalogue(), store=MemoryStore(), discovery=settings(max_tools=3)) as gate:
        model = await run(gate, [reply("Done.")])
    assert offered(model.requests[0]) == META


async def test_the_threshold_counts_the_share_of_the_context_window() -> None:
    async with Gate(catalogue(), store=MemoryStore(), discovery=settings()) as gate:
        small_window = await run(gate, [reply("Done.")], context_window=2_000)
        large_window = await run(gate, [reply("Done.")], context_window=1_000_000)
    assert offered(small_window.requests[0]) == META
    assert offered(large_window.requests[0]) != META


async def test_an_agent_can_ask_for_either_mode() -> None:
    async with Gate([*catalogue(), many(20)], store=MemoryStore(), discovery=settings()) as gate:
        direct = await run(gate, [reply("Done.")], discovery="direct")
    async with Gate(catalogue(), store=MemoryStore(), discovery=settings()) as gate:
        search = await run(gate, [reply("Done.")], discovery="search")
    assert len(offered(direct.requests[0])) > 20
    assert offered(search.requests[0]) == META


async def test_pinned_tools_are_offered_beside_the_meta_tools() -> None:
    pin = settings(mode="search", rules=(DiscoveryRule(action="pin", tools=("ops.deploy_*",)),))
    async with Gate(catalogue(), store=MemoryStore(), discovery=pin) as gate:
        model = await run(gate, [reply("Done.")])
    assert offered(model.requests[0]) == [
        "ops.deploy_rollback",
        "ops.deploy_status",
        *META,
    ]


async def test_described_tools_join_the_array_when_configured() -> None:
    expose = settings(mode="search", expose_described=True)
    async with Gate(catalogue(), store=MemoryStore(), discovery=expose) as gate:
        model = await run(
            gate,
            [
                call("callgate.describe_tools", {"names": ["ops.deploy_status"]}),
                call("ops.deploy_status", {"deploy_id": "D-1"}),
                reply("Running."),
            ],
        )
    assert offered(model.requests[0]) == META
    assert offered(model.requests[1]) == ["ops.deploy_status", *META]


async def test_a_model_with_provider_names_calls_through_call_tool_by_them() -> None:
    async with Gate([*catalogue(), many(20)], store=MemoryStore(), discovery=settings()) as gate:
        model = ScriptedModel(
            [
                call("callgate.search_tools", {"query": "deployment state"}),
                call(
                    "callgate.call_tool",
                    {"name": "ops__deploy_status", "arguments": {"deploy_id": "D-9"}},
                ),
                reply("Done."),
            ]
        )
        model.name_rule = OPENAI_NAMES  # type: ignore[attr-defined]
        with anyio.fail_after(20):
            result = await Agent(gate, model, principal=ALICE).run("Where is D-9?")
        audit = await gate.audit()

    assert result.status == "completed"
    found = [m for m in model.requests[1].messages if getattr(m, "results", None)]
    assert "ops__deploy_status" in found[0].results[0].content  # type: ignore[attr-defined]
    assert "ops.deploy_status" in [r.tool for r in audit]


# -- the MCP server --------------------------------------------------------------------
def _names(result: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in result.tools]


def _json(result: types.CallToolResult) -> Any:
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    return json.loads(text)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_mcp_client_is_listed_the_meta_tools_and_can_call_through_them(
    mode: str,
) -> None:
    async with Gate([*catalogue(), many(20)], store=MemoryStore(), discovery=settings()) as gate:
        server = build_server(gate, principal=ALICE)
        with anyio.fail_after(10):
            async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
                listed = _names(await client.list_tools())
                found = _json(
                    await client.call_tool("callgate__search_tools", {"query": "roll back"})
                )
                done = await client.call_tool(
                    "callgate__call_tool",
                    {"name": "ops__deploy_status", "arguments": {"deploy_id": "D-1"}},
                )
                hidden = await client.call_tool("ops__deploy_status", {"deploy_id": "D-2"})

    assert listed == [
        "callgate__approval_status",
        "callgate__call_tool",
        "callgate__describe_tools",
        "callgate__read_more",
        "callgate__search_tools",
    ]
    assert found["tools"][0]["name"] == "ops__deploy_rollback"
    assert not done.is_error and _json(done) == {"id": "D-1"}
    assert not hidden.is_error  # not listed is not forbidden: it is checked like any call


async def test_a_client_named_in_the_config_gets_its_mode() -> None:
    per_client = settings(clients={"picky-host": "search"})
    async with Gate(catalogue(), store=MemoryStore(), discovery=per_client) as gate:
        server = build_server(gate, principal=ALICE)
        with anyio.fail_after(10):
            async with Client(
                server,
                mode="legacy",
                client_info=types.Implementation(name="picky-host", version="1"),
            ) as picky:
                picky_tools = _names(await picky.list_tools())
            async with Client(server, mode="2026-07-28") as other:
                other_tools = _names(await other.list_tools())

    assert "callgate__search_tools" in picky_tools and "mail__send_email" not in picky_tools
    assert "mail__send_email" in other_tools and "callgate__search_tools" not in other_tools


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_http_client_opts_in_with_the_endpoint_url(mode: str) -> None:
    from callgate.mcp import streamable_http_app

    async with Gate(catalogue(), store=MemoryStore(), discovery=settings()) as gate:
        server = build_server(gate, principal=ALICE)
        async with serve_asgi(streamable_http_app(server)) as url:
            with anyio.fail_after(15):
                async with Client(url + "?tools=search", mode=mode) as searching:  # type: ignore[arg-type]
                    opted = _names(await searching.list_tools())
                async with Client(url, mode=mode) as plain:  # type: ignore[arg-type]
                    direct = _names(await plain.list_tools())

    assert "callgate__search_tools" in opted and "mail__send_email" not in opted
    assert "mail__send_email" in direct
