"""`callgate replay`: a run recorded by `callgate run`, replayed against a changed config.

The model is a ScriptedModel (in process), as in test_run_outcomes.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from callgate.agent import ScriptedModel, call, reply
from callgate.agent.model import Model

from .conftest import Cli

TOOLS = '''
from callgate import Toolbox

shop = Toolbox("shop")


@shop.tool(scopes=["orders:read"], read_only=True, open_world=False)
def order_get(order_id: str) -> dict:
    """Get one order.

    Args:
        order_id: The order id, e.g. "O-1".
    """
    return {"id": order_id, "state": "STATE"}
'''

REFUND = '''

@shop.tool(scopes=["orders:write"], idempotent=False, open_world=False)
def refund(order_id: str, amount: int{extra}) -> dict:
    """Refund part of an order.

    Args:
        order_id: The order id.
        amount: Whole currency units.
    """
    with open("refunds.log", "a") as log:
        log.write(f"{{order_id}} {{amount}}\\n")
    return {{"order_id": order_id, "refunded": amount}}
'''

POLICY = """
[policy]
default = "allow"

[[policy.rules]]
name = "refunds-need-cashier"
effect = "deny"
tools = ["shop.refund"]
when = '!("cashier" in principal.roles)'
reason = "only cashiers may refund"
"""

APPROVAL = """
[[policy.rules]]
name = "refunds-need-a-human"
effect = "require_approval"
tools = ["shop.refund"]
reason = "every refund needs a human now"
"""


def version(
    cli: Cli,
    name: str,
    *,
    state: str = "open",
    refund: bool = True,
    extra: str = "",
    policy: str = POLICY,
) -> Path:
    """A config serving a version of the shop tools (each in its own file: a file
    once loaded stays loaded in this process)."""
    tools = cli.tmp_path / f"tools_{name}.py"
    text = TOOLS.replace("STATE", state) + (REFUND.format(extra=extra) if refund else "")
    tools.write_text(text)
    config = cli.tmp_path / f"{name}.toml"
    config.write_text(f'toolboxes = ["./{tools.name}:shop"]\n' + textwrap.dedent(policy))
    return config


@pytest.fixture
def recorded(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> str:
    """The id of a run `callgate run` recorded: it reads O-1, refunds 30, answers."""
    model = ScriptedModel(
        [
            call("shop.order_get", {"order_id": "O-1"}),
            call("shop.refund", {"order_id": "O-1", "amount": 30}),
            reply("Refunded 30 on O-1."),
        ]
    )

    def make(provider: str, name: str, *, base_url: str | None = None) -> Model:
        return model

    monkeypatch.setattr("callgate.cli.run.make_model", make)
    monkeypatch.chdir(cli.tmp_path)
    config = version(cli, "v1")
    result = cli.json(
        "run", "Refund 30 on O-1", "--provider", "openai", "--model", "m",
        "--config", str(config), "--roles", "cashier",
    )  # fmt: skip
    assert result["status"] == "completed"
    assert (cli.tmp_path / "refunds.log").read_text() == "O-1 30\n"
    return str(result["run_id"])


def test_the_same_config_replays_with_no_difference(cli: Cli, recorded: str) -> None:
    config = cli.tmp_path / "v1.toml"

    result = cli("replay", recorded, "--config", str(config), "--roles", "cashier")

    assert result.exit_code == 0, result.output
    assert "#1 shop.order_get  allow -> allow  unchanged" in result.stdout
    assert "2 calls replayed over 3 turns: 2 unchanged, 0 changed" in result.stdout
    assert (cli.tmp_path / "refunds.log").read_text() == "O-1 30\n"  # not refunded again


def test_a_new_required_parameter_is_reported_as_failing_validation(
    cli: Cli, recorded: str
) -> None:
    config = version(cli, "v2", extra=", reason: str")

    report = cli.json(
        "replay", recorded, "--config", str(config), "--roles", "cashier", exit_code=1
    )

    [refund] = [c for c in report["calls"] if c["tool"] == "shop.refund"]
    kinds = [d["kind"] for d in refund["differences"]]
    assert kinds == ["fails_validation", "contract_changed"]
    assert "reason" in refund["differences"][0]["text"]
    assert report["by_kind"] == {"fails_validation": 1, "contract_changed": 1}


def test_a_rule_requiring_approval_is_reported_as_a_changed_decision(
    cli: Cli, recorded: str
) -> None:
    config = version(cli, "v3", policy=POLICY + APPROVAL)

    result = cli("replay", recorded, "--config", str(config), "--roles", "cashier")

    assert result.exit_code == 1
    assert "#2 shop.refund  allow -> require_approval  changed" in result.stdout
    assert (
        "decision_changed: allow -> require_approval (every refund needs a human now)"
        in " ".join(result.stdout.split())
    )


def test_the_principal_is_checked_as_recorded_unless_roles_are_given(
    cli: Cli, recorded: str
) -> None:
    config = cli.tmp_path / "v1.toml"

    as_recorded = cli.json("replay", recorded, "--config", str(config))  # ran as a cashier
    as_clerk = cli.json(
        "replay", recorded, "--config", str(config), "--roles", "clerk", exit_code=1
    )

    assert [c["now"] for c in as_recorded["calls"]] == ["allow", "allow"]
    [refund] = [c for c in as_clerk["calls"] if c["tool"] == "shop.refund"]
    assert refund["now"] == "deny"
    assert refund["differences"][0]["text"] == "allow -> deny (only cashiers may refund)"


def test_a_removed_tool_is_reported_missing(cli: Cli, recorded: str) -> None:
    config = version(cli, "v4", refund=False)

    report = cli.json("replay", recorded, "--config", str(config), exit_code=1)

    assert [c["now"] for c in report["calls"]] == ["allow", "missing"]
    assert report["by_kind"] == {"tool_missing": 1}


def test_live_replay_warns_runs_the_tools_and_reports_changed_results(
    cli: Cli, recorded: str
) -> None:
    config = version(cli, "v5", state="refunded")

    result = cli("replay", recorded, "--config", str(config), "--roles", "cashier", "--live")
    as_json = cli.json(
        "replay", recorded, "--config", str(config), "--roles", "cashier", "--live", exit_code=1
    )

    assert result.exit_code == 1
    assert "side effects (writes, payments, messages) happen again" in result.stderr
    # A live call takes as long as its tool: a line as each one is made again.
    progress = [line for line in result.stderr.splitlines() if line.startswith("callgate: [")]
    assert progress == [
        "callgate: [1/2] shop.order_get: allow -> allow (changed)",
        "callgate: [2/2] shop.refund: allow -> allow",
    ]
    assert 'result_changed: state: "open" -> "refunded"' in result.stdout
    assert as_json["live"] is True and as_json["by_kind"] == {"result_changed": 1}
    # Live means live: two replays, two more refunds.
    assert (cli.tmp_path / "refunds.log").read_text() == "O-1 30\n" * 3


def test_an_unknown_run_exits_2_naming_it(cli: Cli) -> None:
    result = cli("replay", "run_nope")

    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "no agent run 'run_nope'" in line


def test_the_json_report_is_the_same_on_every_replay(cli: Cli, recorded: str) -> None:
    config = version(cli, "v6", extra=", reason: str", policy=POLICY + APPROVAL)
    args = ("replay", recorded, "--config", str(config), "--roles", "cashier")

    first, second = cli.json(*args, exit_code=1), cli.json(*args, exit_code=1)

    assert first == second
    # Validation refuses the refund before policy would ask for a human.
    assert first["by_kind"] == {"fails_validation": 1, "contract_changed": 1}
    assert first["calls"][1]["now"] == "refused:validate"
