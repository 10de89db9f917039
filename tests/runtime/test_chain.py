"""The governed chain end to end: what a caller and the model see."""

from __future__ import annotations

import json
import threading

import anyio
import pytest

from callgate import ErrorKind, Gate, Limits, Policy, Principal, Rule, Status
from callgate.store import MemoryStore

from .conftest import ALICE, GateFactory
from .tools import Counters, build

pytestmark = pytest.mark.anyio


def memory_gate(counters: Counters | None = None, **options: object) -> Gate:
    return Gate([build(counters or Counters())], store=MemoryStore(), **options)  # type: ignore[arg-type]


async def test_ok_call_returns_payload_and_is_audited(make_gate: GateFactory) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
        assert env.status is Status.OK
        assert env.payload == {"id": "D-1", "tenant": "acme", "state": "running"}
        assert env.error is None
        assert env.tool_version == "1"
        assert env.decision is not None and env.decision.effect == "allow"
        assert env.timing is not None and env.timing.attempts == 1
        records = await gate.audit()
    assert [r.phase for r in records] == ["final"]  # read-only: no intent record
    rec = records[0]
    assert (rec.call_id, rec.user, rec.tenant, rec.tool, rec.outcome, rec.risk) == (
        env.call_id,
        "alice",
        "acme",
        "t.status",
        "ok",
        "read",
    )
    assert rec.contract_hash and rec.contract_hash.startswith("sha256:")
    assert rec.args_hash and rec.trace_id == env.trace_id


async def test_sync_tools_run_in_worker_threads() -> None:
    counters = Counters()
    async with memory_gate(counters) as gate:
        await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
    assert counters.threads and counters.threads[0] != threading.main_thread().name


async def test_malformed_json_arguments() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", '{"deploy_id": "D-1"', principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "not valid JSON" in env.error.message_for_model


async def test_arguments_must_be_an_object() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", "[1, 2]", principal=ALICE)
    assert env.error is not None and "JSON object" in env.error.message_for_model


async def test_wrong_type_names_the_field() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", {"deploy_id": 7}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert env.error.message_for_model == "Argument 'deploy_id': expected string, got integer (7)."


async def test_missing_required_field_is_described() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", {}, principal=ALICE)
    assert env.error is not None
    assert "Missing required argument 'deploy_id' (Like D-1.)" in env.error.message_for_model


async def test_unknown_field_suggests_the_close_match() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1", "deploy_idd": "x"}, principal=ALICE)
    assert env.error is not None
    msg = env.error.message_for_model
    assert "Unknown argument 'deploy_idd'. Did you mean 'deploy_id'?" in msg
    assert "Allowed arguments: deploy_id." in msg


async def test_enum_value_suggests_the_close_match() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.forecast", {"city": "Beijng"}, principal=ALICE)
    assert env.error is not None
    msg = env.error.message_for_model
    assert '"Beijng" is not allowed' in msg
    assert "Did you mean 'Beijing'?" in msg
    assert '"Paris"' in msg


async def test_unknown_tool_suggests_close_names() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.stats", {}, principal=ALICE)
        bare = await gate.call("status", {}, principal=ALICE)
        # A tool the caller may not call is never suggested (nor named at all).
        writer = Principal(user="wes", tenant="acme", scopes={"w"})
        hidden = await gate.call("t.stats", {}, principal=writer)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "Did you mean 't.status'?" in env.error.message_for_model
    assert bare.error is not None and "'t.status'" in bare.error.message_for_model
    assert hidden.error is not None and hidden.error.kind is ErrorKind.CONSTRUCTION
    assert "Unknown tool 't.stats'." in hidden.error.message_for_model
    assert "t.status" not in hidden.error.message_for_model


async def test_trusted_field_from_the_model_is_dropped_and_audited(make_gate: GateFactory) -> None:
    async with make_gate([build(Counters())]) as gate:
        env = await gate.call(
            "t.status", {"deploy_id": "D-1", "tenant_id": "globex"}, principal=ALICE
        )
        records = await gate.audit()
    assert env.status is Status.OK and env.payload["tenant"] == "acme"
    assert records[-1].dropped_fields == ("tenant_id",)


async def test_a_trusted_field_the_principal_cannot_fill_refuses_the_call() -> None:
    counters = Counters()
    nobody = Principal(user="alice", tenant=None, scopes={"r"})
    async with memory_gate(counters) as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1"}, principal=nobody)
        # What the model sends for the field fills nothing in either.
        forged = await gate.call(
            "t.status", {"deploy_id": "D-1", "tenant_id": "acme"}, principal=nobody
        )
    for answer in (env, forged):
        assert answer.error is not None and answer.error.kind is ErrorKind.PERMISSION
        assert "made without one ('tenant_id' is set by the server" in (
            answer.error.message_for_model
        )
    assert "status" not in counters.runs


async def test_other_tenants_object_is_a_permission_error() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", {"deploy_id": "D-2"}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "another tenant" in env.error.message_for_model


async def test_missing_tenant_is_a_permission_error() -> None:
    async with memory_gate() as gate:
        env = await gate.call(
            "t.status", {"deploy_id": "D-1"}, principal=Principal(user="bob", scopes={"r"})
        )
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "tenant" in env.error.message_for_model


async def test_missing_scope_is_refused_on_every_call() -> None:
    counters = Counters()
    async with memory_gate(counters) as gate:
        env = await gate.call(
            "t.transfer", {"amount": 1, "to": "x"}, principal=Principal(user="eve", tenant="acme")
        )
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "'w'" in env.error.message_for_model and "eve" in env.error.message_for_model
    assert counters.runs.get("transfer") is None


async def test_business_state_error_reaches_the_model_verbatim() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.ship", {"shipment_id": "SH-1"}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.BUSINESS_STATE
    assert env.error.message_for_model == (
        "Shipment SH-1 has left the warehouse; weights can no longer change."
    )
    assert not env.error.retryable


async def test_unexpected_exception_hides_internals_but_audit_keeps_them(
    make_gate: GateFactory,
) -> None:
    async with make_gate([build(Counters())]) as gate:
        env = await gate.call("t.broken", {}, principal=ALICE)
        records = await gate.audit()
    assert env.error is not None and env.error.kind is ErrorKind.UNRECOVERABLE
    text = env.model_dump_json()
    for secret in ("hunter2", "internal-db-7", "Traceback", "RuntimeError"):
        assert secret not in text
    assert env.error.detail_ref == env.call_id
    assert env.call_id in env.error.message_for_model
    detail = records[-1].detail["exception"]
    assert detail["type"] == "builtins.RuntimeError"
    assert "hunter2" in detail["message"] and "Traceback" in detail["traceback"]


async def test_hanging_read_times_out_as_transient_after_retries() -> None:
    counters = Counters()
    limits = Limits(backoff_base=0.001, max_attempts=2)
    async with memory_gate(counters, limits=limits) as gate:
        env = await gate.call("t.hang_read", {}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.error.retryable and "0.2 seconds" in env.error.message_for_model
    assert counters.runs["hang_read"] == 2
    assert env.timing is not None and env.timing.attempts == 2


async def test_non_idempotent_timeout_is_unknown_outcome_and_not_retried(
    make_gate: GateFactory,
) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        env = await gate.call("t.hang_write", {}, principal=ALICE)
        records = await gate.audit()
    assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert not env.error.retryable
    assert "Do not retry" in (env.error.next_step or "")
    assert counters.runs["hang_write"] == 1
    assert [r.phase for r in records] == ["intent", "final"]
    assert records[1].outcome == "unknown_outcome"


async def test_sync_tool_timeout_is_enforced() -> None:
    async with memory_gate(limits=Limits(max_attempts=1)) as gate:
        with anyio.fail_after(5):
            env = await gate.call("t.hang_sync", {}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.timing is not None and env.timing.duration_ms < 900


async def test_timeout_is_capped_by_the_hard_maximum() -> None:
    limits = Limits(max_timeout=0.1, max_attempts=1)
    async with memory_gate(limits=limits) as gate:
        env = await gate.call("t.hang_read", {}, principal=ALICE, timeout=60)
    assert env.error is not None and "0.1 seconds" in env.error.message_for_model


async def test_transient_failures_of_reads_are_retried() -> None:
    counters = Counters()
    async with memory_gate(counters, limits=Limits(backoff_base=0.001)) as gate:
        env = await gate.call("t.flaky", {"fail_times": 2}, principal=ALICE)
    assert env.status is Status.OK and env.payload == "ok after 3"
    assert env.timing is not None and env.timing.attempts == 3


async def test_retries_stop_at_the_per_call_limit() -> None:
    counters = Counters()
    async with memory_gate(counters, limits=Limits(backoff_base=0.001, max_attempts=3)) as gate:
        env = await gate.call("t.flaky", {"fail_times": 10}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert counters.runs["flaky"] == 3


async def test_session_retry_budget_is_shared_across_calls(make_gate: GateFactory) -> None:
    counters = Counters()
    limits = Limits(backoff_base=0.001, max_attempts=5, session_retry_budget=3)
    async with make_gate([build(counters)], limits=limits) as gate:
        first = await gate.call("t.flaky", {"fail_times": 2}, principal=ALICE, session_id="s1")
        assert first.ok and counters.runs["flaky"] == 3  # 2 retries spent
        counters.runs["flaky"] = 0
        second = await gate.call("t.flaky", {"fail_times": 3}, principal=ALICE, session_id="s1")
    # one retry left in the session budget: 2 runs, still failing
    assert second.error is not None and second.error.kind is ErrorKind.TRANSIENT
    assert counters.runs["flaky"] == 2


async def test_transient_failure_of_a_write_is_not_retried() -> None:
    counters = Counters()
    async with memory_gate(counters) as gate:
        env = await gate.call("t.flaky_write", {}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.error.retryable  # the model may try again later, the gate did not
    assert counters.runs["flaky_write"] == 1


async def test_duplicate_calls_in_a_session_are_refused(make_gate: GateFactory) -> None:
    counters = Counters()
    limits = Limits(duplicate_call_limit=2)
    async with make_gate([build(counters)], limits=limits) as gate:
        args = {"deploy_id": "D-1"}
        for _ in range(2):
            assert (await gate.call("t.status", args, principal=ALICE, session_id="s")).ok
        third = await gate.call("t.status", args, principal=ALICE, session_id="s")
        other_session = await gate.call("t.status", args, principal=ALICE, session_id="s2")
        other_args = await gate.call(
            "t.status", {"deploy_id": "D-9"}, principal=ALICE, session_id="s"
        )
    assert third.error is not None and third.error.kind is ErrorKind.BUSINESS_STATE
    assert "already" in third.error.message_for_model
    assert "result you already have" in (third.error.next_step or "")
    assert counters.runs["status"] == 4
    assert other_session.ok
    assert other_args.error is not None and other_args.error.kind is ErrorKind.CONSTRUCTION


async def test_policy_deny_and_require_approval(make_gate: GateFactory) -> None:
    counters = Counters()
    policy = Policy(
        [
            Rule(
                "deny", when="args.to == 'mallory'", reason="mallory is blocked", name="no-mallory"
            ),
            Rule("require_approval", when="args.amount > 1000", reason="large transfer"),
            Rule("allow", when="args.amount > 5000"),
        ]
    )
    async with make_gate([build(counters)], policy=policy) as gate:
        denied = await gate.call("t.transfer", {"amount": 10, "to": "mallory"}, principal=ALICE)
        pending = await gate.call("t.transfer", {"amount": 9000, "to": "bob"}, principal=ALICE)
        fine = await gate.call("t.transfer", {"amount": 10, "to": "bob"}, principal=ALICE)
        other_tool = await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
        records = await gate.audit()
    assert denied.error is not None and denied.error.kind is ErrorKind.PERMISSION
    assert "mallory is blocked" in denied.error.message_for_model
    assert denied.decision is not None and denied.decision.rule == "no-mallory"
    assert pending.status is Status.PENDING_APPROVAL
    assert pending.error is not None and "large transfer" in pending.error.message_for_model
    assert "Nothing was executed" in pending.error.message_for_model
    assert pending.approval.approval_id.startswith("apr_")
    assert fine.ok and other_tool.ok  # a rule reading a missing key does not match
    assert counters.runs["transfer"] == 1
    assert [r.decision for r in records] == ["deny", "require_approval", "allow", "allow", "allow"]


async def test_policy_conditions_see_trusted_values_and_principal() -> None:
    policy = Policy(
        [Rule("deny", when="args.tenant_id == 'acme' && !('admin' in principal.roles)")]
    )
    async with memory_gate(policy=policy) as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
        admin = Principal(user="root", tenant="acme", scopes={"r"}, roles={"admin"})
        ok = await gate.call("t.status", {"deploy_id": "D-1"}, principal=admin)
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert ok.ok


async def test_policy_fails_closed_on_evaluation_errors() -> None:
    policy = Policy([Rule("deny", when="args.amount / 0 > 1", reason="math")])
    async with memory_gate(policy=policy) as gate:
        env = await gate.call("t.transfer", {"amount": 5, "to": "x"}, principal=ALICE)
        records = await gate.audit()
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "math" in env.error.message_for_model
    assert "evaluated" not in env.error.message_for_model  # internals stay in the audit
    assert "could not be evaluated" in records[-1].detail["policy_problem"]


def test_bad_cel_is_refused_when_the_policy_is_built() -> None:
    from callgate import PolicyError

    with pytest.raises(PolicyError, match="invalid CEL"):
        Rule("deny", when="args.amount >")
    with pytest.raises(PolicyError):
        Rule("maybe")
    with pytest.raises(PolicyError, match="unknown keys"):
        Policy.from_dict({"rules": [{"effect": "deny", "whn": "true"}]})


async def test_concise_and_detailed_views() -> None:
    async with memory_gate() as gate:
        concise = await gate.call("t.people", {}, principal=ALICE)
        detailed = await gate.call("t.people", {"response_format": "detailed"}, principal=ALICE)
        spec = gate.registry.get("t.people")
    assert concise.payload == [{"id": 1, "name": "Ann"}]
    assert "bio" in detailed.payload[0]
    assert spec is not None
    assert spec.input_schema["properties"]["response_format"]["enum"] == ["concise", "detailed"]


async def test_sync_convenience() -> None:
    with memory_gate() as gate:
        env = gate.call_sync("t.status", {"deploy_id": "D-1"}, principal=ALICE)
        again = gate.call_sync("t.forecast", {"city": "Lima"}, principal=ALICE)
    assert env.ok and again.payload == "sunny in Lima for 1 days"


async def test_envelope_json_round_trip() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
    data = json.loads(env.model_dump_json())
    assert data["status"] == "ok" and data["payload"]["id"] == "D-1"
    # What a model reads (agent loop and MCP alike): the payload as compact JSON.
    assert env.for_model() == '{"id":"D-1","tenant":"acme","state":"running"}'


async def test_cancelled_write_is_recorded_as_unknown_outcome(make_gate: GateFactory) -> None:
    counters = Counters()
    counters.started = anyio.Event()
    async with make_gate([build(counters)]) as gate:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    await gate.call("t.slow_write", {"ms": 10_000}, principal=ALICE)

                tg.start_soon(run)
                await counters.started.wait()
                tg.cancel_scope.cancel()
        records = await gate.audit()
    assert [r.phase for r in records] == ["intent", "final"]
    assert records[1].outcome == "unknown_outcome"


async def test_refused_calls_are_audited_too(make_gate: GateFactory) -> None:
    async with make_gate([build(Counters())]) as gate:
        await gate.call("t.nope", {}, principal=ALICE)
        await gate.call("t.status", "{", principal=ALICE)
        await gate.call("t.transfer", {"amount": 1, "to": "x"}, principal=Principal(user="z"))
        records = await gate.audit()
        tail = await gate.audit(tail=1)
    assert [r.outcome for r in records] == ["construction", "construction", "permission"]
    assert [r.tool for r in records] == ["t.nope", "t.status", "t.transfer"]
    assert tail == records[-1:]


async def test_pattern_errors_describe_the_expected_format() -> None:
    async with memory_gate() as gate:
        env = await gate.call("t.notify", {"to": ["a@b.example", "bob at acme"]}, principal=ALICE)
    assert env.error is not None
    assert env.error.message_for_model == (
        "Argument 'to[1]': \"bob at acme\" is not in the expected format. "
        "Expected: Recipients, as name@domain addresses."
    )


async def test_missing_principal_attribute_fails_closed() -> None:
    policy = Policy(
        [Rule("deny", when="principal.attributes.clearance != 'high'", reason="needs clearance")]
    )
    async with memory_gate(policy=policy) as gate:
        env = await gate.call("t.status", {"deploy_id": "D-1"}, principal=ALICE)
        cleared = Principal(user="c", tenant="acme", scopes={"r"}, attributes={"clearance": "high"})
        ok = await gate.call("t.status", {"deploy_id": "D-1"}, principal=cleared)
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "needs clearance" in env.error.message_for_model
    assert ok.ok


async def test_a_hung_sync_tool_cannot_eat_the_threads() -> None:
    import threading

    from callgate import Toolbox

    release = threading.Event()
    box = Toolbox("h")

    # Long enough for a worker thread to start on a loaded machine: an attempt that
    # could not start in time is retried (nothing ran), which is not under test here.
    @box.tool(read_only=True, timeout=0.25)
    def stuck() -> None:
        """Blocks until released."""
        release.wait(10)

    try:
        async with Gate([box], store=MemoryStore(), limits=Limits(backoff_base=0.001)) as gate:
            answers = [await gate.call("h.stuck", {}, principal=ALICE) for _ in range(10)]
    finally:
        release.set()
    assert all(a.error is not None and a.error.kind is ErrorKind.TRANSIENT for a in answers)
    # a timed-out sync attempt is not retried (its thread still runs): one thread per call
    assert all(a.timing is not None and a.timing.attempts == 1 for a in answers)
    refused = [a for a in answers if "not responding" in a.error.message_for_model]  # type: ignore[union-attr]
    assert len(refused) == 2  # 8 threads held, then refused


async def test_retries_stop_at_the_hard_maximum() -> None:
    counters = Counters()
    limits = Limits(max_timeout=0.5, max_attempts=10, backoff_base=0.001)
    async with memory_gate(counters, limits=limits) as gate:
        with anyio.fail_after(5):
            env = await gate.call("t.hang_read", {}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.TRANSIENT
    assert env.timing is not None and env.timing.duration_ms < 800
    assert counters.runs["hang_read"] < 5  # 0.2 s attempts inside a 0.5 s call


async def test_a_bad_timeout_is_refused_by_the_caller_api() -> None:
    async with memory_gate() as gate:
        with pytest.raises(ValueError, match="positive"):
            await gate.call("t.transfer", {"amount": 1, "to": "x"}, principal=ALICE, timeout=-1)


async def test_closing_waits_for_calls_in_flight() -> None:
    counters = Counters()
    counters.started = anyio.Event()
    gate = memory_gate(counters)
    got = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                got.append(await gate.call("t.slow_write", {"ms": 100}, principal=ALICE))

            tg.start_soon(call)
            await counters.started.wait()
            await gate.aclose()
    assert got[0].ok
    assert [r.phase for r in await gate.store.list_audit()] == ["intent", "final"]


async def test_a_gateway_failure_after_a_write_is_an_unknown_outcome() -> None:
    from callgate import Toolbox

    box = Toolbox("p")
    sent: list[str] = []

    def broken_view(payload: object) -> object:
        raise RuntimeError("view bug")

    @box.tool(idempotent=False, concise=broken_view)
    def send(to: str) -> dict[str, str]:
        """Sends."""
        sent.append(to)
        return {"to": to}

    async with Gate([box], store=MemoryStore()) as gate:
        env = await gate.call("p.send", {"to": "bob"}, principal=ALICE)
    assert sent == ["bob"]
    assert env.error is not None and env.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert "may have been made" in env.error.message_for_model


async def test_a_toolbox_limited_to_tenants_refuses_others() -> None:
    from callgate import Toolbox

    box = Toolbox("only", tenants={"acme"})

    @box.tool(read_only=True)
    def ping() -> str:
        """Ping."""
        return "pong"

    async with Gate([box], store=MemoryStore()) as gate:
        ok = await gate.call("only.ping", {}, principal=ALICE)
        other = await gate.call("only.ping", {}, principal=Principal(user="g", tenant="globex"))
        listed = [s.name for s in gate.tools(Principal(user="g", tenant="globex"))]
    assert ok.ok
    assert other.error is not None and other.error.kind is ErrorKind.PERMISSION
    assert "only.ping" not in listed
