"""What the model reads names tools as the model calls them: a provider that knows
``shop__order_count`` is never told to call ``shop.order_count``."""

from __future__ import annotations

from typing import Literal

import anyio
import pytest

from callgate import Gate, Principal, Toolbox
from callgate.agent import ModelRequest, ScriptedModel, ToolResults, call, reply
from callgate.agent.loop import Agent
from callgate.agent.names import ANTHROPIC_NAMES, NameMap
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"shop:read"})


def shop() -> Toolbox:
    box = Toolbox("shop")

    @box.tool(scopes={"shop:read"}, read_only=True, open_world=False)
    def order_count(status: Literal["open", "closed"]) -> int:
        """Count orders in one status; find one with shop.order_find first.

        Args:
            status: open or closed (see shop.order_find).
        """
        return 7

    @box.tool(scopes={"shop:read"}, read_only=True, open_world=False)
    def order_find(query: str) -> list[str]:
        """Find orders."""
        return []

    return box


def _results(request: ModelRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, ToolResults)
    return "\n".join(result.content for result in last.results)


async def test_a_provider_model_reads_its_own_names_in_hints_and_descriptions() -> None:
    model = ScriptedModel([call("shop.order_count", {"status": "opne"}), reply("done")])
    model.name_rule = ANTHROPIC_NAMES  # type: ignore[attr-defined]  # as the Anthropic adapter
    async with Gate([shop()], store=MemoryStore()) as gate:
        with anyio.fail_after(10):
            await Agent(gate, model, principal=ALICE).run("how many?")
    provider = NameMap(["shop.order_count"], ANTHROPIC_NAMES).to_provider("shop.order_count")
    assert provider == "shop__order_count"
    fed_back = _results(model.requests[1])
    assert "call shop__order_count again" in fed_back
    assert "shop.order_count" not in fed_back
    tool = next(t for t in model.requests[0].tools if t.name == "shop.order_count")
    assert "find one with shop__order_find first" in tool.description
    assert "see shop__order_find" in str(tool.input_schema)


async def test_a_model_without_a_naming_rule_reads_the_full_names() -> None:
    model = ScriptedModel([call("shop.order_count", {"status": "opne"}), reply("done")])
    async with Gate([shop()], store=MemoryStore()) as gate:
        with anyio.fail_after(10):
            await Agent(gate, model, principal=ALICE).run("how many?")
    assert "call shop.order_count again" in _results(model.requests[1])
