"""``ForcedTool(name)`` as docs/agent.md writes it: a forced tool ends the run after its call."""

from __future__ import annotations

import anyio
import pytest

from callgate import Gate, Principal, Toolbox
from callgate.agent import ForcedTool, ScriptedModel, call
from callgate.agent.loop import Agent
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")


def invoices() -> Toolbox:
    box = Toolbox("invoices")

    @box.tool(read_only=True, open_world=False)
    def record(number: str, total: float) -> dict[str, object]:
        """Record the invoice's fields exactly as read from the document.

        Args:
            number: The invoice number.
            total: The total amount.
        """
        return {"number": number, "total": total}

    return box


async def test_the_documented_positional_form_forces_the_tool() -> None:
    fields = {"number": "INV-7", "total": 120.5}
    model = ScriptedModel([call("invoices.record", fields)])
    async with Gate([invoices()], store=MemoryStore()) as gate:
        agent = Agent(gate, model, principal=ALICE, tool_choice=ForcedTool("invoices.record"))
        with anyio.fail_after(10):
            result = await agent.run("INV-7, total 120.50")
    assert ForcedTool("invoices.record") == ForcedTool(name="invoices.record")
    assert model.requests[0].tool_choice == ForcedTool(name="invoices.record")
    assert result.status == "completed" and result.calls[0].payload == fields
