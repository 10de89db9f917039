"""The issue's "done when": a +80% budget change, approved by another person, from the CLI.

Each command builds a fresh gate, as a new ``callgate`` process would; the
store (SQLite) and the demo's data file (``$CALLGATE_DEMO_STATE``) are what
carry the story from one command to the next.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from callgate.cli.app import DEMO_STATE_ENV, demo_state_file
from callgate.demo import STATE_ENV

from .conftest import Cli

ALICE = ("--principal", "alice@acme.example", "--tenant", "acme", "--attr", "domain=acme.example")
READ = ("--scopes", "campaigns:read")
WRITE = ("--scopes", "campaigns:write")
BOB = "bob@acme.example"


class Demo:
    """``callgate`` commands against one store and one demo data file."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.env = {DEMO_STATE_ENV: str(cli.tmp_path / "demo-state.json")}

    def run(self, *args: str) -> Any:
        result = self.cli(*args, "--json", **self.env)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def call(self, tool: str, arguments: dict[str, Any], *scopes: str) -> Any:
        """The Envelope; the exit code must match its status (3 while it waits, 1 on error)."""
        return self.cli.envelope(
            "call", tool, "--args", json.dumps(arguments), *ALICE, *scopes, **self.env
        )

    def campaign(self, name: str) -> dict[str, Any]:
        found = self.call("ops.campaigns_find", {"query": name}, *READ)
        assert found["status"] == "ok"
        return next(c for c in found["payload"] if c["name"] == name)

    def preview_plus_80(self) -> tuple[dict[str, Any], str, str]:
        """Preview +80% on "Autumn Sale_Search": (campaign before, preview id, approval id)."""
        campaign = self.campaign("Autumn Sale_Search")
        new_budget = campaign["daily_budget"] * 18 // 10
        preview = self.call(
            "ops.budget_change_preview",
            {"campaign_id": campaign["id"], "new_daily_budget": new_budget},
            *WRITE,
        )
        assert preview["status"] == "ok", preview
        payload = preview["payload"]
        return campaign, payload["preview_id"], payload["approval"]["approval_id"]

    def apply(self, preview_id: str) -> Any:
        return self.call("ops.budget_change_apply", {"preview_id": preview_id}, *WRITE)


@pytest.fixture
def demo(cli: Cli) -> Demo:
    return Demo(cli)


def test_a_large_budget_increase_runs_once_after_another_person_approves_it(demo: Demo) -> None:
    # Find the campaign, preview +80%: the preview says an approval is needed.
    campaign, preview_id, approval_id = demo.preview_plus_80()
    assert campaign["id"] == "C-101"
    new_budget = campaign["daily_budget"] * 18 // 10

    # Applying before the decision changes nothing.
    parked = demo.apply(preview_id)
    assert parked["status"] == "pending_approval"
    assert parked["approval"]["approval_id"] == approval_id
    assert demo.campaign("Autumn Sale_Search")["daily_budget"] == campaign["daily_budget"]

    # The approver sees exactly what will run, trusted fields included, and the impact.
    request = demo.run("approvals", "show", approval_id)
    assert request["state"] == "pending"
    assert request["tool"] == "ops.budget_change_apply"
    assert request["requested_by"] == "alice@acme.example"
    assert {
        k: request["arguments"][k] for k in ("campaign_id", "new_daily_budget", "tenant_id")
    } == {
        "campaign_id": "C-101",
        "new_daily_budget": new_budget,
        "tenant_id": "acme",
    }
    assert request["impact"]["daily_budget_before"] == campaign["daily_budget"]
    assert request["impact"]["daily_budget_after"] == new_budget

    approved = demo.cli(
        "approvals", "approve", approval_id, "--principal", BOB, "--tenant", "acme", **demo.env
    )
    assert approved.exit_code == 0, approved.output

    applied = demo.apply(preview_id)
    again = demo.apply(preview_id)
    assert applied["status"] == "ok", applied
    assert applied["decision"]["effect"] == "approved"
    assert BOB in applied["decision"]["reason"]
    assert applied["payload"]["daily_budget_after"] == new_budget
    assert again["status"] == "ok"
    assert again["replayed"] is True
    assert again["payload"] == applied["payload"]
    assert demo.campaign("Autumn Sale_Search")["daily_budget"] == new_budget

    status = demo.call("ops.budget_change_status", {"preview_id": preview_id}, *WRITE)
    assert status["status"] == "ok", status
    assert status["payload"]["state"] == "applied"

    done = demo.run("approvals", "show", approval_id)
    assert done["state"] == "used"
    assert done["decided_by"] == BOB
    assert done["result"]["status"] == "ok"
    assert done["result"]["call_id"] == applied["call_id"]

    # The audit tells the whole story, in order; the tool ran once.
    records = demo.run("audit")
    story = [
        (r["tool"], r["phase"], r["outcome"], r["user"])
        for r in records
        if r["tool"].startswith("ops.budget_change_") and r["phase"] != "intent"
    ]
    assert story[:4] == [
        ("ops.budget_change_preview", "final", "ok", "alice@acme.example"),
        ("ops.budget_change_apply", "final", "pending_approval", "alice@acme.example"),
        ("ops.budget_change_apply", "decision", "approved", BOB),
        ("ops.budget_change_apply", "final", "ok", "alice@acme.example"),
    ]
    decision = next(r for r in records if r["phase"] == "decision")
    assert decision["call_id"] == approval_id
    assert decision["detail"]["requested_by"] == "alice@acme.example"
    runs = [
        r
        for r in records
        if r["tool"] == "ops.budget_change_apply" and r["phase"] == "final" and r["attempts"] > 0
    ]
    assert [r["call_id"] for r in runs] == [applied["call_id"]]


def test_the_requester_cannot_approve_the_change_and_nobody_approves_twice(demo: Demo) -> None:
    _, _, approval_id = demo.preview_plus_80()
    approve = ("approvals", "approve", approval_id, "--tenant", "acme", "--principal")

    own = demo.cli(*approve, "alice@acme.example", **demo.env)
    # Leading whitespace or another case is still alice (four eyes holds).
    own_disguised = demo.cli(*approve, " Alice@acme.example", **demo.env)
    # Only the campaign owner (bob) may approve a large increase of C-101.
    not_owner = demo.cli(*approve, "carol@acme.example", **demo.env)
    other_tenant = demo.cli(
        "approvals",
        "approve",
        approval_id,
        "--principal",
        "mallory@globex.example",
        "--tenant",
        "globex",
        **demo.env,
    )
    first = demo.cli(*approve, BOB, **demo.env)
    second = demo.cli(*approve, BOB, **demo.env)

    assert own.exit_code == own_disguised.exit_code == 2
    assert "alice@acme.example requested it and cannot decide it" in own.stderr
    assert "alice@acme.example requested it and cannot decide it" in own_disguised.stderr
    assert not_owner.exit_code == 2
    assert "not among its approvers (bob@acme.example (the owner)" in not_owner.stderr
    assert other_tenant.exit_code == 2 and "only its own tenant's approvers" in other_tenant.stderr
    assert first.exit_code == 0
    assert second.exit_code == 2
    assert "a decision is taken once" in second.stderr
    refused = [
        (r["user"], r["detail"]["refused"])
        for r in demo.run("audit")
        if r["phase"] == "decision" and r["decision"] == "refused"
    ]
    assert refused == [
        ("alice@acme.example", "self_approval"),
        ("alice@acme.example", "self_approval"),
        ("carol@acme.example", "not_an_approver"),
        ("mallory@globex.example", "other_tenant"),
        (BOB, "already_decided"),
    ]
    assert demo.run("approvals", "show", approval_id)["decided_by"] == BOB


def test_a_denied_change_reaches_the_model_as_a_permission_error_with_the_reason(
    demo: Demo,
) -> None:
    campaign, preview_id, approval_id = demo.preview_plus_80()

    denied = demo.cli(
        *("approvals", "deny", approval_id, "--principal", BOB, "--tenant", "acme"),
        *("--reason", "Q4 budget is frozen"),
        **demo.env,
    )
    answer = demo.apply(preview_id)

    assert denied.exit_code == 0, denied.output
    assert answer["status"] == "error"
    assert answer["error"]["kind"] == "permission"
    assert "Q4 budget is frozen" in answer["error"]["message_for_model"]
    assert demo.campaign("Autumn Sale_Search")["daily_budget"] == campaign["daily_budget"]


def test_consecutive_calls_share_the_demo_data_without_setting_the_variable(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEMO_STATE_ENV, raising=False)

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        result = cli(
            *("call", tool, "--json", "--args", json.dumps(arguments), *ALICE),
            *("--scopes", "campaigns:read,campaigns:write"),
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    # +25%: no approval needed.
    preview = call("ops.budget_change_preview", {"campaign_id": "C-102", "new_daily_budget": 500})
    applied = call("ops.budget_change_apply", {"preview_id": preview["payload"]["preview_id"]})
    found = call("ops.campaigns_find", {"query": "Retarget"})

    assert applied["status"] == "ok", applied
    assert [c["daily_budget"] for c in found["payload"] if c["id"] == "C-102"] == [500]
    assert (cli.tmp_path / "c.db.demo-state.json").is_file()  # next to the store
    assert DEMO_STATE_ENV not in os.environ  # set for the command only


def test_demo_state_file_follows_the_store() -> None:
    assert DEMO_STATE_ENV == STATE_ENV
    assert demo_state_file("sqlite:////data/gate.db") == Path("/data/gate.db.demo-state.json")
    assert demo_state_file("memory://") is None
    assert demo_state_file("sqlite://") is None
    pg = demo_state_file("postgresql://u:p@db/callgate")
    other = demo_state_file("postgresql://u:p@db/other")
    assert pg is not None and pg.name.startswith("demo-state-") and pg != other
