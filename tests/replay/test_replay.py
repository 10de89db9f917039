"""Replaying a recorded agent run against a gate whose tools or policy changed."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from callgate import Gate, Policy, Principal, Rule, Toolbox
from callgate.agent import ScriptedModel, call, calls, reply
from callgate.agent.loop import Agent
from callgate.replay import ReplayReport, replay, structural_diff

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"ops:read", "ops:write"})
APPROVER = Principal("bob", tenant="acme", scopes={"ops:read"}, roles={"approver"})
PAYMENTS = Rule("require_approval", tools=["ops.pay"], reason="payments need a second person")


def ops(
    *,
    state: str = "running",
    region_required: bool = False,
    narrow: bool = False,
    with_pay: bool = True,
    ran: list[str] | None = None,
) -> Toolbox:
    """The ops tools, in the version a test needs."""
    box = Toolbox("ops")
    log = ran if ran is not None else []

    if region_required:

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        def status(deploy_id: str, region: str) -> dict[str, str]:
            """Show a deployment's state.

            Args:
                deploy_id: The deployment, like D-1.
                region: Where it runs.
            """
            return {"deploy_id": deploy_id, "state": state}

    elif narrow:

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        def status(deploy_id: Literal["D-2", "D-3"]) -> dict[str, str]:  # type: ignore[misc]
            """Show a deployment's state.

            Args:
                deploy_id: The deployment, like D-2.
            """
            return {"deploy_id": deploy_id, "state": state}

    else:

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        def status(deploy_id: str) -> dict[str, str]:  # type: ignore[misc]
            """Show a deployment's state.

            Args:
                deploy_id: The deployment, like D-1.
            """
            log.append(f"status {deploy_id}")
            return {"deploy_id": deploy_id, "state": state}

    if with_pay:

        @box.tool(scopes={"ops:write"}, idempotent=False, open_world=False)
        def pay(amount: int) -> str:
            """Pay a supplier.

            Args:
                amount: In cents.
            """
            log.append(f"pay {amount}")
            return f"paid {amount}"

    return box


async def record_run(store: str, policy: Policy | None = None) -> str:
    """A run that checks D-1, pays 500 and answers: its id."""
    model = ScriptedModel(
        [
            call("ops.status", {"deploy_id": "D-1"}),
            call("ops.pay", {"amount": 500}),
            reply("D-1 is running; paid."),
        ]
    )
    async with Gate([ops()], store=store, policy=policy) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Check D-1 and pay 500.")
    assert result.status == "completed", result.reason
    return result.run_id


async def replayed(
    store: str, run_id: str, box: Toolbox, *, policy: Policy | None = None, live: bool = False
) -> ReplayReport:
    async with Gate([box], store=store, policy=policy) as gate:
        return await replay(gate, run_id, principal=ALICE, live=live)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def differences(report: ReplayReport) -> dict[str, list[str]]:
    return {c.tool: [d.kind for d in c.differences] for c in report.calls}


async def test_the_same_gate_replays_with_no_difference_and_runs_no_tool(store: str) -> None:
    run_id = await record_run(store)
    ran: list[str] = []

    report = await replayed(store, run_id, ops(ran=ran))

    assert [(c.tool, c.then, c.now) for c in report.calls] == [
        ("ops.status", "allow", "allow"),
        ("ops.pay", "allow", "allow"),
    ]
    assert report.changed == () and report.turns == 3
    assert report.summary() == "2 calls replayed over 3 turns: 2 unchanged, 0 changed"
    assert ran == []  # answered from the recording: nothing was paid again


async def test_a_new_required_parameter_makes_the_call_fail_validation(store: str) -> None:
    run_id = await record_run(store)

    report = await replayed(store, run_id, ops(region_required=True))
    [status, pay] = report.calls

    assert [d.kind for d in status.differences] == ["fails_validation", "contract_changed"]
    assert "region" in status.differences[0].text
    assert status.now == "refused:validate" and not pay.changed
    assert "fails_validation 1, contract_changed 1" in report.summary()


async def test_a_narrowed_enum_makes_the_call_fail_validation(store: str) -> None:
    run_id = await record_run(store)

    report = await replayed(store, run_id, ops(narrow=True))

    [fails] = [d for d in report.calls[0].differences if d.kind == "fails_validation"]
    assert "D-1" in fails.text and "D-2" in fails.text


async def test_a_rule_requiring_approval_changes_the_decision(store: str) -> None:
    run_id = await record_run(store)

    report = await replayed(store, run_id, ops(), policy=Policy([PAYMENTS]))

    assert differences(report) == {"ops.status": [], "ops.pay": ["decision_changed"]}
    [changed] = report.changed
    assert changed.differences[0].text == (
        "allow -> require_approval (payments need a second person)"
    )


async def test_a_denying_rule_is_reported(store: str) -> None:
    run_id = await record_run(store)
    deny = Policy([Rule("deny", tools=["ops.pay"], reason="payments are frozen")])

    report = await replayed(store, run_id, ops(), policy=deny)

    assert report.calls[1].now == "deny"
    assert report.calls[1].differences[0].text == "allow -> deny (payments are frozen)"


async def test_a_removed_tool_is_reported_missing(store: str) -> None:
    run_id = await record_run(store)

    report = await replayed(store, run_id, ops(with_pay=False))

    assert differences(report) == {"ops.status": [], "ops.pay": ["tool_missing"]}
    assert report.calls[1].now == "missing"


async def test_a_run_that_waited_for_an_approval_replays_unchanged_under_the_same_rule(
    store: str,
) -> None:
    policy = Policy([PAYMENTS])
    model = ScriptedModel([call("ops.pay", {"amount": 500}), reply("Paid.")])
    async with Gate([ops()], store=store, policy=policy) as gate:
        agent = Agent(gate, model, principal=ALICE)
        waiting = await agent.run("Pay 500.")
        [approval] = waiting.pending_approvals
        await (await gate.approvals()).approve(approval, by=APPROVER)
        done = await agent.resume(waiting.run_id)
    assert done.status == "completed"

    same = await replayed(store, done.run_id, ops(), policy=policy)
    relaxed = await replayed(store, done.run_id, ops())

    assert same.calls[0].then == "require_approval" and same.changed == ()
    assert relaxed.calls[0].differences[0].text == "require_approval -> allow"


async def test_live_replay_runs_the_tools_again_and_reports_changed_results(store: str) -> None:
    run_id = await record_run(store)
    ran: list[str] = []

    report = await replayed(store, run_id, ops(state="failed", ran=ran), live=True)

    assert ran == ["status D-1", "pay 500"]  # live: the payment was made again
    assert differences(report) == {"ops.status": ["result_changed"], "ops.pay": []}
    assert report.calls[0].differences[0].text == 'state: "running" -> "failed"'
    assert all(c.answered == "live" for c in report.calls)


async def test_live_replay_does_not_run_a_call_that_now_needs_approval(store: str) -> None:
    run_id = await record_run(store)
    ran: list[str] = []

    report = await replayed(store, run_id, ops(ran=ran), policy=Policy([PAYMENTS]), live=True)

    assert ran == ["status D-1"]
    assert report.calls[1].answered == "recording"
    async with Gate([ops()], store=store) as gate:
        assert await (await gate.approvals()).list() == []  # nothing parked


async def test_a_replay_is_deterministic(store: str) -> None:
    run_id = await record_run(store)

    first = await replayed(store, run_id, ops(region_required=True), policy=Policy([PAYMENTS]))
    second = await replayed(store, run_id, ops(region_required=True), policy=Policy([PAYMENTS]))

    assert first.to_json() == second.to_json()
    assert first.to_json()["by_kind"] == {
        "fails_validation": 1,
        "decision_changed": 1,
        "contract_changed": 1,
    }


async def test_several_calls_of_one_turn_replay_in_the_models_order(store: str) -> None:
    model = ScriptedModel(
        [
            calls(("ops.status", {"deploy_id": "D-1"}), ("ops.status", {"deploy_id": "D-2"})),
            reply("Both fine."),
        ]
    )
    async with Gate([ops()], store=store) as gate:
        result = await Agent(gate, model, principal=ALICE).run("Check D-1 and D-2.")

    report = await replayed(store, result.run_id, ops(with_pay=False))

    assert [c.arguments for c in report.calls] == [{"deploy_id": "D-1"}, {"deploy_id": "D-2"}]
    assert [c.turn for c in report.calls] == [1, 1]


async def test_the_run_is_checked_for_its_principal_as_recorded(store: str) -> None:
    # Only an approver may pay; the run's principal was one. A replay with no
    # principal given checks the calls for that principal, roles and all.
    policy = Policy(
        [
            Rule(
                "deny",
                tools=["ops.pay"],
                when="!('payer' in principal.roles)",
                reason="payers only",
            )
        ]
    )
    payer = Principal("alice", tenant="acme", scopes={"ops:read", "ops:write"}, roles={"payer"})
    model = ScriptedModel([call("ops.pay", {"amount": 5}), reply("Paid.")])
    async with Gate([ops()], store=store, policy=policy) as gate:
        run_id = (await Agent(gate, model, principal=payer).run("Pay 5.")).run_id

        report = await replay(gate, run_id)
        as_alice = await replay(gate, run_id, principal=ALICE)  # without the role

    assert [(c.then, c.now) for c in report.calls] == [("allow", "allow")]
    assert [(c.then, c.now) for c in as_alice.calls] == [("allow", "deny")]


async def test_an_unknown_run_is_a_lookup_error(store: str) -> None:
    async with Gate([ops()], store=store) as gate:
        with pytest.raises(LookupError, match="run_nope"):
            await replay(gate, "run_nope")


def test_a_structural_diff_names_each_path() -> None:
    old = {"a": 1, "b": [1, 2], "c": {"d": "x"}}
    new = {"a": 2, "b": [1], "c": {"d": "x", "e": True}}

    assert structural_diff(old, new) == [
        "a: 1 -> 2",
        "b: 2 items -> 1",
        "c.e added (true)",
    ]
