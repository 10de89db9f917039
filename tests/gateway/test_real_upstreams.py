"""The gateway in front of real MCP servers nobody here wrote: server-everything
(stdio and Streamable HTTP), server-filesystem, mcp-server-time, mcp-server-git.

Every call goes through callgate's chain: validated against the upstream's own
schema, decided by policy (approvals), made exactly once, audited. The servers
are installed by scripts/upstreams.sh (tests/gateway/upstreams.py).
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from callgate import ApprovalError, ErrorKind, Gate, Principal, Status
from callgate.config import load_config
from callgate.gateway import upstream_toolboxes
from callgate.store import SQLStore
from tests.mcp.serving import audit_of, serve_http
from tests.pg import POSTGRES_URL, drop_schema

from .upstreams import (
    Servers,
    children_running,
    everything,
    everything_over_http,
    filesystem,
    free_port,
    git,
    git_repo,
    git_server,
    servers_fixture,  # noqa: F401  (the fixture ``servers``)
    time_server,
    toml,
    upstream,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ALICE = Principal("alice", tenant="acme")
BOB = Principal("bob", tenant="acme")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so one gate can serve the module's tests


@pytest.fixture(scope="module")
async def shared(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    """One gate over server-everything (stdio) and mcp-server-time, for the tests
    that only read and call: nothing they do changes what the others see."""
    tmp = tmp_path_factory.mktemp("shared")
    config = load_config(write_config(tmp, everything(servers), time_server(servers)))
    async with config.build_gate(f"sqlite:///{tmp / 'gateway.db'}") as gate:
        yield gate


async def upstream_tools(log: Path, command: str, *args: str) -> dict[str, Any]:
    """The server's own tools/list, read with the SDK's client: name -> input schema."""
    params = StdioServerParameters(command=command, args=list(args))
    with log.open("w") as errlog, anyio.fail_after(20):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            listed = await client.list_tools()
    return {tool.name: tool.input_schema for tool in listed.tools}


# a. tools namespaced, in order, with the upstream's schemas; calls governed -------------
async def test_upstream_tools_are_namespaced_in_name_order_with_their_own_schemas(
    shared: Gate, servers: Servers, tmp_path: Path
) -> None:
    specs = shared.tools(builtin=False)
    names = [spec.name for spec in specs]
    assert names == sorted(names)
    assert {"everything.echo", "everything.get-sum", "time.get_current_time"} <= set(names)
    assert {name.split(".", 1)[0] for name in names} == {"everything", "time"}
    assert [spec.name for spec in shared.tools(builtin=False)] == names  # stable

    time_own = await upstream_tools(tmp_path / "time.log", servers.time, "--local-timezone", "UTC")
    everything_own = await upstream_tools(
        tmp_path / "everything.log", servers.node, servers.everything, "stdio"
    )
    assert {f"time.{name}" for name in time_own} == {n for n in names if n.startswith("time.")}
    for name, schema in time_own.items():
        spec = shared.tool(f"time.{name}")
        assert spec is not None and spec.input_schema == schema
    echo = shared.tool("everything.echo")
    assert echo is not None and echo.input_schema == everything_own["echo"]
    assert echo.input_schema["required"] == ["message"]


async def test_a_misspelt_argument_is_a_construction_error_naming_it(shared: Gate) -> None:
    env = await shared.call("everything.echo", {"mesage": "hi"}, principal=ALICE)
    typo = await shared.call("time.get_current_time", {"time_zone": "UTC"}, principal=ALICE)
    assert env.status is Status.ERROR and env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "'message'" in env.error.message_for_model
    assert typo.error is not None and typo.error.kind is ErrorKind.CONSTRUCTION
    assert "'timezone'" in typo.error.message_for_model
    # Refused before anything was sent: a final record and no intent to run.
    records = await shared.audit(call_id=env.call_id)
    assert [(r.phase, r.tool, r.user, r.outcome) for r in records] == [
        ("final", "everything.echo", "alice", "construction")
    ]


async def test_the_upstreams_own_refusal_is_a_construction_error_with_its_text(
    shared: Gate,
) -> None:
    env = await shared.call("time.get_current_time", {"timezone": "Mars/Olympus"}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "Mars/Olympus" in env.error.message_for_model


async def test_good_calls_are_ok_and_audited(shared: Gate) -> None:
    echo = await shared.call("everything.echo", {"message": "hi there"}, principal=ALICE)
    now = await shared.call("time.get_current_time", {"timezone": "UTC"}, principal=ALICE)
    assert echo.ok, echo
    assert echo.payload == {"content": [{"type": "text", "text": "Echo: hi there"}]}
    assert now.ok, now
    assert now.payload["timezone"] == "UTC" and now.payload["datetime"].endswith("+00:00")
    for env, tool in ((echo, "everything.echo"), (now, "time.get_current_time")):
        records = await shared.audit(call_id=env.call_id)
        # Untrusted upstreams' tools count as side-effecting: an intent is written first.
        assert [(r.phase, r.tool, r.user, r.tenant, r.outcome) for r in records] == [
            ("intent", tool, "alice", "acme", None),
            ("final", tool, "alice", "acme", "ok"),
        ]


# The environment a stdio upstream gets -------------------------------------------------
TOKEN = "tok-3f9a-never-shown"


@pytest.fixture
async def env_gate(
    servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Gate]:
    """server-everything given one plain value and one secret from the gateway's environment."""
    monkeypatch.setenv("CALLGATE_TEST_UPSTREAM_TOKEN", TOKEN)
    monkeypatch.setenv("CALLGATE_TEST_GATEWAY_ONLY", "gateway-only-value")
    env = 'env = { GREETING = "hello", API_KEY = { env = "CALLGATE_TEST_UPSTREAM_TOKEN" } }'
    config = load_config(write_config(tmp_path, everything(servers, env)))
    async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
        yield gate


async def test_a_stdio_upstream_gets_its_configured_environment_not_the_gateways(
    env_gate: Gate,
) -> None:
    env = await env_gate.call("everything.get-env", {}, principal=ALICE)
    assert env.ok, env
    seen = json.loads(env.payload["content"][0]["text"])
    assert seen["GREETING"] == "hello"
    assert "CALLGATE_TEST_GATEWAY_ONLY" not in seen
    assert "gateway-only-value" not in env.payload_json()


async def test_a_secret_given_to_an_upstream_never_reaches_the_model(env_gate: Gate) -> None:
    env = await env_gate.call("everything.get-env", {}, principal=ALICE)
    assert env.ok, env
    assert "API_KEY" in env.payload_json()  # the upstream did get it ...
    assert TOKEN not in env.for_model()  # ... and the model does not read it


# b. Streamable HTTP ---------------------------------------------------------------------
def over_http(url: str) -> str:
    return f'[[upstreams]]\nname = "everything"\nurl = {toml(url)}\nstartup_wait = 20\n'


async def test_an_upstream_over_streamable_http(servers: Servers, tmp_path: Path) -> None:
    async with everything_over_http(servers, tmp_path / "everything.log") as (url, _):
        config = load_config(write_config(tmp_path, over_http(url)))
        async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
            names = [spec.name for spec in gate.tools(builtin=False)]
            echo = await gate.call("everything.echo", {"message": "over http"}, principal=ALICE)
            total = await gate.call("everything.get-sum", {"a": 2, "b": 3}, principal=ALICE)
            wrong = await gate.call("everything.get-sum", {"a": 2, "b": "3"}, principal=ALICE)
    assert {"everything.echo", "everything.get-sum"} <= set(names) and names == sorted(names)
    assert echo.ok and echo.payload["content"][0]["text"] == "Echo: over http"
    assert total.ok and "5" in total.payload["content"][0]["text"]
    assert wrong.error is not None and wrong.error.kind is ErrorKind.CONSTRUCTION
    assert "'b'" in wrong.error.message_for_model


async def test_an_http_upstream_that_went_away_is_transient_and_comes_back(
    servers: Servers, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    config = load_config(write_config(tmp_path, over_http(url)))
    async with (
        everything_over_http(servers, tmp_path / "first.log", port) as (_, first),
        config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate,
    ):
        assert (await gate.call("everything.echo", {"message": "a"}, principal=ALICE)).ok
        first.kill()
        await first.wait()
        down = await gate.call("everything.echo", {"message": "b"}, principal=ALICE)
        async with everything_over_http(servers, tmp_path / "second.log", port):
            with anyio.fail_after(20):
                while True:
                    back = await gate.call("everything.echo", {"message": "c"}, principal=ALICE)
                    if back.ok:
                        break
                    await anyio.sleep(0.1)
    assert back.payload["content"][0]["text"] == "Echo: c"
    # Nothing reached the server while it was gone (the connection was refused): the
    # model must not be told the change may have happened and not to retry.
    assert down.error is not None
    assert down.error.kind is ErrorKind.TRANSIENT, down.error
    assert "'everything'" in down.error.message_for_model


# c. server-filesystem: a write parked for approval, then run exactly once --------------
APPROVE_WRITES = """
[[policy.rules]]
effect = "require_approval"
tools = ["fs.write_file"]
reason = "writing a file needs a second person"
"""


@pytest.mark.parametrize(
    "store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_write_waits_for_approval_then_runs_exactly_once(
    servers: Servers, tmp_path: Path, store_kind: str
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    config = load_config(write_config(tmp_path, filesystem(servers, root), APPROVE_WRITES))
    schema = f"test_gw_{uuid.uuid4().hex[:12]}"
    store = (
        SQLStore(f"sqlite:///{tmp_path / 'gateway.db'}")
        if store_kind == "sqlite"
        else SQLStore(POSTGRES_URL, schema=schema)
    )
    target = root / "note.txt"
    args = {"path": str(target), "content": "hello from alice"}
    write = "fs.write_file"
    try:
        gate = Gate(
            upstream_toolboxes(config.upstreams, config.label), store=store, policy=config.policy
        )
        async with gate:
            parked = await gate.call(write, args, principal=ALICE, idempotency_key="note-1")
            assert parked.status is Status.PENDING_APPROVAL, parked
            assert parked.approval is not None
            approval_id = parked.approval.approval_id
            assert not target.exists() and list(root.iterdir()) == []

            approvals = await gate.approvals()
            record = await approvals.get(approval_id)
            assert record is not None and record.arguments == args
            with pytest.raises(ApprovalError):  # nobody approves their own request
                await approvals.approve(approval_id, by=ALICE)
            await approvals.approve(approval_id, by=BOB, note="fine")
            assert not target.exists()  # approving runs nothing

            ran = await gate.call(write, args, principal=ALICE, idempotency_key="note-1")
            assert ran.ok, ran
            assert ran.decision is not None and ran.decision.effect == "approved"
            assert target.read_text() == "hello from alice"

            target.write_text("edited by hand")  # a second run would overwrite this
            again = await gate.call(write, args, principal=ALICE, idempotency_key="note-1")
            assert again.ok and again.replayed and again.call_id == ran.call_id
            resumed = await gate.resume(approval_id, principal=ALICE)
            # The approval was used up: running the write again needs a new one.
            assert resumed.status is Status.PENDING_APPROVAL
            assert resumed.approval is not None and resumed.approval.approval_id != approval_id
            assert target.read_text() == "edited by hand"
            used = await approvals.get(approval_id)
            assert used is not None and used.state == "used"
            audit = await gate.audit()
        finals = [r for r in audit if r.tool == write and r.phase == "final"]
        assert [(r.outcome, r.detail.get("replay_of")) for r in finals] == [
            ("pending_approval", None),
            ("ok", None),
            ("ok", ran.call_id),  # the replay is audited as one
            ("pending_approval", None),  # parked anew
        ]
        assert finals[1].call_id == ran.call_id and finals[1].user == "alice"
        decisions = [r for r in audit if r.phase == "decision" and r.decision == "approved"]
        assert [r.user for r in decisions] == ["bob"]
    finally:
        if store_kind == "postgres":
            await drop_schema(schema)


# d. mcp-server-git: a read vouched for, a commit approved ------------------------------
async def test_git_status_reads_and_a_commit_runs_once_after_approval(
    servers: Servers, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    pin = f"pinned = {{ repo_path = {toml(str(repo))} }}"
    tables = git_server(
        servers,
        repo,
        f"""
[upstreams.tools.git_status]
risk = "read"
{pin}

[upstreams.tools.git_add]
{pin}

[upstreams.tools.git_commit]
{pin}
""",
    )
    policy = """
[[policy.rules]]
effect = "require_approval"
tools = ["git.git_commit"]
reason = "commits need a reviewer"
"""
    config = load_config(write_config(tmp_path, tables, policy))
    async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
        status_tool = gate.tool("git.git_status")
        assert status_tool is not None
        # The gateway sets the repository: the model is not asked for it.
        assert "repo_path" not in status_tool.input_schema["properties"]
        status = await gate.call("git.git_status", {}, principal=ALICE)
        added = await gate.call("git.git_add", {"files": ["notes.txt"]}, principal=ALICE)
        message = {"message": "Add notes"}
        parked = await gate.call("git.git_commit", message, principal=ALICE)
        assert parked.status is Status.PENDING_APPROVAL and parked.approval is not None
        assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
        approvals = await gate.approvals()
        await approvals.approve(parked.approval.approval_id, by=BOB)
        committed = await gate.resume(parked.approval.approval_id, principal=ALICE)
        once_more = await gate.resume(parked.approval.approval_id, principal=ALICE)
        audit = await gate.audit()
    assert status.ok, status
    assert "notes.txt" in status.payload["content"][0]["text"]
    assert added.ok, added
    assert committed.ok, committed
    assert "committed" in committed.payload["content"][0]["text"].lower()
    assert once_more.status is Status.PENDING_APPROVAL  # a second commit needs a new approval
    assert git(repo, "log", "--format=%s").splitlines() == ["Add notes", "Initial commit"]
    assert git(repo, "status", "--porcelain").strip() == ""
    (status_record,) = [r for r in audit if r.call_id == status.call_id and r.phase == "final"]
    assert status_record.risk == "read"
    commit_record = next(r for r in audit if r.call_id == committed.call_id)
    assert commit_record.risk == "write_high_risk"  # untrusted and not vouched for


async def test_pinned_arguments_are_shown_to_the_approver_and_a_models_value_is_audited(
    servers: Servers, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    elsewhere = git_repo(tmp_path / "elsewhere")
    (elsewhere / "secret-plans.txt").write_text("x\n", encoding="utf-8")
    pin = f"pinned = {{ repo_path = {toml(str(repo))} }}"
    extra = f"[upstreams.tools.git_status]\n{pin}\n\n[upstreams.tools.git_commit]\n{pin}\n"
    policy = '[[policy.rules]]\neffect = "require_approval"\ntools = ["git.git_commit"]\n'
    config = load_config(write_config(tmp_path, git_server(servers, repo, extra), policy))
    async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
        status = await gate.call("git.git_status", {"repo_path": str(elsewhere)}, principal=ALICE)
        parked = await gate.call("git.git_commit", {"message": "Empty"}, principal=ALICE)
        assert parked.approval is not None
        record = await (await gate.approvals()).get(parked.approval.approval_id)
        (final,) = [r for r in await gate.audit(call_id=status.call_id) if r.phase == "final"]
    # The model's repo_path was not used (this much works today).
    assert status.ok and "secret-plans" not in status.payload["content"][0]["text"]
    # The approver sees every argument the upstream will receive, the pinned one included.
    assert record is not None
    assert record.arguments == {"message": "Empty", "repo_path": str(repo)}
    assert final.dropped_fields == ("repo_path",)


# e. an upstream killed mid-run comes back; the others keep serving ---------------------
async def test_a_killed_upstream_is_restarted_and_the_others_keep_serving(
    servers: Servers, tmp_path: Path
) -> None:
    # server-everything, started by a shell that refuses to start it while `held` exists:
    # so the test sees the upstream down for as long as it needs, then lets it come back.
    held = tmp_path / "held-down"
    script = 'if [ -e "$0" ]; then exit 1; fi; exec "$1" "$2" stdio'
    command = ["-c", script, str(held), servers.node, servers.everything]
    read = '[upstreams.tools.echo]\nrisk = "read"\n'
    tables = upstream("everything", "/bin/sh", command, read), time_server(servers)
    config = load_config(write_config(tmp_path, *tables))
    others = set(children_running(servers.everything))  # the module's shared gate's
    async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
        (pid,) = set(children_running(servers.everything)) - others
        assert (await gate.call("everything.echo", {"message": "a"}, principal=ALICE)).ok
        held.touch()
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(20):
            while True:  # the first calls may still find it up, or wait for its restart
                down = await gate.call("everything.echo", {"message": "b"}, principal=ALICE)
                if not down.ok:
                    break
                await anyio.sleep(0.05)
        assert down.error is not None and down.error.kind is ErrorKind.TRANSIENT, down
        # While everything is down, time answers.
        now = await gate.call("time.get_current_time", {"timezone": "UTC"}, principal=ALICE)
        again = await gate.call("everything.echo", {"message": "b"}, principal=ALICE)
        held.unlink()
        answers = []
        with anyio.fail_after(20):
            while not (
                back := await gate.call("everything.echo", {"message": "c"}, principal=ALICE)
            ).ok:
                answers.append(back)
                await anyio.sleep(0.1)
        (restarted,) = set(children_running(servers.everything)) - others
    assert now.ok, now
    assert again.error is not None and again.error.kind is ErrorKind.TRANSIENT
    for env in (again, *answers):
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT, env
        assert "'everything'" in env.error.message_for_model
    assert restarted != pid
    assert back.payload["content"][0]["text"] == "Echo: c"


# g. the gateway served over MCP -----------------------------------------------------------
async def test_the_gateway_serves_the_upstreams_over_mcp(servers: Servers, tmp_path: Path) -> None:
    config = write_config(tmp_path, everything(servers), time_server(servers))
    store = f"sqlite:///{tmp_path / 'served.db'}"
    async with serve_http("-c", str(config), "--store", store, "--discovery", "direct") as (
        url,
        _process,
    ):
        seen: dict[str, set[str]] = {}
        texts: dict[str, str] = {}
        versions: dict[str, str | None] = {}
        for mode in ("auto", "legacy"):
            with anyio.fail_after(30):
                async with Client(url, mode=mode) as client:
                    versions[mode] = client.protocol_version
                    seen[mode] = {tool.name for tool in (await client.list_tools()).tools}
                    echo = await client.call_tool("everything__echo", {"message": mode})
                    now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not echo.is_error and not now.is_error
            texts[mode] = echo.content[0].text
    assert versions == {"auto": "2026-07-28", "legacy": "2025-11-25"}
    for mode in ("auto", "legacy"):
        assert {"everything__echo", "time__get_current_time", "time__convert_time"} <= seen[mode]
        assert texts[mode] == f"Echo: {mode}"
    records = await audit_of(store)
    calls = [(r.tool, r.outcome) for r in records if r.phase == "final"]
    assert calls.count(("everything.echo", "ok")) == 2
    assert calls.count(("time.get_current_time", "ok")) == 2
