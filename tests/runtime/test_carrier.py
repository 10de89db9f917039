"""The Envelope carries every outcome a caller needs, whoever the caller is.

A call waiting for the client's answer is ``pending_input`` with what is asked; a
call parked for a human names its approval in a typed field; a tool that needed a
client capability says which; and one text is what any model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from callgate import Gate, Policy, Principal, Rule, Status, Toolbox, ToolContext
from callgate.agent.messages import ToolCall
from callgate.agent.tools import result_for
from callgate.contract import LogLevel
from callgate.contract.context import ClientCannot, Elicitation, InputRequired, Root
from callgate.errors import ErrorKind
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")


class AskingSink:
    """A client that answers in rounds: every question is pending until answered."""

    def __init__(self, answers: Mapping[str, Any] | None = None) -> None:
        self.answers = dict(answers or {})
        self.pending: dict[str, dict[str, Any]] = {}

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        pass

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        pass

    async def elicit(self, message: str, schema: Mapping[str, Any], key: str | None) -> Elicitation:
        name = key or "ask"
        if name in self.answers:
            return Elicitation("accept", self.answers[name])
        self.pending[name] = {"method": "elicitation/create", "params": {"message": message}}
        raise InputRequired(self.pending)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        raise ClientCannot("sampling", "sample its model (sampling)")

    async def list_roots(self, key: str | None) -> list[Root]:
        name = key or "roots"
        self.pending[name] = {"method": "roots/list"}
        raise InputRequired(self.pending)


def _toolbox(ran: list[str]) -> Toolbox:
    box = Toolbox("ops")

    @box.tool(destructive=True, idempotent=False)
    async def rename(ctx: ToolContext) -> str:
        """Rename the project after asking its new name and the roots."""
        answer, _roots = await ctx.ask_all(
            ctx.elicit("New name?", {"type": "object"}, key="name"),
            ctx.list_roots(key="roots"),
        )
        ran.append("renamed")
        return f"renamed to {(answer.content or {}).get('name')}"

    @box.tool(read_only=True)
    async def summarize(ctx: ToolContext) -> str:
        """Summarize with the client's model."""
        return await ctx.sample("Summarize", max_tokens=10)

    @box.tool(destructive=True)
    def wipe() -> str:
        """Wipe the disk."""
        return "wiped"

    return box


async def test_a_call_waiting_for_the_client_is_pending_input_with_every_question() -> None:
    ran: list[str] = []
    async with Gate([_toolbox(ran)], store=MemoryStore()) as gate:
        envelope = await gate.call(
            "ops.rename", {}, principal=ALICE, sink=AskingSink(), idempotency_key="k1"
        )
        [record] = [r for r in await gate.audit(call_id=envelope.call_id) if r.phase == "final"]

        assert envelope.status is Status.PENDING_INPUT
        assert envelope.input is not None
        # Both questions of the round, though the tool raised for the first.
        assert envelope.input.requests == {
            "name": {"method": "elicitation/create", "params": {"message": "New name?"}},
            "roots": {"method": "roots/list"},
        }
        assert ran == []
        assert (record.status, record.outcome) == ("pending_input", "pending_input")

        # Nothing happened yet, so the key is free: the answered round runs the tool.
        sink = AskingSink({"name": {"name": "Atlas"}})
        sink.list_roots = _no_roots  # type: ignore[method-assign]
        again = await gate.call("ops.rename", {}, principal=ALICE, sink=sink, idempotency_key="k1")
    assert again.status is Status.OK and again.payload == "renamed to Atlas"
    assert ran == ["renamed"]


async def _no_roots(key: str | None) -> list[Root]:
    return []


async def test_a_missing_client_capability_is_named_in_the_error() -> None:
    async with Gate([_toolbox([])], store=MemoryStore()) as gate:
        envelope = await gate.call("ops.summarize", {}, principal=ALICE, sink=AskingSink())

    assert envelope.error is not None
    assert envelope.error.kind is ErrorKind.CONSTRUCTION
    assert envelope.error.missing_capability == "sampling"
    assert "cannot sample its model" in envelope.error.message_for_model


async def test_a_parked_call_names_its_approval_in_a_typed_field() -> None:
    policy = Policy([Rule("require_approval", tools=["ops.wipe"], reason="wiping needs a human")])
    async with Gate([_toolbox([])], store=MemoryStore(), policy=policy) as gate:
        envelope = await gate.call("ops.wipe", {}, principal=ALICE)
        record = await (await gate.approvals()).get(envelope.approval.approval_id)  # type: ignore[union-attr]

    assert envelope.status is Status.PENDING_APPROVAL
    assert envelope.payload is None
    assert envelope.approval is not None
    assert (envelope.approval.state, envelope.approval.reason) == (
        "pending",
        "wiping needs a human",
    )
    assert record is not None and record.tool == "ops.wipe"
    assert envelope.approval.expires_at == record.expires_at
    # The model reads the id in the explanation, and the JSON round-trips it.
    assert f"approval_id: {record.id}" in envelope.for_model()
    assert envelope.model_validate_json(envelope.model_dump_json()).approval == envelope.approval


async def test_the_agent_loop_shows_the_model_the_envelopes_one_text() -> None:
    policy = Policy([Rule("require_approval", tools=["ops.wipe"], reason="wiping needs a human")])
    async with Gate([_toolbox([])], store=MemoryStore(), policy=policy) as gate:
        parked = await gate.call("ops.wipe", {}, principal=ALICE)
        refused = await gate.call("ops.nothing", {}, principal=ALICE)

    for envelope in (parked, refused):
        result = result_for(ToolCall(id="c1", name="ops.wipe", arguments={}), envelope)
        assert result.content == envelope.for_model() == envelope.explanation()
        assert result.is_error
    assert parked.for_model().splitlines()[1].startswith("Next step: Tell the user")


async def test_a_tool_raising_input_required_itself_asks_nothing_and_fails() -> None:
    box = Toolbox("odd")

    @box.tool(read_only=True)
    def wait() -> str:
        """Raise the sink's signal without asking anything."""
        raise InputRequired()

    async with Gate([box], store=MemoryStore()) as gate:
        envelope = await gate.call("odd.wait", {}, principal=ALICE, sink=AskingSink())

    # Nothing was asked, so there is nothing a client could answer: an error, not a wait.
    assert envelope.status is Status.ERROR and envelope.input is None
    assert envelope.error is not None and envelope.error.kind is ErrorKind.BUSINESS_STATE
