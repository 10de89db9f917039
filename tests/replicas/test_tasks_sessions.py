"""Tasks, the audit and 2025-11-25 sessions across two ``callgate serve``
replicas on one PostgreSQL (the SDK client, alternating replicas)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise
from pydantic import BaseModel, ConfigDict

from callgate.cli._replicas import LEASE_ENV
from callgate.mcp.tasks import EXTENSION, OUTCOME_UNKNOWN
from tests.mcp.serving import audit_of, open_session, rpc
from tests.replicas.conftest import Deployment, finals, replicas
from tests.replicas.toolbox import RELEASE_SUFFIX, runs

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

MODE = "2026-07-28"
SHORT_LEASE = {LEASE_ENV: "1.5"}
"""Leases renewed every half second: a dead replica's task is given up within seconds."""


class _Raw(BaseModel):
    model_config = ConfigDict(extra="allow")


class _GetTask(types.Request[types.GetTaskRequestParams, str]):
    method: str = "tasks/get"
    params: types.GetTaskRequestParams


class _CancelTask(types.Request[types.CancelTaskRequestParams, str]):
    method: str = "tasks/cancel"
    params: types.CancelTaskRequestParams


def tasks_client(url: str) -> Client:
    return Client(url, mode=MODE, extensions=[advertise(EXTENSION)])


async def start(client: Client, batch: str) -> dict[str, Any]:
    params = types.CallToolRequestParams(name="rep__reconcile", arguments={"batch": batch})
    raw = await client.session.send_request(types.CallToolRequest(params=params), _Raw)
    answer = dict(raw.model_extra or {})
    assert answer["resultType"] == "task", answer
    return answer


async def get(client: Client, task_id: str) -> dict[str, Any]:
    params = types.GetTaskRequestParams(task_id=task_id)
    raw = await client.session.send_request(_GetTask(params=params), _Raw)
    return dict(raw.model_extra or {})


async def until(client: Client, task_id: str, status: str) -> dict[str, Any]:
    """tasks/get until the task reads ``status`` (the caller bounds the wait)."""
    while True:
        task = await get(client, task_id)
        if task["status"] == status:
            return task
        await anyio.sleep(0.1)


async def ledger_has(deployment: Deployment, prefix: str) -> None:
    while True:  # another process writes it: polled (the caller bounds the wait)
        if any(line.startswith(prefix) for line in runs(deployment.ledger)):
            return
        await anyio.sleep(0.05)


async def test_a_task_started_on_a_is_read_and_cancelled_on_b(deployment: Deployment) -> None:
    release = deployment.ledger.with_name(deployment.ledger.name + RELEASE_SUFFIX)
    async with replicas(deployment, env=SHORT_LEASE) as (a, b):
        with anyio.fail_after(60):
            async with tasks_client(a.url) as on_a, tasks_client(b.url) as on_b:
                task_id = (await start(on_a, "B-1"))["taskId"]
                await ledger_has(deployment, "reconcile-start B-1")
                working = await get(on_b, task_id)
                params = types.CancelTaskRequestParams(task_id=task_id)
                await on_b.session.send_request(_CancelTask(params=params), _Raw)
                cancelled_on_a = await get(on_a, task_id)
                release.touch()  # the tool's thread ends; its result must not win
                await ledger_has(deployment, "reconcile-end B-1")
                # Once A's call has ended (its final audit record), whatever it
                # returned: the task stays cancelled, on both replicas.
                while True:
                    if finals(await audit_of(deployment.store), "rep.reconcile"):
                        break
                    await anyio.sleep(0.1)
                after_a = await get(on_a, task_id)
                after_b = await get(on_b, task_id)

    assert working["status"] == "working"
    assert cancelled_on_a["status"] == "cancelled"
    assert after_a["status"] == after_b["status"] == "cancelled"
    assert "result" not in after_b
    starts = [line for line in runs(deployment.ledger) if line.startswith("reconcile-start")]
    assert len(starts) == 1


async def test_a_task_of_a_killed_replica_fails_as_unknown_and_never_runs_again(
    deployment: Deployment,
) -> None:
    async with replicas(deployment, env=SHORT_LEASE) as (a, b):
        with anyio.fail_after(60):
            async with tasks_client(b.url) as on_b:
                async with tasks_client(a.url) as on_a:
                    task_id = (await start(on_a, "B-2"))["taskId"]
                    await ledger_has(deployment, "reconcile-start B-2")
                    a.kill()
                    with anyio.fail_after(15):
                        await a.process.wait()
                # B reads it working until A's lease runs out, then failed, outcome unknown.
                failed = await until(on_b, task_id, "failed")
                again = await get(on_b, task_id)

    assert failed["statusMessage"] == OUTCOME_UNKNOWN
    assert again["status"] == "failed"
    lines = runs(deployment.ledger)
    assert [line.split(" pid=")[0] for line in lines] == ["reconcile-start B-2"]
    # The audit keeps the intent without an outcome: shown as unknown, never lost.
    records = [r for r in await audit_of(deployment.store) if r.tool == "rep.reconcile"]
    assert [r.phase for r in records] == ["intent"]
    shown = await anyio.run_process(deployment.cli("audit", "--json"), env=deployment.env)
    entries = json.loads(shown.stdout)
    assert any(e.get("tool") == "rep.reconcile" and e.get("outcome_unknown") for e in entries)


async def test_the_audit_has_every_call_once_whichever_replica_served_it(
    deployment: Deployment,
) -> None:
    call_ids: list[str] = []
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                for i in range(12):
                    client = on_a if i % 2 else on_b
                    if i % 3:
                        result = await client.call_tool("rep__balance", {"account": f"A-{i}"})
                    else:
                        result = await client.call_tool(
                            "rep__pay", {"account": f"A-{i}", "amount": i}
                        )
                    assert not result.is_error and result.meta is not None
                    call_ids.append(result.meta["callgate/callId"])

    records = finals(await audit_of(deployment.store))
    assert sorted(r.call_id for r in records) == sorted(call_ids)
    assert len(set(call_ids)) == 12
    assert {r.user for r in records} == {"alice@acme.example"}
    # One stateless session for the principal, the same on both replicas.
    assert len({r.session_id for r in records}) == 1
    assert len(runs(deployment.ledger)) == 4


async def test_a_2025_session_from_a_is_unknown_on_b_and_says_so(deployment: Deployment) -> None:
    """2025-11-25 sessions live in the replica that made them: on another one the
    session id is unknown, answered 404 (the client starts a new session), and
    nothing of the request runs."""
    call = rpc(5, "tools/call", {"name": "rep__pay", "arguments": {"account": "S-1", "amount": 7}})
    async with replicas(deployment) as (a, b), httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url)
        on_b = await http.post(b.url, json=call, headers=headers)
        on_a = await http.post(a.url, json=call, headers=headers)
        # Re-established on B: a new session there works.
        fresh = await open_session(http, b.url)
        again = await http.post(b.url, json=call, headers=fresh)

    assert on_b.status_code == 404
    assert on_a.status_code == 200
    assert again.status_code == 200 and fresh["mcp-session-id"] != headers["mcp-session-id"]
    assert [line.split(" pid=")[0] for line in runs(deployment.ledger)] == [
        "pay acme:S-1 7",
        "pay acme:S-1 7",
    ]
