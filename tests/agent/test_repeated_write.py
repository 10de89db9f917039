"""An approval covers one run: a new agent run proposing the identical write asks a
human again (it is not refused as 'just used'), and the write is made once per approval."""

from __future__ import annotations

import anyio
import pytest

from callgate import Gate, Policy, Principal, Rule, Toolbox
from callgate.agent import ScriptedModel, call, reply
from callgate.agent.loop import Agent
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"mail:send"})
CAROL = Principal("carol", tenant="acme")
POLICY = Policy([Rule("require_approval", tools=["mail.send"], reason="mail leaves the company")])
EMAIL = {"to": "partner@example.org", "subject": "Q4", "body": "Attached."}


async def test_a_new_run_of_the_identical_write_waits_for_a_new_approval() -> None:
    sent: list[str] = []
    box = Toolbox("mail")

    @box.tool(scopes={"mail:send"}, idempotent=False, open_world=False)
    def send(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: The recipient.
            subject: The subject.
            body: The text.
        """
        sent.append(to)
        return f"sent to {to}"

    async with Gate([box], store=MemoryStore(), policy=POLICY) as gate:
        approvals = await gate.approvals()

        async def send_and_approve() -> tuple[str, str]:
            model = ScriptedModel([call("mail.send", EMAIL), reply("Sent.")])
            agent = Agent(gate, model, principal=ALICE)
            waiting = await agent.run("Send the Q4 mail")
            assert waiting.status == "waiting_approval", waiting.reason
            [approval_id] = waiting.pending_approvals
            await approvals.approve(approval_id, by=CAROL)
            done = await agent.resume(waiting.run_id)
            assert done.status == "completed", done.reason
            return approval_id, done.calls[-1].status

        with anyio.fail_after(10):
            first, first_status = await send_and_approve()
            second, second_status = await send_and_approve()
    assert first != second
    assert (first_status, second_status) == ("ok", "ok")
    assert sent == ["partner@example.org", "partner@example.org"]
