"""`callgate call`: one governed call, its Envelope as JSON or readable; the exit code
says how it went (0 ok, 1 an error Envelope, 3 waiting for a human, 2 a CLI error)."""

from __future__ import annotations

import json

from .conftest import ALICE_ARGS, Cli

FIND = ("call", "ops.campaigns_find")


def test_ok_call_prints_exactly_one_json_envelope(cli: Cli) -> None:
    result = cli(*FIND, "--args", '{"query": "Autumn Sale"}', *ALICE_ARGS, "--json")

    assert result.exit_code == 0
    envelope = json.loads(result.stdout)  # one document, nothing else on stdout
    assert envelope["status"] == "ok"
    assert envelope["tool"] == "ops.campaigns_find"
    assert envelope["decision"]["effect"] == "allow"
    assert envelope["error"] is None
    names = [c["name"] for c in envelope["payload"]]
    assert names[0] == "Autumn Sale_Search"
    assert "Autumn Sale_Search_Retarget" in names
    assert envelope["call_id"].startswith("call_")


def test_malformed_json_arguments_reach_the_gate_and_get_a_construction_error(cli: Cli) -> None:
    result = cli(*FIND, "--args", '{"query": "Autumn', *ALICE_ARGS, "--json")

    assert result.exit_code == 1
    envelope = json.loads(result.stdout)
    assert envelope["status"] == "error"
    assert envelope["error"]["kind"] == "construction"
    assert "not valid JSON" in envelope["error"]["message_for_model"]
    assert envelope["error"]["next_step"]


EXTERNAL_MAIL = '{"to": ["buyer@globex.example"], "subject": "Hi", "body": "Budget news."}'
MAILER_ARGS = (
    "--principal",
    "alice@acme.example",
    "--tenant",
    "acme",
    "--scopes",
    "email:send",
    "--attr",
    "domain=acme.example",
)


def test_missing_scope_is_a_permission_error_with_exit_code_1(cli: Cli) -> None:
    result = cli(
        "call",
        "ops.budget_change_preview",
        "--args",
        '{"campaign_id": "C-101", "new_daily_budget": 1500}',
        "--principal",
        "bob",
        "--tenant",
        "acme",
        "--scopes",
        "campaigns:read",
        "--json",
    )

    assert result.exit_code == 1
    envelope = json.loads(result.stdout)
    assert envelope["status"] == "error"
    assert envelope["error"]["kind"] == "permission"
    assert "campaigns:write" in envelope["error"]["message_for_model"]


def test_policy_can_park_a_call_as_pending_approval(cli: Cli) -> None:
    envelope = cli.json(
        "call", "ops.send_email", "--args", EXTERNAL_MAIL, *MAILER_ARGS, exit_code=3
    )

    assert envelope["status"] == "pending_approval"
    assert envelope["decision"]["effect"] == "require_approval"
    assert envelope["decision"]["rule"] == "external-email-needs-approval"
    assert "Nothing was executed" in envelope["error"]["message_for_model"]
    assert envelope["error"]["kind"] == "business_state"
    assert envelope["approval"]["approval_id"].startswith("apr_")


def test_readable_ok_output_shows_status_decision_and_payload(cli: Cli) -> None:
    result = cli(*FIND, "--args", '{"query": "Autumn Sale", "tenant_id": "globex"}', *ALICE_ARGS)

    assert result.exit_code == 0
    out = result.stdout
    assert "ops.campaigns_find  ok" in out
    assert "decision  allow" in out
    assert '"id": "C-101"' in out
    assert '"name": "Autumn Sale_Search_Retarget"' in out
    # The tenant the model claimed was discarded, and the CLI says so.
    assert "dropped   tenant_id: set by the server" in out


def test_readable_error_output_shows_kind_message_and_next_step(cli: Cli) -> None:
    result = cli(*FIND, "--args", '{"qeury": "Autumn"}', *ALICE_ARGS)

    assert result.exit_code == 1
    out = result.stdout
    assert "ops.campaigns_find  error (construction)" in out
    assert "Did you mean 'query'?" in out
    assert "next step  Fix the arguments and call ops.campaigns_find again." in out
    assert "decision   not reached" in out


def test_readable_pending_approval_shows_rule_and_reason(cli: Cli) -> None:
    result = cli("call", "ops.send_email", "--args", EXTERNAL_MAIL, *MAILER_ARGS)

    assert result.exit_code == 3
    assert "ops.send_email  pending_approval" in result.stdout
    assert "rule external-email-needs-approval" in result.stdout
    assert "approval request has been filed: apr_" in " ".join(result.stdout.split())


def test_truncated_result_shows_the_notice_with_its_cursor(cli: Cli) -> None:
    config = str(cli.shop_config())
    args = ("call", "shop.order_get", "--args", '{"order_id": "O-1"}', "--config", config)
    who = ("--principal", "alice", "--tenant", "acme", "--scopes", "orders:read")

    envelope = cli.json(*args, *who)
    readable = cli(*args, *who)

    truncated = envelope["truncated"]
    assert truncated["shown"] < truncated["total"]
    assert truncated["cursor"]
    assert envelope["raw_ref"]
    assert readable.exit_code == 0
    assert "truncated: showing" in readable.stdout
    assert "callgate.read_more" in readable.stdout


def test_arguments_from_a_file_and_from_stdin(cli: Cli) -> None:
    args_file = cli.tmp_path / "args.json"
    args_file.write_text('{"query": "Autumn Sale_Display"}')

    from_file = cli.json(*FIND, "--args", f"@{args_file}", *ALICE_ARGS)
    from_stdin = cli.json(*FIND, "--args", "-", *ALICE_ARGS, input='{"query": "Retarget"}')

    assert from_file["payload"][0]["id"] == "C-103"
    assert from_stdin["payload"][0]["id"] == "C-102"


def test_unreadable_args_file_is_a_cli_error(cli: Cli) -> None:
    result = cli(*FIND, "--args", "@missing.json", *ALICE_ARGS)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("callgate: error: --args @missing.json: cannot read")
    assert len(result.stderr.splitlines()) == 1


def test_attributes_roles_and_context_reach_trusted_fields(cli: Cli) -> None:
    config = str(cli.shop_config())

    envelope = cli.json(
        "call",
        "shop.whoami",
        "--config",
        config,
        "--principal",
        "carol",
        "--attr",
        "project=apollo",
        "--attr",
        "budget_cap:=5000",
    )

    assert envelope["status"] == "ok"
    assert envelope["payload"] == {
        "region": "eu-west-1",  # from the config's [context]
        "project": "apollo",
        "budget": 5000,
        "user": "carol",
    }


def test_roles_are_seen_by_policy(cli: Cli) -> None:
    config = str(cli.shop_config())
    base = ("call", "shop.refund", "--config", config, "--principal", "dan", "--tenant", "acme")
    refund = ("--args", '{"order_id": "O-1", "amount": 20}', "--scopes", "orders:write")

    denied = cli.json(*base, *refund, exit_code=1)
    allowed = cli.json(*base, *refund, "--roles", "cashier,clerk")

    assert denied["status"] == "error"
    assert denied["error"]["kind"] == "permission"
    assert "only cashiers may refund" in denied["error"]["message_for_model"]
    assert allowed["status"] == "ok"
    assert allowed["payload"] == {"order_id": "O-1", "refunded": 20}


def test_same_idempotency_key_in_a_later_process_replays_the_stored_result(cli: Cli) -> None:
    config = str(cli.shop_config())
    refund = (
        *("call", "shop.refund", "--config", config, "--principal", "dan", "--tenant", "acme"),
        *("--scopes", "orders:write", "--roles", "cashier", "--idempotency-key", "rf-1"),
        *("--args", '{"order_id": "O-1", "amount": 20}'),
    )

    first = cli.json(*refund)
    second = cli.json(*refund)

    assert first["replayed"] is False
    assert second["replayed"] is True
    assert second["payload"] == first["payload"]
    assert second["idempotency_key"] == "rf-1"


def test_bad_attr_and_timeout_are_cli_errors(cli: Cli) -> None:
    bad_attr = cli(*FIND, *ALICE_ARGS, "--attr", "no-equals-sign")
    bad_json = cli(*FIND, *ALICE_ARGS, "--attr", "n:={oops")
    bad_timeout = cli(*FIND, *ALICE_ARGS, "--timeout", "0")

    for result in (bad_attr, bad_json, bad_timeout):
        assert result.exit_code == 2
        assert result.stderr.startswith("callgate: error: ")
    assert "expected key=value or key:=json" in bad_attr.stderr
    assert "not JSON after ':='" in bad_json.stderr
    assert "--timeout must be positive" in bad_timeout.stderr


def test_unknown_tool_is_an_envelope_not_a_cli_error(cli: Cli) -> None:
    envelope = cli.json("call", "ops.campaign_find", "--args", "{}", *ALICE_ARGS, exit_code=1)

    assert envelope["error"]["kind"] == "construction"
    assert "Did you mean 'ops.campaigns_find'" in envelope["error"]["message_for_model"]
