"""callgate's own tools are offered to the model only once they can be used, and after
the caller's: a small model offered ``read_more`` with nothing truncated calls it
instead of the tools that do the work."""

from __future__ import annotations

import anyio
import pytest

from callgate import Gate, Limits, Policy, Principal, Rule, Toolbox
from callgate.agent import ModelRequest, ScriptedModel, call, reply
from callgate.agent.loop import Agent
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"crm:read", "crm:write"})
CAROL = Principal("carol", tenant="acme")
POLICY = Policy([Rule("require_approval", tools=["crm.send"], reason="mail needs a second person")])


def crm() -> Toolbox:
    box = Toolbox("crm")

    @box.tool(scopes={"crm:read"}, read_only=True, open_world=False)
    def contacts(city: str) -> list[str]:
        """List the contacts in a city.

        Args:
            city: The city.
        """
        return [f"contact {i} in {city}" for i in range(400)]

    @box.tool(scopes={"crm:write"}, idempotent=False, open_world=False)
    def send(to: str) -> str:
        """Send the newsletter to one contact.

        Args:
            to: The contact.
        """
        return f"sent to {to}"

    return box


def offered(request: ModelRequest) -> list[str]:
    return [tool.name for tool in request.tools]


async def test_a_two_tool_toolbox_is_offered_its_two_tools_only() -> None:
    model = ScriptedModel([reply("Nothing to do.")])
    async with Gate([crm()], store=MemoryStore()) as gate:
        with anyio.fail_after(10):
            await Agent(gate, model, principal=ALICE).run("Hi")
    assert offered(model.requests[0]) == ["crm.contacts", "crm.send"]


async def test_read_more_is_offered_after_a_truncated_result_and_after_the_callers_tools() -> None:
    model = ScriptedModel([call("crm.contacts", {"city": "Oslo"}), reply("400 contacts.")])
    limits = Limits(max_result_tokens=200)
    async with Gate([crm()], store=MemoryStore(), limits=limits) as gate:
        with anyio.fail_after(10):
            result = await Agent(gate, model, principal=ALICE).run("Who is in Oslo?")
    assert result.status == "completed"
    assert "callgate.read_more" in result.messages[2].results[0].content  # type: ignore[union-attr]
    assert offered(model.requests[0]) == ["crm.contacts", "crm.send"]
    assert offered(model.requests[1]) == ["crm.contacts", "crm.send", "callgate.read_more"]


async def test_approval_status_is_offered_once_a_call_of_the_run_waited_for_approval() -> None:
    model = ScriptedModel([call("crm.send", {"to": "Ann"}), reply("Sent.")])
    async with Gate([crm()], store=MemoryStore(), policy=POLICY) as gate:
        agent = Agent(gate, model, principal=ALICE)
        with anyio.fail_after(10):
            waiting = await agent.run("Send it to Ann")
            [approval_id] = waiting.pending_approvals
            await (await gate.approvals()).approve(approval_id, by=CAROL)
            done = await agent.resume(waiting.run_id)
    assert done.status == "completed"
    assert offered(model.requests[0]) == ["crm.contacts", "crm.send"]
    assert offered(model.requests[1]) == ["crm.contacts", "crm.send", "callgate.approval_status"]


async def test_callgates_own_tools_named_by_the_caller_are_offered_last() -> None:
    model = ScriptedModel([reply("Nothing to do.")])
    async with Gate([crm()], store=MemoryStore()) as gate:
        agent = Agent(gate, model, principal=ALICE, tools=["callgate.read_more", "crm.send"])
        with anyio.fail_after(10):
            await agent.run("Hi")
    assert offered(model.requests[0]) == ["crm.send", "callgate.read_more"]


async def test_a_model_offered_some_tools_cannot_call_the_others() -> None:
    # The principal may send, but this agent offers only contacts: a model that
    # names crm.send anyway (it knows the name from elsewhere) is refused, and
    # the close matches it reads are only tools it was offered.
    model = ScriptedModel([call("crm.send", {"to": "bob"}), reply("Could not send.")])
    async with Gate([crm()], store=MemoryStore()) as gate:
        agent = Agent(gate, model, principal=ALICE, tools=["crm.contacts"])
        with anyio.fail_after(10):
            result = await agent.run("Send bob the newsletter.")
        records = await gate.store.list_audit()

    [outcome] = result.calls
    assert outcome.error_kind == "construction"
    [tool_result] = model.requests[1].messages[-1].results  # type: ignore[union-attr]
    assert "Unknown tool 'crm.send'" in tool_result.content
    assert "Did you mean" not in tool_result.content  # crm.send is the closest, not offered
    # Recorded as any refused call: nothing was sent.
    assert [(r.tool, r.status) for r in records] == [("crm.send", "error")]
