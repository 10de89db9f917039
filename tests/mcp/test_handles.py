"""Handles over MCP: an unknown, expired or other caller's handle is a tool error result."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import mcp_types as types
import pytest
from mcp import Client

from callgate import Gate, Principal
from callgate.demo import demo_policy, toolboxes
from callgate.mcp import build_server
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
ALICE = Principal("alice@acme.example", tenant="acme", scopes={"notes:read"})
BOB = Principal("bob@acme.example", tenant="acme", scopes={"notes:read"})


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with Gate(toolboxes(), store=MemoryStore(), policy=demo_policy()) as gate:
        yield gate


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_handle_works_for_its_owner_only(gate: Gate, mode: str) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(gate, principal=ALICE), mode=mode) as alice:
            started = await alice.call_tool("ops__runbook_start", {"note_id": "N-1"})
            assert not started.is_error, _text(started)
            assert started.structured_content is not None
            run = started.structured_content["run"]
            done = await alice.call_tool("ops__runbook_step_done", {"run": run, "step": 1})
        async with Client(build_server(gate, principal=BOB), mode=mode) as bob:
            theirs = await bob.call_tool("ops__runbook_status", {"run": run})
            made_up = await bob.call_tool("ops__runbook_status", {"run": "run_nosuchrun"})

    assert not done.is_error and done.structured_content is not None
    assert done.structured_content["done"] == 1
    # An execution error, not a JSON-RPC error: the model reads it and can act on it.
    for result in (theirs, made_up):
        assert result.is_error
        text = _text(result)
        assert "is unknown or expired. Runbook runs live 2 hours after their last change." in text
        assert "Next step: Create a new one with ops__runbook_start" in text
    assert _text(theirs).replace(run, "run_nosuchrun") == _text(made_up)
    assert "checkout" not in _text(theirs)
