"""Approvals through the protocol: the human at the client sees the exact inputs and decides.

At 2026-07-28 the parked call answers ``input_required`` with a form-mode elicitation
and a sealed ``requestState``; at 2025-11-25 the elicitation is a request on the call's
stream. Either way the decision is audited and the approved call runs through the
governed chain again. Approvals that need another person, and clients that cannot be
asked, get ``pending_approval`` with the approval id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.context import ClientRequestContext

from callgate import Gate, Policy, Principal, Rule, Toolbox, Trusted
from callgate.mcp import build_server
from callgate.mcp._approval import APPROVAL_KEY
from callgate.store import MemoryStore
from tests.mcp.serving import audit_of, serve_http

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
ALICE = Principal("alice", tenant="acme", scopes={"bank:write"})
PAY = {"to": "bob", "amount": 5000}
POLICY = Policy(
    [
        Rule(
            "require_approval",
            tools=["bank.pay"],
            when="args.amount > 1000",
            reason="payments over 1,000 need a human",
            approved_by="requester",
            name="big-payment",
        ),
        Rule("require_approval", tools=["bank.wire"], reason="wires need a second person"),
    ]
)


class Bank:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def toolbox(self) -> Toolbox:
        box = Toolbox("bank")

        @box.tool(scopes={"bank:write"}, idempotent=False, open_world=False)
        def pay(to: str, amount: int, tenant_id: Trusted[str]) -> str:
            """Pay someone.

            Args:
                to: Who is paid.
                amount: How much, in cents.
            """
            self.sent.append(f"{tenant_id}:{to}:{amount}")
            return f"paid {amount} to {to}"

        @box.tool(scopes={"bank:write"}, idempotent=False, open_world=False)
        def wire(to: str, amount: int) -> str:
            """Wire money abroad.

            Args:
                to: Who is paid.
                amount: How much, in cents.
            """
            self.sent.append(f"wire:{to}:{amount}")
            return "wired"

        return box


class Approver:
    """The human at the client: answers approval forms one way, records what was shown."""

    def __init__(self, action: str = "accept", *, tick: bool = True, note: str = "") -> None:
        self.action = action
        self.tick = tick
        self.note = note
        self.shown: list[str] = []

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.shown.append(params.message)
        assert set(params.requested_schema["properties"]) == {"approve", "note"}
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        content: dict[str, Any] = {"approve": self.tick}
        if self.note:
            content["note"] = self.note
        return types.ElicitResult(action="accept", content=content)


@pytest.fixture
def bank() -> Bank:
    return Bank()


@pytest.fixture
async def gate(bank: Bank) -> AsyncIterator[Gate]:
    async with Gate([bank.toolbox()], store=MemoryStore(), policy=POLICY) as gate:
        yield gate


def client(gate: Gate, mode: str, approver: Approver | None) -> Client:
    server = build_server(gate, principal=ALICE)
    callback = approver.elicit if approver is not None else None
    return Client(server, mode=mode, elicitation_callback=callback)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_through_call_tool_is_approved_in_the_client_too(
    gate: Gate, bank: Bank, mode: str
) -> None:
    approver = Approver()
    async with client(gate, mode, approver) as mcp:
        result = await mcp.call_tool("callgate__call_tool", {"name": "bank__pay", "arguments": PAY})

    assert not result.is_error, text(result)
    assert bank.sent == ["acme:bob:5000"]
    [shown] = approver.shown
    assert "Approve this call of bank.pay" in shown


@pytest.mark.parametrize("mode", MODES)
async def test_the_user_approves_the_exact_inputs_in_the_client(
    gate: Gate, bank: Bank, mode: str
) -> None:
    approver = Approver(note="invoice 42")
    async with client(gate, mode, approver) as mcp:
        result = await mcp.call_tool("bank__pay", PAY)
    approvals = await (await gate.approvals()).list()
    audit = await gate.audit()

    assert not result.is_error and result.structured_content == {"result": "paid 5000 to bob"}
    assert bank.sent == ["acme:bob:5000"]  # ran once
    [shown] = approver.shown
    assert "Approve this call of bank.pay" in shown
    assert "payments over 1,000 need a human" in shown
    # The exact inputs, the trusted tenant_id the model never saw included.
    assert json.dumps({"amount": 5000, "tenant_id": "acme", "to": "bob"}, indent=2) in shown
    [record] = approvals
    assert record.state == "used" and record.decided_by == "alice"
    assert record.note == "invoice 42" and f"Approval {record.id}" in shown
    decision = [r for r in audit if r.phase == "decision"]
    assert [(d.user, d.decision, d.decision_reason) for d in decision] == [
        ("alice", "approved", "invoice 42")
    ]
    finals = [r for r in audit if r.phase == "final" and r.tool == "bank.pay"]
    assert [f.status for f in finals] == ["pending_approval", "ok"]
    assert finals[-1].decision == "approved"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "tick"), [("decline", True), ("accept", False)])
async def test_declining_or_not_ticking_denies_it(
    gate: Gate, bank: Bank, mode: str, action: str, tick: bool
) -> None:
    async with client(gate, mode, Approver(action, tick=tick)) as mcp:
        result = await mcp.call_tool("bank__pay", PAY)
        again = await mcp.call_tool("bank__pay", PAY)
    [record] = await (await gate.approvals()).list()

    assert result.is_error and "denied this request" in text(result)
    assert "declined in the MCP client" in text(result)
    assert again.is_error and "denied this request" in text(again)  # decided once
    assert record.state == "denied" and bank.sent == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_dismissed_question_leaves_the_approval_pending(
    gate: Gate, bank: Bank, mode: str
) -> None:
    async with client(gate, mode, Approver("cancel")) as mcp:
        result = await mcp.call_tool("bank__pay", PAY)
    [record] = await (await gate.approvals()).list()

    assert result.is_error and record.state == "pending" and bank.sent == []
    assert result.meta is not None and result.meta["callgate/approvalId"] == record.id
    assert f"approval_id: {record.id}" in text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_four_eyes_approval_is_never_asked_of_the_requester(
    gate: Gate, bank: Bank, mode: str
) -> None:
    approver = Approver()
    async with client(gate, mode, approver) as mcp:
        parked = await mcp.call_tool("bank__wire", PAY)
        assert parked.is_error and parked.meta is not None
        approval_id = parked.meta["callgate/approvalId"]
        await (await gate.approvals()).approve(
            approval_id, by=Principal("bob", "acme"), note="checked"
        )
        ran = await mcp.call_tool("bank__wire", PAY)

    assert approver.shown == []
    assert "awaits approval" in text(parked)
    assert not ran.is_error and bank.sent == ["wire:bob:5000"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_be_asked_gets_the_approval_id(
    gate: Gate, bank: Bank, mode: str
) -> None:
    async with client(gate, mode, None) as mcp:
        parked = await mcp.call_tool("bank__pay", PAY)
        assert parked.meta is not None
        approval_id = parked.meta["callgate/approvalId"]
        # The requester may confirm it elsewhere (the CLI, the console) too.
        await (await gate.approvals()).approve(approval_id, by=Principal("alice", "acme"))
        ran = await mcp.call_tool("bank__pay", PAY)

    assert parked.is_error and f"approval_id: {approval_id}" in text(parked)
    assert not ran.is_error and bank.sent == ["acme:bob:5000"]


async def _first_round(mcp: Client, args: dict[str, Any] = PAY) -> types.InputRequiredResult:
    first = await mcp.session.call_tool("bank__pay", args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    return first


APPROVE = {APPROVAL_KEY: types.ElicitResult(action="accept", content={"approve": True})}


async def test_the_round_carries_a_sealed_state_bound_to_the_call(gate: Gate, bank: Bank) -> None:
    async with client(gate, "2026-07-28", Approver()) as mcp:
        first = await _first_round(mcp)
        assert first.input_requests is not None
        request = first.input_requests[APPROVAL_KEY]
        assert isinstance(request, types.ElicitRequest)
        assert first.request_state is not None
        [record] = await (await gate.approvals()).list()
        assert record.id not in first.request_state  # sealed: nothing readable

        # The state is bound to these arguments: it cannot approve another payment.
        with pytest.raises(MCPError) as other:
            await mcp.session.call_tool(
                "bank__pay",
                {"to": "mallory", "amount": 5000},
                input_responses=APPROVE,  # type: ignore[arg-type]
                request_state=first.request_state,
                allow_input_required=True,
            )

        async def retry() -> Any:
            return await mcp.session.call_tool(
                "bank__pay",
                PAY,
                input_responses=APPROVE,  # type: ignore[arg-type]
                request_state=first.request_state,
                allow_input_required=True,
            )

        done = await retry()
        with pytest.raises(MCPError) as replayed:
            await retry()

    assert other.value.code == types.INVALID_PARAMS
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert replayed.value.code == types.INVALID_PARAMS
    assert bank.sent == ["acme:bob:5000"]


async def test_an_answer_without_the_servers_state_decides_nothing(gate: Gate, bank: Bank) -> None:
    async with client(gate, "2026-07-28", Approver()) as mcp:
        await _first_round(mcp)
        # A client (or a model) sending an "approval" of its own making is asked again.
        forged = await mcp.session.call_tool(
            "bank__pay",
            PAY,
            input_responses=APPROVE,  # type: ignore[arg-type]
            allow_input_required=True,
        )
    [record] = await (await gate.approvals()).list()

    assert isinstance(forged, types.InputRequiredResult)
    assert record.state == "pending" and bank.sent == []


async def test_a_decision_taken_elsewhere_meanwhile_wins(gate: Gate, bank: Bank) -> None:
    async with client(gate, "2026-07-28", Approver()) as mcp:
        first = await _first_round(mcp)
        [record] = await (await gate.approvals()).list()
        await (await gate.approvals()).deny(
            record.id, by=Principal("carol", "acme"), reason="frozen account"
        )
        late = await mcp.session.call_tool(
            "bank__pay",
            PAY,
            input_responses=APPROVE,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )

    assert isinstance(late, types.CallToolResult) and late.is_error
    assert "carol" in text(late) and "frozen account" in text(late)
    assert bank.sent == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_the_demo_asks_the_sender_to_confirm_an_email_over_http(
    tmp_path: Path, mode: str
) -> None:
    # `callgate serve` as the README runs it: the demo, its policy, a SQLite store.
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    approver = Approver(note="yes, send it")
    email = {"to": ["partner@example.org"], "subject": "Q4 plan", "body": "Attached."}
    async with serve_http("--store", store) as (url, _):
        with anyio.fail_after(30):
            async with Client(url, mode=mode, elicitation_callback=approver.elicit) as mcp:
                sent = await mcp.call_tool("ops__send_email", email)
    records = await audit_of(store)

    assert not sent.is_error, text(sent)
    assert sent.structured_content is not None
    assert sent.structured_content["status"] == "queued"
    [shown] = approver.shown
    assert "partner@example.org" in shown and '"user_id": "local"' in shown
    decisions = [r for r in records if r.phase == "decision"]
    assert [(d.user, d.decision, d.decision_reason) for d in decisions] == [
        ("local", "approved", "yes, send it")
    ]
    finals = [r.status for r in records if r.phase == "final" and r.tool == "ops.send_email"]
    assert finals == ["pending_approval", "ok"]
