"""`callgate approvals`: the operator console for parked calls (list, show, approve, deny)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import Result

from .conftest import Cli

REFUND_500 = '{"order_id": "O-1", "amount": 500}'


def _refund(cli: Cli, args: str = REFUND_500) -> Any:
    """Run ``shop.refund`` as dan, a cashier of acme; refunds above 100 wait for approval."""
    config = str(cli.shop_config())
    return cli.envelope(
        *("call", "shop.refund", "--config", config, "--principal", "dan", "--tenant", "acme"),
        *("--scopes", "orders:write", "--roles", "cashier", "--args", args),
    )


def _park(cli: Cli, args: str = REFUND_500) -> str:
    envelope = _refund(cli, args)
    assert envelope["status"] == "pending_approval"
    return str(envelope["approval"]["approval_id"])


def _error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("callgate: error: ")
    return lines[0]


def test_list_shows_pending_requests_as_a_table_and_as_json(cli: Cli) -> None:
    approval_id = _park(cli)

    table = cli("approvals", "list")
    listed = cli.json("approvals", "list")

    assert table.exit_code == 0
    header = table.stdout.splitlines()[2]
    for column in ("id", "state", "tool", "requested by", "reason", "age"):
        assert column in header
    row = next(line for line in table.stdout.splitlines() if approval_id in line)
    assert "pending" in row and "shop.refund" in row and "dan (acme)" in row
    assert "refunds above 100 need a human" in row
    assert [a["id"] for a in listed] == [approval_id]
    assert listed[0]["arguments"] == {"order_id": "O-1", "amount": 500, "tenant_id": "acme"}


def test_list_filters_by_state(cli: Cli) -> None:
    pending_id = _park(cli)
    denied_id = _park(cli, '{"order_id": "O-2", "amount": 900}')
    cli(
        "approvals",
        "deny",
        denied_id,
        "--principal",
        "erin",
        "--tenant",
        "acme",
        "--reason",
        "not this one",
    )

    pending = cli.json("approvals", "list", "--state", "pending")
    denied = cli.json("approvals", "list", "--state", "denied")
    bad = cli("approvals", "list", "--state", "maybe")

    assert [a["id"] for a in pending] == [pending_id]
    assert [a["id"] for a in denied] == [denied_id]
    assert bad.exit_code == 2
    # Refused for the state it named, with the ones it may name (not another usage error).
    assert "Invalid value for '--state'" in bad.stderr
    assert "'maybe' is not one of 'pending', 'approved', 'denied', 'used', 'expired'" in bad.stderr


def test_show_gives_every_exact_argument_who_asked_and_why(cli: Cli) -> None:
    approval_id = _park(cli)

    shown = cli.json("approvals", "show", approval_id)
    readable = cli("approvals", "show", approval_id)

    assert shown["id"] == approval_id
    assert shown["state"] == "pending"
    assert shown["tool"] == "shop.refund"
    assert shown["arguments"] == {"order_id": "O-1", "amount": 500, "tenant_id": "acme"}
    assert shown["requested_by"] == "dan"
    assert shown["decided_by"] is None and shown["result"] is None
    assert shown["approved_by"] == "another"
    out = readable.stdout
    assert readable.exit_code == 0
    assert "refunds above 100 need a human" in out
    assert (
        "of tenant acme, not dan (four eyes): anyone of the tenant but the requester"
        in " ".join(out.split())
    )
    assert "dan (acme)" in out
    assert "none yet" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["order_id"][:2] == ['"O-1"', "model"]
    assert rows["amount"][:2] == ["500", "model"]
    assert rows["tenant_id"][:2] == ['"acme"', "server"]  # trusted fields are shown too


def test_show_makes_invisible_characters_visible(cli: Cli) -> None:
    # A right-to-left override could make "O-1\u202e9-O" display as another order id.
    approval_id = _park(cli, json.dumps({"order_id": "O-1\u202e\x1b[8m", "amount": 500}))

    out = cli("approvals", "show", approval_id).stdout

    assert "\u202e" not in out and "\x1b[8m" not in out
    assert '"O-1\\u202e\\u001b[8m"' in out


def test_approved_call_runs_once_when_repeated_and_show_has_its_result(cli: Cli) -> None:
    approval_id = _park(cli)

    approved = cli(
        "approvals",
        "approve",
        approval_id,
        "--principal",
        "erin",
        "--tenant",
        "acme",
        "--note",
        "ok'd",
    )
    before_run = cli.json("approvals", "show", approval_id)
    ran = _refund(cli)
    after_run = cli.json("approvals", "show", approval_id)
    again = _refund(cli)

    assert approved.exit_code == 0
    assert f"approved {approval_id}" in approved.stdout
    assert "runs once, when dan repeats the call" in approved.stdout
    assert before_run["state"] == "approved"
    assert before_run["decided_by"] == "erin" and before_run["note"] == "ok'd"
    assert ran["status"] == "ok"
    assert after_run["state"] == "used"
    assert after_run["result"]["status"] == "ok"
    assert after_run["result"]["payload"] == {"order_id": "O-1", "refunded": 500}
    # One approval, one run: the same call again needs a new decision.
    assert again["status"] == "pending_approval"
    assert again["approval"]["approval_id"] != approval_id
    decisions = [r for r in cli.json("audit") if r["phase"] == "decision"]
    assert [(d["call_id"], d["user"], d["decision"]) for d in decisions] == [
        (approval_id, "erin", "approved")
    ]


def test_nobody_approves_their_own_request(cli: Cli) -> None:
    approval_id = _park(cli)

    line = _error_line(
        cli("approvals", "approve", approval_id, "--principal", "dan", "--tenant", "acme")
    )

    assert "dan requested it and cannot decide it" in line
    assert cli.json("approvals", "show", approval_id)["state"] == "pending"


def test_a_decision_is_taken_once(cli: Cli) -> None:
    approval_id = _park(cli)
    assert (
        cli(
            "approvals", "approve", approval_id, "--principal", "erin", "--tenant", "acme"
        ).exit_code
        == 0
    )

    twice = _error_line(
        cli("approvals", "approve", approval_id, "--principal", "fay", "--tenant", "acme")
    )
    deny_after = _error_line(
        cli(
            "approvals",
            "deny",
            approval_id,
            "--principal",
            "fay",
            "--tenant",
            "acme",
            "--reason",
            "too late",
        )
    )

    assert f"{approval_id} is approved; a decision is taken once" in twice
    assert "a decision is taken once" in deny_after
    assert cli.json("approvals", "show", approval_id)["decided_by"] == "erin"


def test_a_denial_reaches_the_model_as_a_permission_error_with_the_reason(cli: Cli) -> None:
    approval_id = _park(cli)

    denied = cli(
        "approvals",
        "deny",
        approval_id,
        "--principal",
        "erin",
        "--tenant",
        "acme",
        "--reason",
        "O-1 was refunded",
    )
    envelope = _refund(cli)

    assert denied.exit_code == 0
    assert f"denied {approval_id}" in denied.stdout
    assert envelope["status"] == "error"
    error = envelope["error"]
    assert error["kind"] == "permission"
    assert "O-1 was refunded" in error["message_for_model"]
    assert "erin" in error["message_for_model"]
    shown = cli.json("approvals", "show", approval_id)
    assert shown["state"] == "denied" and shown["note"] == "O-1 was refunded"


def test_a_denial_needs_a_reason(cli: Cli) -> None:
    approval_id = _park(cli)

    blank = _error_line(
        cli(
            "approvals",
            "deny",
            approval_id,
            "--principal",
            "erin",
            "--tenant",
            "acme",
            "--reason",
            " ",
        )
    )
    missing = cli("approvals", "deny", approval_id, "--principal", "erin", "--tenant", "acme")

    assert "needs a reason" in blank
    assert missing.exit_code == 2
    assert cli.json("approvals", "show", approval_id)["state"] == "pending"


def test_unknown_id_is_a_one_line_error(cli: Cli) -> None:
    for command in (
        ("show", "apr_missing"),
        ("approve", "apr_missing", "--principal", "erin", "--tenant", "acme"),
        ("deny", "apr_missing", "--principal", "erin", "--tenant", "acme", "--reason", "no"),
    ):
        line = _error_line(cli("approvals", *command))
        assert "no approval request 'apr_missing'" in line


def test_store_option_before_or_after_the_subcommand(cli: Cli) -> None:
    other = f"sqlite:///{cli.tmp_path / 'other.db'}"
    _park(cli)

    in_env = cli.json("approvals", "list")
    global_option = cli("--store", other, "approvals", "list", "--json")
    local_option = cli.json("approvals", "list", "--store", other)

    assert len(in_env) == 1
    assert json.loads(global_option.stdout) == local_option == []


def test_hidden_characters_cannot_disguise_an_argument() -> None:
    from callgate.cli.approvals import visible

    smuggled = "Hi" + "".join(chr(0xE0100 + b) for b in b"pw")
    assert visible(smuggled) == "Hi\\U000e0170\\U000e0177"
    assert visible("a\u2028b\u3164c\u202ed") == "a\\u2028b\\u3164c\\u202ed"
    assert visible("café\nnext") == "café\nnext"
