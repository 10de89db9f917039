"""Long-running tools as durable tasks (the Tasks extension), with the SDK client in memory.

The tasks surface is an extension: the SDK client has no typed methods for it, so
these tests send ``tools/call`` and ``tasks/*`` through the client session and read
the raw results.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.extension import advertise
from pydantic import BaseModel, ConfigDict

from callgate import Gate, Policy, Rule
from callgate.mcp import build_server
from callgate.mcp.server import default_principal
from callgate.mcp.tasks import (
    EXTENSION,
    OUTCOME_UNKNOWN,
    TaskRunner,
    UpdateTaskRequestParams,
    runner_of,
)
from tests.conformance.fixture import FIXTURE_TOOLBOX, fixture_toolboxes

pytestmark = pytest.mark.anyio


class _Raw(BaseModel):
    """Any result, every field kept as sent."""

    model_config = ConfigDict(extra="allow")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _GetTask(types.Request[types.GetTaskRequestParams, str]):
    method: str = "tasks/get"
    params: types.GetTaskRequestParams


class _CancelTask(types.Request[types.CancelTaskRequestParams, str]):
    method: str = "tasks/cancel"
    params: types.CancelTaskRequestParams


class _UpdateTask(types.Request[UpdateTaskRequestParams, str]):
    method: str = "tasks/update"
    params: UpdateTaskRequestParams


RUNNERS: dict[int, TaskRunner] = {}
"""The task runner of each client's server (by ``id(client)``)."""


@asynccontextmanager
async def serving(
    store: str = "memory://",
    *,
    tasks: bool = True,
    mode: str = "2026-07-28",
    policy: Policy | None = None,
    lease: timedelta = timedelta(seconds=30),
) -> AsyncIterator[Client]:
    """A client of a fixture server; its running tasks are stopped on the way out.

    The client declares elicitation (its callback is never called at 2026-07-28:
    a task's questions are answered with ``tasks/update``).
    """
    gate = Gate(fixture_toolboxes(), store=store, policy=policy)
    server = build_server(
        gate,
        principal=default_principal(gate),
        unprefixed=[FIXTURE_TOOLBOX],
        task_lease=lease,
    )
    extensions = [advertise(EXTENSION)] if tasks else None

    async def no_elicitation(*_: Any) -> types.ElicitResult:
        raise AssertionError("a task's questions are not sent as requests")

    try:
        async with Client(
            server, mode=mode, extensions=extensions, elicitation_callback=no_elicitation
        ) as client:
            runner = runner_of(server)
            assert runner is not None
            RUNNERS[id(client)] = runner
            yield client
    finally:
        runner = runner_of(server)
        assert runner is not None
        await runner.aclose()
        await gate.aclose()


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    params = types.CallToolRequestParams(name=tool, arguments=arguments)
    raw = await client.session.send_request(types.CallToolRequest(params=params), _Raw)
    return dict(raw.model_extra or {})


async def get(client: Client, task_id: str) -> dict[str, Any]:
    params = types.GetTaskRequestParams(task_id=task_id)
    raw = await client.session.send_request(_GetTask(params=params), _Raw)
    return dict(raw.model_extra or {})


async def cancel(client: Client, task_id: str) -> dict[str, Any]:
    params = types.CancelTaskRequestParams(task_id=task_id)
    raw = await client.session.send_request(_CancelTask(params=params), _Raw)
    return dict(raw.model_extra or {})


async def update(client: Client, task_id: str, **responses: Any) -> dict[str, Any]:
    params = UpdateTaskRequestParams.model_validate(
        {"taskId": task_id, "inputResponses": responses}
    )
    raw = await client.session.send_request(_UpdateTask(params=params), _Raw)
    return dict(raw.model_extra or {})


async def until_status(client: Client, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            task = await get(client, task_id)
            if task["status"] == status:
                return task
            await anyio.sleep(0.02)


async def settled(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            task = await get(client, task_id)
            if task["status"] in ("completed", "failed", "cancelled"):
                return task
            await anyio.sleep(0.02)


async def test_a_task_tool_returns_a_task_then_its_result() -> None:
    async with serving() as client:
        created = await call(client, "slow_compute", seconds=0.2, label="x")
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert created["ttlMs"] > 0 and "result" not in created
        working = await get(client, created["taskId"])
        assert working["status"] == "working" and "result" not in working

        done = await settled(client, created["taskId"])

    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Computed 'x' in 0.2s."
    assert done["result"]["isError"] is False


async def test_a_tool_error_completes_and_a_crash_fails() -> None:
    async with serving() as client:
        failing = await call(client, "failing_job")
        crashing = await call(client, "protocol_error_job")
        tool_error = await settled(client, failing["taskId"])
        crash = await settled(client, crashing["taskId"])

    assert tool_error["status"] == "completed"
    assert tool_error["result"]["isError"] is True
    assert "always fails" in tool_error["result"]["content"][0]["text"]
    assert crash["status"] == "failed" and "result" not in crash
    assert crash["error"]["code"] == -32603
    # The model-facing message only: no traceback, no exception text.
    assert "crashed on purpose" not in crash["error"]["message"]


async def test_cancel_stops_a_running_task_once() -> None:
    async with serving() as client:
        created = await call(client, "slow_compute", seconds=60)
        ack = await cancel(client, created["taskId"])
        assert ack == {"resultType": "complete", "_meta": ack.get("_meta")}
        task = await settled(client, created["taskId"])
        assert task["status"] == "cancelled"
        # Cancelling again is an empty ack too, and changes nothing.
        await cancel(client, created["taskId"])
        assert (await get(client, created["taskId"]))["status"] == "cancelled"


async def test_an_unknown_task_is_invalid_params() -> None:
    async with serving() as client:
        with pytest.raises(MCPError) as info:
            await get(client, "no-such-task")
    assert info.value.code == types.INVALID_PARAMS


async def test_an_untagged_tool_stays_synchronous() -> None:
    async with serving() as client:
        result = await call(client, "greet", name="World")
    assert "taskId" not in result
    assert result["content"][0]["text"] == "Hello, World!"


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_without_the_extension_the_tool_runs_synchronously(mode: str) -> None:
    async with serving(tasks=False, mode=mode) as client:
        result = await client.call_tool("slow_compute", {"seconds": 0.05, "label": "sync"})
        assert not result.is_error
        assert result.content[0].text == "Computed 'sync' in 0.05s."  # type: ignore[union-attr]
        with pytest.raises(MCPError) as info:
            await get(client, "anything")
    assert info.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_tasks_survive_a_restart_of_the_server(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with serving(store) as first:
        done = await call(first, "slow_compute", seconds=0, label="kept")
        await settled(first, done["taskId"])
        running = await call(first, "slow_compute", seconds=60, label="lost")
        assert (await get(first, running["taskId"]))["status"] == "working"
    # The first server is gone (its running call stopped without an outcome).

    async with serving(store) as second:
        kept = await get(second, done["taskId"])
        lost = await get(second, running["taskId"])

    assert kept["status"] == "completed"
    assert kept["result"]["content"][0]["text"] == "Computed 'kept' in 0s."
    assert lost["status"] == "failed"
    assert lost["statusMessage"] == OUTCOME_UNKNOWN
    assert lost["error"]["message"] == OUTCOME_UNKNOWN


async def test_a_task_only_tool_needs_the_extension() -> None:
    async with serving(tasks=False) as client:
        with pytest.raises(MCPError) as info:
            await call(client, "failing_job")
    assert info.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


async def test_a_task_only_tool_runs_synchronously_at_2025_11_25() -> None:
    async with serving(tasks=False, mode="legacy") as client:
        result = await client.call_tool("failing_job", {})
    # The tool ran (without a task) and its own error came back.
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "failing_job always fails" in result.content[0].text


YES = {"action": "accept", "content": {"confirm": True}}


async def test_a_task_waits_for_input_and_resumes_with_the_answer() -> None:
    async with serving() as client:
        created = await call(client, "confirm_delete", filename="a.txt")
        waiting = await until_status(client, created["taskId"], "input_required")
        ack = await update(client, created["taskId"], confirm_delete=YES)
        done = await settled(client, created["taskId"])

    [key] = waiting["inputRequests"]
    assert key == "confirm_delete"
    assert waiting["inputRequests"][key]["method"] == "elicitation/create"
    assert "Delete a.txt?" in waiting["inputRequests"][key]["params"]["message"]
    assert "requestState" not in waiting  # the state stays on the server
    assert ack == {"resultType": "complete", "_meta": ack.get("_meta")}
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Deleted a.txt."


async def test_answers_may_come_one_at_a_time() -> None:
    async with serving() as client:
        created = await call(client, "multi_input")
        task_id = created["taskId"]
        both = await until_status(client, task_id, "input_required")
        await update(client, task_id, first={"action": "accept", "content": {"name": "Ada"}})
        one_left = await get(client, task_id)
        with pytest.raises(MCPError) as unknown:
            await update(client, task_id, nope={"action": "accept", "content": {}})
        await update(client, task_id, second={"action": "accept", "content": {"name": "Bo"}})
        done = await settled(client, task_id)
        with pytest.raises(MCPError) as not_waiting:
            await update(client, task_id, second={"action": "accept", "content": {}})

    assert sorted(both["inputRequests"]) == ["first", "second"]
    assert one_left["status"] == "input_required" and list(one_left["inputRequests"]) == ["second"]
    assert unknown.value.code == types.INVALID_PARAMS
    assert done["result"]["content"][0]["text"] == "Ada and Bo"
    assert not_waiting.value.code == types.INVALID_PARAMS


async def test_an_approval_inside_a_task_is_asked_and_the_call_runs_once_approved() -> None:
    policy = Policy(
        [
            Rule(
                "require_approval",
                tools=["conformance.slow_compute"],
                when='args.label == "prod"',
                reason="prod runs need a human",
                approved_by="requester",
            )
        ]
    )
    async with serving(policy=policy) as client:
        created = await call(client, "slow_compute", seconds=0, label="prod")
        waiting = await until_status(client, created["taskId"], "input_required")
        question = waiting["inputRequests"]["callgate_approval"]
        await update(
            client,
            created["taskId"],
            callgate_approval={"action": "accept", "content": {"approve": True}},
        )
        done = await settled(client, created["taskId"])

    assert "prod runs need a human" in question["params"]["message"]
    assert '"label": "prod"' in question["params"]["message"]
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Computed 'prod' in 0s."


async def test_a_task_waiting_for_input_survives_a_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with serving(store) as first:
        created = await call(first, "confirm_delete", filename="b.txt")
        await until_status(first, created["taskId"], "input_required")

    async with serving(store) as second:
        assert (await get(second, created["taskId"]))["status"] == "input_required"
        await update(second, created["taskId"], confirm_delete=YES)
        done = await settled(second, created["taskId"])

    assert done["result"]["content"][0]["text"] == "Deleted b.txt."


async def test_replicas_share_tasks_without_failing_each_others(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    lease = timedelta(seconds=0.3)
    async with serving(store, lease=lease) as a, serving(store, lease=lease) as b:
        created = await call(a, "slow_compute", seconds=60, label="long")
        task_id = created["taskId"]
        # Well past its lease: replica a keeps renewing, so b never gives the task up.
        await anyio.sleep(1.0)
        seen_by_b = await get(b, task_id)
        # Cancelled through b, the call running on a stops at a's next renewal.
        await cancel(b, task_id)
        runner = RUNNERS[id(a)]
        with anyio.fail_after(5):
            while True:
                if task_id not in runner.running_tasks:
                    break
                await anyio.sleep(0.02)
        cancelled = await get(a, task_id)

    assert seen_by_b["status"] == "working"
    assert cancelled["status"] == "cancelled"


async def test_a_task_whose_runner_died_fails_once_its_lease_runs_out(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    lease = timedelta(seconds=0.3)
    async with serving(store, lease=lease) as a, serving(store, lease=lease) as b:
        created = await call(a, "slow_compute", seconds=60, label="orphan")
        renewing = RUNNERS[id(a)]._renewing
        assert renewing is not None
        renewing.cancel()  # as if a's process were killed: its leases are not renewed
        with anyio.fail_after(10):
            while True:
                lost = await get(b, created["taskId"])
                if lost["status"] != "working":
                    break
                await anyio.sleep(0.05)

    assert lost["status"] == "failed" and lost["statusMessage"] == OUTCOME_UNKNOWN


async def test_an_ask_first_tool_asks_in_the_foreground_then_becomes_a_task() -> None:
    async with serving() as client:
        first = await call(client, "test_tool_with_task")
        params = types.CallToolRequestParams.model_validate(
            {
                "name": "test_tool_with_task",
                "arguments": {},
                "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
                "requestState": first["requestState"],
            }
        )
        raw = await client.session.send_request(types.CallToolRequest(params=params), _Raw)
        second = dict(raw.model_extra or {})
        done = await settled(client, second["taskId"])

    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    assert second["resultType"] == "task" and "requestState" not in second
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Hello, Alice! (finished in the background)"


async def test_an_ask_first_tool_without_the_extension_needs_it() -> None:
    async with serving(tasks=False) as client:
        with pytest.raises(MCPError) as info:
            await call(client, "test_tool_with_task")
    assert info.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
