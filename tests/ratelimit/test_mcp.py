"""Over MCP, a call over its limit is the tool's error result, naming the tool the host's way."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client

from callgate import Gate
from callgate.mcp import build_server
from callgate.ratelimit import parse_rate_limits
from callgate.store import MemoryStore

from .conftest import ALICE, ops

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_host_gets_an_error_result_saying_when_to_call_again(mode: str) -> None:
    box, ran = ops()
    limits = parse_rate_limits({"per_tool": {"ops.deploy_rollback": "2/hour"}}, "callgate.toml")
    async with Gate([box], store=MemoryStore(), rate_limits=limits) as gate:
        server = build_server(gate, principal=ALICE)
        with anyio.fail_after(5):
            async with Client(server, mode=mode) as client:
                results = [
                    await client.call_tool("ops__deploy_rollback", {"deploy_id": f"D-{n}"})
                    for n in range(3)
                ]
        final = [r for r in await gate.audit() if r.phase == "final"]

    assert [r.is_error for r in results] == [False, False, True]
    text = "\n".join(b.text for b in results[2].content if isinstance(b, types.TextContent))
    assert "the limit of 2/hour calls of ops__deploy_rollback is used up" in text
    assert "30 minutes" in text
    assert ran["deploy_rollback"] == 2
    assert [r.decision for r in final] == ["allow", "allow", "refused:rate_limit"]
