"""Proxied calls through the chain, against an upstream made with the official SDK
(tests/gateway/stub_server.py, a stdio subprocess)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate, Principal
from callgate.config import load_config, local_principal
from callgate.errors import ErrorKind
from callgate.gateway import upstream_toolboxes
from callgate.mcp import build_server
from callgate.store import MemoryStore, SQLStore, Store
from tests.gateway.sinks import Answering, Recording
from tests.pg import POSTGRES_URL, drop_schema

STUB = Path(__file__).with_name("stub_server.py")
ALICE = Principal("alice", tenant="acme")
BOB = Principal("bob", tenant="acme")

pytestmark = pytest.mark.anyio


def upstream(tmp_path: Path, extra: str = "", *, name: str = "stub", command: str = "") -> str:
    command = command or f'command = "{sys.executable}"\nargs = ["{STUB}", "{tmp_path / "log"}"]'
    return f'[[upstreams]]\nname = "{name}"\n{command}\nstartup_wait = 20\n{extra}\n'


GateOf = Callable[..., Any]


@pytest.fixture
def gate_of(tmp_path: Path) -> GateOf:
    @asynccontextmanager
    async def make(text: str, store: Store | None = None) -> AsyncIterator[Gate]:
        path = tmp_path / f"gw-{uuid.uuid4().hex[:6]}.toml"
        path.write_text(text, encoding="utf-8")
        cfg = load_config(path)
        gate = Gate(
            upstream_toolboxes(cfg.upstreams, cfg.label),
            store=store or SQLStore(f"sqlite:///{tmp_path / 'gw.db'}"),
            policy=cfg.policy,
        )
        async with gate:
            yield gate

    return make


def log_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "log"
    return path.read_text().splitlines() if path.exists() else []


async def test_tools_are_namespaced_in_order_with_the_upstream_schema(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path)) as gate:
        names = [spec.name for spec in gate.tools() if spec.toolbox == "stub"]
        assert names == sorted(names)
        assert {"stub.echo", "stub.append", "stub.whoami", "stub.count"} <= set(names)
        echo = gate.tool("stub.echo")
        assert echo is not None
        assert echo.input_schema["required"] == ["text"]
        env = await gate.call("stub.echo", {"text": "hello"}, principal=ALICE)
        assert env.status == "ok", env
        # The upstream declares an output schema: its structured result is the payload.
        assert echo.output_schema is not None
        assert env.payload == {"result": "hello"}
        records = await gate.audit(call_id=env.call_id)
        assert records[-1].tool == "stub.echo" and records[-1].user == "alice"


async def test_arguments_are_validated_with_callgates_messages(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path)) as gate:
        env = await gate.call("stub.echo", {"txt": "hello"}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert "Missing required argument 'text'" in env.error.message_for_model
        assert log_lines(tmp_path) == []


async def test_untrusted_annotations_do_not_count_and_trusted_ones_do(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path)) as gate:
        echo = gate.tool("stub.echo")
        assert echo is not None and echo.risk.value == "write_high_risk"
        assert not echo.trusted_source
    async with gate_of(upstream(tmp_path, 'trust = "trusted"')) as gate:
        echo, append = gate.tool("stub.echo"), gate.tool("stub.append")
        assert echo is not None and echo.risk.value == "read"
        # No hints at all: the specification's defaults, destructive.
        assert append is not None and append.risk.value == "write_high_risk"


async def test_the_operator_can_vouch_for_a_risk_tier_and_rename(
    gate_of: GateOf, tmp_path: Path
) -> None:
    extra = '[upstreams.tools.echo]\nrename = "say"\nrisk = "read"\nscopes = ["say:it"]\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        assert gate.tool("stub.echo") is None
        say = gate.tool("stub.say")
        assert say is not None and say.risk.value == "read" and say.scopes == {"say:it"}
        # Results of an untrusted upstream stay untrusted content.
        assert not say.trusted_source
        env = await gate.call("stub.say", {"text": "x"}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
        holder = Principal("alice", tenant="acme", scopes={"say:it"})
        env = await gate.call("stub.say", {"text": "x"}, principal=holder)
        assert env.status == "ok"


async def test_pinned_and_injected_arguments_are_the_gateways(
    gate_of: GateOf, tmp_path: Path
) -> None:
    extra = (
        '[upstreams.tools.whoami]\nrisk = "read"\npinned = { region = "eu-west-1" }\n'
        'inject = { tenant = "tenant" }\n'
    )
    async with gate_of(upstream(tmp_path, extra)) as gate:
        whoami = gate.tool("stub.whoami")
        assert whoami is not None
        assert set(whoami.input_schema["properties"]) == set()
        assert whoami.input_schema.get("required") == []
        # What the model sends for them is dropped, never used.
        env = await gate.call("stub.whoami", {"tenant": "evil", "region": "us"}, principal=ALICE)
        assert env.status == "ok", env
        assert env.payload == {"tenant": "acme", "region": "eu-west-1"}


async def test_an_upstream_error_keeps_its_text_for_the_model(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path)) as gate:
        env = await gate.call("stub.fail", {"reason": "no budget"}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert "cannot do that: no budget" in env.error.message_for_model
        assert env.error.next_step is not None and "upstream" in env.error.next_step


async def test_progress_passes_through(gate_of: GateOf, tmp_path: Path) -> None:
    caller = Recording()
    async with gate_of(upstream(tmp_path)) as gate:
        env = await gate.call("stub.count", {"to": 3}, principal=ALICE, sink=caller)
        assert env.status == "ok"
        assert [p for p, _, _ in caller.progressed] == [1, 2, 3]
        assert caller.progressed[-1][1:] == (3, "step 3")


async def test_a_write_whose_upstream_died_is_unknown_outcome_and_it_comes_back(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path)) as gate:
        env = await gate.call("stub.die", {"line": "once"}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
        assert not env.error.retryable
        assert "may or may not" in env.error.message_for_model
        assert log_lines(tmp_path) == ["die:once"]  # never retried
        with anyio.fail_after(20):
            while True:
                env = await gate.call("stub.echo", {"text": "back"}, principal=ALICE)
                if env.status == "ok":
                    break
                assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
                assert "'stub'" in env.error.message_for_model
                await anyio.sleep(0.2)


async def test_a_read_whose_upstream_died_is_transient(gate_of: GateOf, tmp_path: Path) -> None:
    extra = '[upstreams.tools.die_reading]\nrisk = "read"\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        env = await gate.call("stub.die_reading", {}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        assert "stub" in env.error.message_for_model


async def test_an_upstream_that_cannot_start_answers_transient_and_others_serve(
    gate_of: GateOf, tmp_path: Path
) -> None:
    broken = upstream(
        tmp_path,
        name="gone",
        command=f'command = "{tmp_path / "no-such-server"}"\nstartup_wait = 1',
    ).replace("startup_wait = 20\n", "")
    async with gate_of(upstream(tmp_path) + broken) as gate:
        env = await gate.call("stub.echo", {"text": "fine"}, principal=ALICE)
        assert env.status == "ok"
        gone = next(box for box in gate.upstreams() if getattr(box, "name", "") == "gone")
        assert gone.connection.state.value in ("down", "starting")  # type: ignore[attr-defined]
        assert gone.connection.stats.last_error  # type: ignore[attr-defined]


async def test_list_changed_relists_and_reaches_the_gate(gate_of: GateOf, tmp_path: Path) -> None:
    async with gate_of(upstream(tmp_path, 'protocol = "2025-11-25"')) as gate:
        changed = anyio.Event()
        box = next(box for box in gate.toolboxes if box.name == "stub")
        box.on_change(lambda _box: changed.set())
        env = await gate.call("stub.grow", {"name": "sprout"}, principal=ALICE)
        assert env.status == "ok", env
        with anyio.fail_after(10):
            await changed.wait()
        assert gate.tool("stub.sprout") is not None
        env = await gate.call("stub.sprout", {}, principal=ALICE)
        assert env.status == "ok"
        assert env.payload == {"result": "sprout here"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        yield SQLStore(f"sqlite:///{tmp_path / 'approvals.db'}")
        return
    schema = f"test_gw_{uuid.uuid4().hex[:12]}"
    yield SQLStore(POSTGRES_URL, schema=schema)
    await drop_schema(schema)


async def test_an_upstream_write_needing_approval_runs_once_after_it(
    gate_of: GateOf, tmp_path: Path, store: Store
) -> None:
    policy = (
        '[[policy.rules]]\nname = "appends-need-a-human"\neffect = "require_approval"\n'
        'tools = ["stub.append"]\nreason = "appending needs a second person"\n'
    )
    async with gate_of(upstream(tmp_path) + policy, store) as gate:
        env = await gate.call(
            "stub.append", {"line": "hello"}, principal=ALICE, idempotency_key="k-1"
        )
        assert env.status == "pending_approval", env
        assert env.approval is not None
        assert log_lines(tmp_path) == []
        approvals = await gate.approvals()
        await approvals.approve(env.approval.approval_id, by=BOB, note="fine")
        first = await gate.call(
            "stub.append", {"line": "hello"}, principal=ALICE, idempotency_key="k-1"
        )
        again = await gate.call(
            "stub.append", {"line": "hello"}, principal=ALICE, idempotency_key="k-1"
        )
        assert first.status == "ok", first
        assert again.status == "ok" and again.replayed
        assert log_lines(tmp_path) == ["none:hello"]


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25", "2026-07-28"])
async def test_resources_and_prompts_are_proxied_and_audited(
    gate_of: GateOf, tmp_path: Path, protocol: str
) -> None:
    # Pinned to 2026-07-28 the gateway's client asks the upstream nothing before
    # adopting the version: its resources and prompts must be found all the same.
    async with gate_of(upstream(tmp_path, f'protocol = "{protocol}"')) as gate:
        server = build_server(gate, principal=ALICE)
        async with Client(server, mode="legacy") as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "stub+stub://motd" in listed
            templates = (await client.list_resource_templates()).resource_templates
            assert "stub+stub://notes/{name}" in {t.uri_template for t in templates}
            read = await client.read_resource("stub+stub://motd")
            assert read.contents[0].text == "all systems nominal"  # type: ignore[union-attr]
            read = await client.read_resource("stub+stub://notes/todo")
            assert read.contents[0].text == "note todo"  # type: ignore[union-attr]
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert "stub__review" in prompts
            got = await client.get_prompt("stub__review", {"subject": "the plan"})
            assert got.messages[0].content.text == "Please review the plan."  # type: ignore[union-attr]
        trail = [(r.tool, r.outcome) for r in await gate.audit()]
        assert ("resource:stub+stub://motd", "ok") in trail


async def test_a_timeout_is_transient_for_a_read_and_unknown_for_a_write(
    gate_of: GateOf, tmp_path: Path
) -> None:
    extra = '[upstreams.tools.slow]\ntimeout = 0.3\nrisk = "read"\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        env = await gate.call("stub.slow", {"seconds": 2}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        assert "did not answer within 0.3 seconds" in env.error.message_for_model
    extra = "[upstreams.tools.slow]\ntimeout = 0.3\n"  # untrusted, no vouching: a write
    async with gate_of(upstream(tmp_path, extra)) as gate:
        env = await gate.call("stub.slow", {"seconds": 2}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
        assert env.timing.attempts == 1  # never retried


async def test_log_messages_pass_through(gate_of: GateOf, tmp_path: Path) -> None:
    caller = Recording()
    async with gate_of(upstream(tmp_path, 'protocol = "2025-11-25"')) as gate:
        env = await gate.call("stub.chatty", {}, principal=ALICE, sink=caller)
        assert env.status == "ok", env
        assert ("info", "halfway there") in caller.logged


async def test_the_gateways_clients_hear_of_an_upstreams_new_tool(
    gate_of: GateOf, tmp_path: Path
) -> None:
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    async with gate_of(upstream(tmp_path, 'protocol = "2025-11-25"')) as gate:
        server = build_server(gate, principal=ALICE)
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            assert "stub__sprout" not in before
            result = await client.call_tool("stub__grow", {"name": "sprout"})
            assert not result.is_error
            with anyio.fail_after(10):
                await heard.wait()
            after = {tool.name for tool in (await client.list_tools()).tools}
            assert "stub__sprout" in after


async def test_an_oversize_upstream_result_is_shaped_with_a_notice(
    gate_of: GateOf, tmp_path: Path
) -> None:
    async with gate_of(upstream(tmp_path, '[upstreams.tools.big]\nrisk = "read"\n')) as gate:
        env = await gate.call("stub.big", {"lines": 5000}, principal=ALICE)
        assert env.status == "ok", env
        assert env.truncated is not None and env.truncated.cursor
        assert env.raw_ref is not None
        more = await gate.read_more(env.truncated.cursor, principal=ALICE)
        assert more.status == "ok"


async def test_an_upstreams_sampling_request_reaches_the_gateways_caller(
    gate_of: GateOf, tmp_path: Path
) -> None:
    extra = 'protocol = "2025-11-25"\n[upstreams.tools.muse]\nrisk = "read"\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        env = await gate.call("stub.muse", {"topic": "tea"}, principal=ALICE, sink=Answering())
        assert env.status == "ok", env
        assert env.payload == {"result": "the model said: sampled"}
        # A caller whose client cannot sample: the upstream's request is refused.
        env = await gate.call("stub.muse", {"topic": "tea"}, principal=ALICE)
        assert env.error is not None
        assert "this client cannot sample its model" in env.error.message_for_model


async def test_an_upstream_down_at_start_serves_its_last_listing_and_answers_transient(
    gate_of: GateOf, tmp_path: Path, store: Store
) -> None:
    async with gate_of(upstream(tmp_path), store) as gate:
        assert gate.tool("stub.echo") is not None  # listed, and kept in the store
    broken = upstream(tmp_path, 'env = { STUB_BROKEN = "1" }').replace(
        "startup_wait = 20", "startup_wait = 1"
    )
    async with gate_of(broken, store) as gate:
        (box,) = gate.upstreams()
        assert box.connection.stats.tools_kept  # type: ignore[attr-defined]
        assert gate.tool("stub.echo") is not None
        env = await gate.call("stub.echo", {"text": "hi"}, principal=ALICE)
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        assert "'stub' is unavailable" in env.error.message_for_model
        assert "Nothing was sent" in env.error.message_for_model


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_call_the_gateway_gives_up_on_is_cancelled_at_the_upstream(
    gate_of: GateOf, tmp_path: Path, protocol: str
) -> None:
    extra = f'protocol = "{protocol}"\n[upstreams.tools.linger]\ntimeout = 0.5\nrisk = "read"\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        env = await gate.call(
            "stub.linger", {"seconds": 30}, principal=ALICE, session_id=f"s-{protocol}"
        )
        assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
        # The file is the upstream's: poll it, for a bounded time.
        for _ in range(200):
            if "linger:cancelled" in log_lines(tmp_path):
                break
            await anyio.sleep(0.05)
        assert "linger:cancelled" in log_lines(tmp_path)


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("Invalid structured content returned by tool append"),
        MCPError(types.INTERNAL_ERROR, "boom"),
    ],
)
async def test_a_failure_after_the_request_went_out_is_unknown_for_a_write(
    gate_of: GateOf, tmp_path: Path, failure: Exception
) -> None:
    extra = '[upstreams.tools.echo]\nrisk = "read"\n'
    async with gate_of(upstream(tmp_path, extra)) as gate:
        (box,) = gate.upstreams()

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise failure

        box.connection.call = broken  # type: ignore[attr-defined]
        write = await gate.call("stub.append", {"line": "x"}, principal=ALICE)
        assert write.error is not None and write.error.kind is ErrorKind.UNKNOWN_OUTCOME
        assert write.timing.attempts == 1
        read = await gate.call("stub.echo", {"text": "x"}, principal=ALICE)
        assert read.error is not None and read.error.kind is ErrorKind.UNRECOVERABLE
        for env in (write, read):
            assert "boom" not in env.error.message_for_model  # type: ignore[union-attr]
            assert "structured content" not in env.error.message_for_model  # type: ignore[union-attr]


async def test_the_local_principal_holds_the_scopes_configured_for_upstream_tools(
    tmp_path: Path,
) -> None:
    # callgate call and serve build the local principal at start-up, before the
    # upstream has listed a tool: the configured scopes must count already.
    path = tmp_path / "gw.toml"
    extra = 'scopes = ["stub:use"]\n[upstreams.tools.echo]\nscopes = ["stub:use", "stub:echo"]\n'
    path.write_text(upstream(tmp_path, extra))
    cfg = load_config(path)
    gate = Gate(upstream_toolboxes(cfg.upstreams, cfg.label), store=MemoryStore())
    who = local_principal(gate)
    async with gate:
        env = await gate.call("stub.echo", {"text": "hello"}, principal=who)

    assert {"stub:use", "stub:echo"} <= who.scopes
    assert env.status == "ok", env
