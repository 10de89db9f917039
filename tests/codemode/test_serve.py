"""``callgate serve --code-mode`` as a real process, used by the official SDK client at
both protocol generations; ``callgate run --code-mode`` against a model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.cli.test_run import callgate_run, fake_openai, text, tool_call
from tests.mcp.serving import audit_of, serve_http

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROGRAM = """
found = await ops.campaigns_find(query="Autumn Sale", limit=10)
active = [c["id"] for c in found if c["status"] == "active"]
print(len(found), "found")
active
"""


def _text(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_host_runs_a_program_through_callgate_serve(tmp_path: Path, mode: str) -> None:
    store = f"sqlite:///{tmp_path / 'c.db'}"
    async with serve_http("--store", store, "--code-mode", "--discovery", "direct") as (url, _):
        with anyio.fail_after(60):
            async with Client(url, mode=mode) as client:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert {"callgate__run_code", "callgate__code_functions"} <= listed
                stubs = await client.call_tool("callgate__code_functions", {})
                assert "async def campaigns_find(" in _text(stubs)
                answer = await client.call_tool("callgate__run_code", {"code": PROGRAM})

    assert not answer.is_error, _text(answer)
    payload = json.loads(_text(answer))
    assert payload == {"result": ["C-101", "C-102"], "printed": "3 found\n", "calls": 1}
    records = {r.tool: r for r in await audit_of(store) if r.phase == "final"}
    run = records["callgate.run_code"]
    assert records["ops.campaigns_find"].detail["parent_call_id"] == run.call_id


async def test_callgate_run_code_mode_offers_the_program_tool(tmp_path: Path) -> None:
    turns = [tool_call("run_code", {"code": PROGRAM}), text("C-101 and C-102 are active.")]
    async with fake_openai(turns) as (url, fake):
        done = await callgate_run(
            tmp_path,
            "Which Autumn Sale campaigns are active?",
            "--code-mode",
            "--provider",
            "openai-compatible",
            "--base-url",
            url,
            "--model",
            "fake-model",
        )
    assert done.returncode == 0, done.stderr.decode()
    tools: list[dict[str, Any]] = fake.requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["callgate__run_code"]
    assert "async def campaigns_find(" in tools[0]["function"]["description"]
    result = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")
    assert json.loads(result["content"])["result"] == ["C-101", "C-102"]
