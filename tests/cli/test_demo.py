"""`callgate demo`: the README's first command."""

from __future__ import annotations

import pytest

from callgate.cli.demo_tour import STEPS

from .conftest import Cli


def test_demo_runs_every_step_without_input_and_exits_0(cli: Cli) -> None:
    result = cli("demo")

    assert result.exit_code == 0, result.output
    out = result.stdout
    for number, step in enumerate(STEPS, start=1):
        assert f"{number}. {step.title}" in out
        assert step.explain in out
    assert "unexpected" not in out  # every step ended as it is meant to
    assert "Autumn Sale_Search_Retarget" in out
    assert "Did you mean 'new_daily_budget'?" in out
    assert "error (permission)" in out
    assert "dropped   tenant_id" in out
    assert "pending_approval" in out
    assert "truncated: showing" in out
    assert "What the audit trail says" in out
    assert f"{len(STEPS)} calls (newest last)" in out


def test_demo_calls_are_in_the_audit_trail(cli: Cli) -> None:
    assert cli("demo").exit_code == 0

    records = cli.json("audit")

    finals = [r for r in records if r["phase"] == "final"]
    assert [r["outcome"] for r in finals] == [
        "ok",
        "construction",
        "permission",
        "ok",
        "pending_approval",
        "ok",
    ]
    assert finals[3]["dropped_fields"] == ["tenant_id"]
    assert len({r["session_id"] for r in records}) == 1


@pytest.mark.parametrize("store", ["memory://", "sqlite://"])
def test_demo_on_in_memory_stores_lists_its_calls_in_order(cli: Cli, store: str) -> None:
    result = cli("demo", "--store", store)

    assert result.exit_code == 0
    audit = result.stdout.split("What the audit trail says", 1)[1].split("Next:", 1)[0]
    tools = [
        word for line in audit.splitlines() for word in line.split() if word.startswith("ops.")
    ]
    assert tools == [step.tool for step in STEPS]
