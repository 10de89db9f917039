"""Previews, approvals, idempotency and the duplicate-call limit across two
``callgate serve`` replicas on one PostgreSQL, driven with the SDK client at
2026-07-28 (stateless: any request may land on any replica)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate.mcp._approval import APPROVAL_KEY
from tests.mcp.serving import audit_of
from tests.replicas.conftest import Deployment, finals, ran, replicas
from tests.replicas.toolbox import runs

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

MODE = "2026-07-28"


def payload(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_preview_made_on_a_is_applied_once_through_b(deployment: Deployment) -> None:
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                preview = payload(
                    await on_a.call_tool(
                        "rep__limit_change_preview", {"account": "A-1", "new_limit": 250}
                    )
                )
                preview_id = preview["preview_id"]
                applied = await on_b.call_tool(
                    "rep__limit_change_apply", {"preview_id": preview_id}
                )
                again = await on_a.call_tool("rep__limit_change_apply", {"preview_id": preview_id})
                status = payload(
                    await on_b.call_tool("rep__limit_change_status", {"preview_id": preview_id})
                )

    assert payload(applied)["after"] == 250
    assert payload(again) == payload(applied)  # the same outcome, replayed
    assert status["state"] == "applied"
    assert [line.split(" pid=")[0] for line in runs(deployment.ledger)] == ["limit acme:A-1 250"]
    records = await audit_of(deployment.store)
    applies = finals(records, "rep.limit_change_apply")
    assert len(applies) == 2 and len(ran(records, "rep.limit_change_apply")) == 1
    assert applies[1].detail["replay_of"] == applies[0].call_id


async def test_concurrent_applies_through_both_replicas_run_once(deployment: Deployment) -> None:
    """The preview id is the apply's idempotency key: 10 applies through A and B at once."""
    results: list[types.CallToolResult] = []
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                preview = payload(
                    await on_a.call_tool(
                        "rep__limit_change_preview", {"account": "A-2", "new_limit": 300}
                    )
                )

                async def apply(client: Client) -> None:
                    arguments = {"preview_id": preview["preview_id"]}
                    results.append(await client.call_tool("rep__limit_change_apply", arguments))

                async with anyio.create_task_group() as tg:
                    for i in range(10):
                        tg.start_soon(apply, on_a if i % 2 else on_b)

    assert [line.split(" pid=")[0] for line in runs(deployment.ledger)] == ["limit acme:A-2 300"]
    assert len(results) == 10
    records = await audit_of(deployment.store)
    assert len(finals(records, "rep.limit_change_apply")) == 10
    assert len(ran(records, "rep.limit_change_apply")) == 1
    assert {json.dumps(payload(r), sort_keys=True) for r in results} == {
        json.dumps({"account": "A-2", "before": 100, "after": 300}, sort_keys=True)
    }


def _approve(
    deployment: Deployment, approval_id: str, *who: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        deployment.cli("approvals", "approve", approval_id, *who),
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_parked_on_a_approved_by_another_person_resumed_on_b(deployment: Deployment) -> None:
    pay = {"account": "A-9", "amount": 5000}
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(90):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                parked = await on_a.call_tool("rep__pay", pay)
                assert parked.is_error and parked.meta is not None
                approval_id = parked.meta["callgate/approvalId"]
                before = await on_b.call_tool(
                    "callgate__approval_status", {"approval_id": approval_id}
                )
                # The requester may not decide it (four eyes), nor someone without the role.
                self_approval = await anyio.to_thread.run_sync(
                    lambda: _approve(
                        deployment,
                        approval_id,
                        "--principal",
                        "alice@acme.example",
                        "--tenant",
                        "acme",
                        "--roles",
                        "approver",
                    )
                )
                decided = await anyio.to_thread.run_sync(
                    lambda: _approve(
                        deployment,
                        approval_id,
                        "--principal",
                        "bob@acme.example",
                        "--tenant",
                        "acme",
                        "--roles",
                        "approver",
                    )
                )
                after = await on_a.call_tool(
                    "callgate__approval_status", {"approval_id": approval_id}
                )
                ran = await on_b.call_tool("rep__pay", pay)
                again = await on_a.call_tool("rep__pay", pay)

    assert "pending" in text(before)
    assert self_approval.returncode != 0
    assert decided.returncode == 0, decided.stderr
    assert "approved" in text(after)
    assert payload(ran) == {"account": "A-9", "paid": 5000}
    # The approval was used once: the same call again needs a new one.
    assert again.is_error and again.meta is not None
    assert again.meta["callgate/approvalId"] != approval_id
    assert [line.split(" pid=")[0] for line in runs(deployment.ledger)] == ["pay acme:A-9 5000"]


async def test_a_confirmation_asked_on_a_is_answered_through_b(deployment: Deployment) -> None:
    """The 2026-07-28 ``input_required`` round trip: A seals the requestState, B opens it."""
    pay = {"account": "A-5", "amount": 500}
    approve = {APPROVAL_KEY: types.ElicitResult(action="accept", content={"approve": True})}

    async def unused(*_: Any) -> types.ElicitResult:
        raise AssertionError("at 2026-07-28 the question comes back as input_required")

    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with (
                Client(a.url, mode=MODE, elicitation_callback=unused) as on_a,
                Client(b.url, mode=MODE, elicitation_callback=unused) as on_b,
            ):
                first = await on_a.session.call_tool("rep__pay", pay, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult), first
                assert first.request_state is not None
                done = await on_b.session.call_tool(
                    "rep__pay",
                    pay,
                    input_responses=approve,  # type: ignore[arg-type]
                    request_state=first.request_state,
                    allow_input_required=True,
                )
                # The same answer replayed through the other replica runs nothing.
                try:
                    replayed: object = await on_a.session.call_tool(
                        "rep__pay",
                        pay,
                        input_responses=approve,  # type: ignore[arg-type]
                        request_state=first.request_state,
                        allow_input_required=True,
                    )
                except MCPError as exc:
                    replayed = exc

    assert isinstance(done, types.CallToolResult), done
    # Refused on the replica that used the state (-32602), asked afresh on another
    # (each replica remembers the states it accepted): never run a second time.
    assert isinstance(replayed, MCPError | types.InputRequiredResult), replayed
    assert payload(done) == {"account": "A-5", "paid": 500}
    assert [line.split(" pid=")[0] for line in runs(deployment.ledger)] == ["pay acme:A-5 500"]


async def test_the_duplicate_call_limit_holds_across_replicas(deployment: Deployment) -> None:
    """Three identical successful calls of one principal's stateless session, then
    a fourth is refused, whichever replica each lands on."""
    pay = {"account": "A-3", "amount": 10}
    results: list[types.CallToolResult] = []
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                for client in (on_a, on_b, on_a, on_b):
                    results.append(await client.call_tool("rep__pay", pay))

    assert [r.is_error for r in results] == [False, False, False, True]
    assert "already called 3 times in this session" in text(results[3])
    assert len(runs(deployment.ledger)) == 3
