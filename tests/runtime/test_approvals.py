"""Human approval: parked with the exact inputs, decided once, resumed once."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from callgate import ApprovalError, ErrorKind, Gate, Limits, Policy, Principal, Rule, Status
from callgate.clock import ManualClock
from callgate.runtime.policy import PolicyError
from callgate.store import MemoryStore

from .change_tools import Bank, build
from .conftest import GateFactory, durable_stores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"bank:write"})
BIG = Policy(
    [Rule("require_approval", tools=["bank.pay"], when="args.amount > 1000", reason="big payment")]
)
PAY = {"to": "bob", "amount": 5000}


async def park(gate: Gate, args: dict[str, object] = PAY) -> str:
    env = await gate.call("bank.pay", args, principal=ALICE, session_id="s1")
    assert env.status is Status.PENDING_APPROVAL, env
    return str(env.approval.approval_id)


async def test_parked_call_shows_exact_inputs_and_runs_once_approved(
    make_gate: GateFactory,
) -> None:
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:
        approval_id = await park(gate)
        again = await gate.call("bank.pay", PAY, principal=ALICE)
        approvals = await gate.approvals()
        record = await approvals.get(approval_id)
        listed = await approvals.list(state="pending")
        await approvals.approve(
            approval_id, by=Principal("carol", "acme"), note="checked the invoice"
        )
        ran = await gate.call("bank.pay", PAY, principal=ALICE)
        used = await approvals.get(approval_id)
        audit = await gate.audit()
    assert again.approval.approval_id == approval_id  # same request, same approval
    assert record is not None
    assert record.arguments == {"to": "bob", "amount": 5000, "tenant_id": "acme"}
    assert record.reason == "big payment" and record.user == "alice"
    assert [r.id for r in listed] == [approval_id]
    assert ran.ok and ran.decision is not None and ran.decision.effect == "approved"
    assert "carol" in (ran.decision.reason or "")
    assert bank.sent == ["acme:bob:5000"]
    assert used is not None and used.state == "used" and used.result is not None
    assert used.result["call_id"] == ran.call_id
    decision = [r for r in audit if r.phase == "decision"]
    assert len(decision) == 1 and decision[0].user == "carol"
    assert decision[0].decision == "approved" and decision[0].call_id == approval_id


async def test_an_approved_run_that_failed_in_its_tool_spends_the_approval() -> None:
    from callgate import BusinessStateError, Toolbox

    tried: list[int] = []
    box = Toolbox("vault")

    @box.tool(scopes={"bank:write"}, idempotent=False)
    def withdraw(amount: int) -> int:
        """Withdraw money (it may have moved some before it fails)."""
        tried.append(amount)
        raise BusinessStateError("The vault refused the withdrawal.")

    policy = Policy([Rule("require_approval", tools=["vault.withdraw"], reason="vault")])
    async with Gate([box], store=MemoryStore(), policy=policy) as gate:
        first = await gate.call("vault.withdraw", {"amount": 9}, principal=ALICE)
        assert first.approval is not None
        approval_id = first.approval.approval_id
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        failed = await gate.call("vault.withdraw", {"amount": 9}, principal=ALICE)
        again = await gate.call("vault.withdraw", {"amount": 9}, principal=ALICE)
        record = await (await gate.approvals()).get(approval_id)
    assert failed.error is not None and failed.error.kind is ErrorKind.BUSINESS_STATE
    # The tool ran, so the approval is not given back: the same call needs a new one.
    assert record is not None and record.state == "used" and record.used_by_call == failed.call_id
    assert again.status is Status.PENDING_APPROVAL
    assert again.approval.approval_id != approval_id
    assert tried == [9]


async def test_an_approval_does_not_cover_other_arguments_or_a_second_run(
    make_gate: GateFactory,
) -> None:
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:
        approval_id = await park(gate)
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        other = await gate.call("bank.pay", {"to": "mallory", "amount": 5000}, principal=ALICE)
        first = await gate.call("bank.pay", PAY, principal=ALICE)
        replay = await gate.call("bank.pay", PAY, principal=ALICE)
    assert other.status is Status.PENDING_APPROVAL and other.approval.approval_id != approval_id
    assert first.ok
    assert replay.status is Status.PENDING_APPROVAL  # one approval, one run
    assert replay.approval.approval_id not in (approval_id, other.approval.approval_id)
    assert bank.sent == ["acme:bob:5000"]


async def test_denial_reaches_the_model_with_the_reason(make_gate: GateFactory) -> None:
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:
        approval_id = await park(gate)
        await (await gate.approvals()).deny(
            approval_id, by=Principal("carol", "acme"), reason="not in budget"
        )
        env = await gate.call("bank.pay", PAY, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.PERMISSION
    assert "not in budget" in env.error.message_for_model and "carol" in env.error.message_for_model
    assert bank.sent == []


async def test_decisions_are_taken_once_and_not_by_the_requester(make_gate: GateFactory) -> None:
    async with make_gate([build(Bank())], policy=BIG) as gate:
        approval_id = await park(gate)
        approvals = await gate.approvals()
        with pytest.raises(ApprovalError, match="cannot decide"):
            await approvals.approve(approval_id, by=Principal("alice", "acme"))
        await approvals.approve(approval_id, by=Principal("carol", "acme"))
        with pytest.raises(ApprovalError, match="approved"):
            await approvals.approve(approval_id, by=Principal("dave", "acme"))
        with pytest.raises(ApprovalError, match="approved"):
            await approvals.deny(approval_id, by=Principal("dave", "acme"), reason="too late")
        with pytest.raises(ApprovalError, match="no approval"):
            await approvals.approve("apr_nope", by=Principal("carol", "acme"))
        with pytest.raises(ApprovalError, match="reason"):
            await approvals.deny(approval_id, by=Principal("carol", "acme"), reason=" ")


async def test_fifty_concurrent_approvals_decide_once(make_gate: GateFactory) -> None:
    async with make_gate([build(Bank())], policy=BIG) as gate:
        approval_id = await park(gate)
        approvals = await gate.approvals()
        wins: list[str] = []
        refused: list[str] = []

        async def approve(i: int) -> None:
            try:
                await approvals.approve(approval_id, by=Principal(f"approver{i}", "acme"))
                wins.append(f"approver{i}")
            except ApprovalError as exc:
                refused.append(exc.code)

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(approve, i)
        record = await approvals.get(approval_id)
    assert len(wins) == 1 and record is not None and record.decided_by == wins[0]
    # Every other approver is told it was decided already, not refused for another reason.
    assert refused == ["already_decided"] * 49


async def test_the_resumed_call_is_authorized_again(make_gate: GateFactory) -> None:
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:
        approval_id = await park(gate)
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        demoted = Principal(user="alice", tenant="acme", scopes=set())
        refused = await gate.resume(approval_id, principal=demoted)
        ran = await gate.resume(approval_id, principal=ALICE)
        with pytest.raises(ApprovalError):
            await gate.resume(approval_id, principal=Principal(user="eve", tenant="acme"))
    assert refused.error is not None and refused.error.kind is ErrorKind.PERMISSION
    assert ran.ok and bank.sent == ["acme:bob:5000"]


async def test_expired_approvals_cannot_be_decided_or_used(make_gate: GateFactory) -> None:
    clock = ManualClock()
    async with make_gate([build(Bank())], policy=BIG, clock=clock) as gate:
        approval_id = await park(gate)
        clock.advance(hours=24, seconds=1)  # the default approval TTL, and a second
        approvals = await gate.approvals()
        with pytest.raises(ApprovalError, match="expired"):
            await approvals.approve(approval_id, by=Principal("carol", "acme"))
        expired = await approvals.list(state="expired")
        again = await gate.call("bank.pay", PAY, principal=ALICE)
    assert [r.id for r in expired] == [approval_id]
    assert again.status is Status.PENDING_APPROVAL and again.approval.approval_id != approval_id


@durable_stores
async def test_a_restart_between_approval_and_resume_loses_nothing(
    make_gate: GateFactory, store_kind: str
) -> None:
    bank = Bank()
    gate = make_gate([build(bank)], policy=BIG)
    async with gate:
        approval_id = await park(gate)
    async with gate:  # the process came back: a new connection to the same database
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
    async with gate:
        ran = await gate.call("bank.pay", PAY, principal=ALICE)
        status = await gate.call(
            "callgate.approval_status", {"approval_id": approval_id}, principal=ALICE
        )
    assert ran.ok and bank.sent == ["acme:bob:5000"]
    assert status.payload["state"] == "used" and status.payload["result"]["status"] == "ok"


async def test_auto_approval_only_for_trusted_sources() -> None:
    from callgate import Toolbox

    rules = [
        Rule("require_approval", risk=["write_high_risk"], reason="writes need a human"),
        Rule("auto_approve", when="args.amount <= 10", reason="small amounts are fine"),
    ]
    trusted = build(Bank())
    untrusted = Toolbox("up", trusted=False)

    @untrusted.tool
    def pay(amount: int) -> int:
        """Pay (from an untrusted upstream)."""
        return amount

    async with Gate([trusted, untrusted], store=MemoryStore(), policy=Policy(rules)) as gate:
        small = await gate.call("bank.pay", {"to": "x", "amount": 5}, principal=ALICE)
        big = await gate.call("bank.pay", {"to": "x", "amount": 50}, principal=ALICE)
        upstream = await gate.call("up.pay", {"amount": 5}, principal=ALICE)
        records = {r.call_id: r for r in await gate.audit() if r.phase == "final"}
    small_record, upstream_record = records[small.call_id], records[upstream.call_id]
    assert small.ok and small.decision is not None and small.decision.effect == "auto_approved"
    assert big.status is Status.PENDING_APPROVAL
    assert upstream.status is Status.PENDING_APPROVAL
    assert upstream.error is not None and "untrusted" in upstream.error.message_for_model
    # The audit says why the upstream's own annotations were not believed.
    assert upstream_record.detail["annotations"] == (
        "untrusted source: treated as destructive and open-world"
    )
    assert "annotations" not in small_record.detail


async def test_approval_status_tool_is_for_the_requester_only() -> None:
    async with Gate([build(Bank())], store=MemoryStore(), policy=BIG) as gate:
        approval_id = await park(gate)
        mine = await gate.call(
            "callgate.approval_status", {"approval_id": approval_id}, principal=ALICE
        )
        bob = Principal(user="bob", tenant="acme")
        theirs = await gate.call(
            "callgate.approval_status", {"approval_id": approval_id}, principal=bob
        )
        other_tenant = await gate.call(
            "callgate.approval_status",
            {"approval_id": approval_id},
            principal=Principal(user="alice", tenant="globex"),
        )
    assert mine.payload["state"] == "pending" and mine.payload["tool"] == "bank.pay"
    # Someone else's request looks exactly like a missing one.
    assert theirs.error is not None and theirs.error.kind is ErrorKind.CONSTRUCTION
    assert other_tenant.error is not None and other_tenant.error.kind is ErrorKind.CONSTRUCTION


async def test_self_approval_is_refused_whatever_the_case() -> None:
    async with Gate([build(Bank())], store=MemoryStore(), policy=BIG) as gate:
        approval_id = await park(gate)
        approvals = await gate.approvals()
        with pytest.raises(ApprovalError) as refused:
            await approvals.approve(approval_id, by=Principal("ALICE", "acme"))
    assert refused.value.code == "self_approval"


async def test_a_confirmation_rule_lets_the_requester_approve_their_own_call(
    make_gate: GateFactory,
) -> None:
    confirm = Policy(
        [
            Rule(
                "require_approval",
                tools=["bank.pay"],
                when="args.amount > 1000",
                reason="big payment",
                approved_by="requester",
            )
        ]
    )
    bank = Bank()
    async with make_gate([build(bank)], policy=confirm) as gate:
        approval_id = await park(gate)
        approvals = await gate.approvals()
        record = await approvals.approve(
            approval_id, by=Principal("alice", "acme"), note="yes, I mean it"
        )
        ran = await gate.call("bank.pay", PAY, principal=ALICE)
    assert record.approved_by == "requester" and record.decided_by == "alice"
    assert ran.ok and bank.sent == ["acme:bob:5000"]


async def test_four_eyes_wins_when_a_confirmation_rule_also_matches() -> None:
    both = Policy(
        [
            Rule("require_approval", tools=["bank.pay"], approved_by="requester", name="confirm"),
            Rule("require_approval", tools=["bank.pay"], when="args.amount > 1000", name="big"),
        ]
    )
    async with Gate([build(Bank())], store=MemoryStore(), policy=both) as gate:
        approval_id = await park(gate)
        approvals = await gate.approvals()
        record = await approvals.get(approval_id)
        with pytest.raises(ApprovalError) as refused:
            await approvals.approve(approval_id, by=Principal("alice", "acme"))
    assert record is not None and record.approved_by == "another" and record.rule == "big"
    assert refused.value.code == "self_approval"


def test_approved_by_is_checked_and_read_from_config() -> None:
    policy = Policy.from_dict(
        {"rules": [{"effect": "require_approval", "approved_by": "requester"}]}
    )
    assert policy.rules[0].approved_by == "requester"
    with pytest.raises(PolicyError, match="approved_by must be 'another' or 'requester'"):
        Rule("require_approval", approved_by="self")  # type: ignore[arg-type]


async def test_an_auto_approval_that_cannot_be_evaluated_grants_nothing() -> None:
    rules = [
        Rule("require_approval", risk=["write_high_risk"], reason="writes need a human"),
        Rule("auto_approve", tools=["bank.*"], when="impact.increase_pct <= 10"),
    ]
    bank = Bank()
    async with Gate([build(bank)], store=MemoryStore(), policy=Policy(rules)) as gate:
        env = await gate.call("bank.pay", {"to": "mallory", "amount": 1_000_000}, principal=ALICE)
    assert env.status is Status.PENDING_APPROVAL
    assert bank.sent == []


async def test_concurrent_resumes_run_once_and_file_nothing_new(make_gate: GateFactory) -> None:
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:
        approval_id = await park(gate)
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        results = []

        async def resume() -> None:
            results.append(await gate.resume(approval_id, principal=ALICE))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(resume)
        pending = await (await gate.approvals()).list(state="pending")
    assert bank.sent == ["acme:bob:5000"]
    assert sum(r.ok for r in results) == 1
    # The others were told it was just used, or share one new request: never a flood.
    assert len(pending) <= 1


async def test_an_approved_but_expired_approval_is_not_used(make_gate: GateFactory) -> None:
    limits = Limits(approval_ttl=timedelta(minutes=10))
    bank = Bank()
    clock = ManualClock()
    async with make_gate([build(bank)], policy=BIG, limits=limits, clock=clock) as gate:
        approval_id = await park(gate)
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        clock.advance(minutes=10)
        env = await gate.call("bank.pay", PAY, principal=ALICE)
    assert env.status is Status.PENDING_APPROVAL and env.approval.approval_id != approval_id
    assert bank.sent == []


async def test_a_used_approval_answers_its_own_retry_and_a_new_key_asks_again(
    make_gate: GateFactory,
) -> None:
    # An agent's writes carry a key of their run: a new run proposing the identical
    # payment needs a new decision, while the first run's retry gets its result back.
    bank = Bank()
    async with make_gate([build(bank)], policy=BIG) as gate:

        async def pay(key: str) -> object:
            return await gate.call("bank.pay", PAY, principal=ALICE, idempotency_key=key)

        parked = await pay("run_a:1:c1")
        assert parked.status is Status.PENDING_APPROVAL
        approval_id = parked.approval.approval_id
        await (await gate.approvals()).approve(approval_id, by=Principal("carol", "acme"))
        first = await pay("run_a:1:c1")
        new_run = await pay("run_b:1:c1")
        retry = await pay("run_a:1:c1")
    assert first.ok and bank.sent == ["acme:bob:5000"]
    assert new_run.status is Status.PENDING_APPROVAL, new_run.error
    assert new_run.approval.approval_id != approval_id
    assert retry.ok and retry.replayed and retry.call_id == first.call_id
    assert bank.sent == ["acme:bob:5000"]
