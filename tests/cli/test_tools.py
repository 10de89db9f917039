"""`callgate tools`: what a model and an operator can see of each tool."""

from __future__ import annotations

from .conftest import Cli

RISKS = {"read", "write_idempotent", "write_high_risk"}


def test_tools_json_lists_every_demo_tool_with_its_contract(cli: Cli) -> None:
    tools = cli.json("tools")

    by_name = {t["name"]: t for t in tools}
    assert [t["name"] for t in tools] == sorted(by_name)
    assert {"callgate.read_more", "ops.campaigns_find", "ops.send_email"} <= set(by_name)
    for entry in tools:
        assert entry["risk"] in RISKS
        assert isinstance(entry["description"], str)
        assert entry["description"]
        assert isinstance(entry["scopes"], list)
        assert entry["input_schema"]["type"] == "object"
    find = by_name["ops.campaigns_find"]
    assert find["risk"] == "read"
    assert find["scopes"] == ["campaigns:read"]
    # The model-facing schema leaves out what the server sets.
    assert "query" in find["input_schema"]["properties"]
    assert "tenant_id" not in find["input_schema"]["properties"]
    assert find["trusted_fields"] == ["tenant_id"]
    assert by_name["ops.send_email"]["risk"] == "write_high_risk"
    assert by_name["callgate.read_more"]["scopes"] == []


def test_tools_table_shows_name_risk_scopes_and_summary(cli: Cli) -> None:
    result = cli("tools")

    assert result.exit_code == 0
    row = next(line for line in result.stdout.splitlines() if "ops.budget_change_apply" in line)
    assert "write_high_risk" in row
    assert "campaigns:write" in row
    words = " ".join(result.stdout.split())
    assert "set by server: tenant_id Find your organization's advertising campaigns" in words
    assert "Set a campaign's daily budget to the amount shown by its preview" in words
    assert "callgate.read_more" in result.stdout


def test_trusted_only_hides_tools_of_untrusted_sources(cli: Cli) -> None:
    config = str(cli.shop_config())

    everything = {t["name"] for t in cli.json("tools", "--config", config)}
    trusted = {t["name"] for t in cli.json("tools", "--config", config, "--trusted-only")}

    assert "ext.lookup" in everything
    assert trusted == everything - {"ext.lookup"}
    assert {"shop.order_get", "shop.refund", "callgate.read_more"} <= trusted


def test_untrusted_tool_is_classified_as_high_risk_whatever_it_claims(cli: Cli) -> None:
    tools = {t["name"]: t for t in cli.json("tools", "--config", str(cli.shop_config()))}

    assert tools["ext.lookup"]["risk"] == "write_high_risk"
    assert tools["shop.order_get"]["risk"] == "read"


def test_narrow_terminal_still_shows_every_fact(cli: Cli) -> None:
    result = cli("tools", COLUMNS="60")

    assert result.exit_code == 0
    words = " ".join(result.stdout.split())  # lines may wrap anywhere between words
    assert (
        "ops.budget_change_preview read scopes: campaigns:write set by server: tenant_id "
        "Preview setting one active campaign's daily budget"
    ) in words
    assert "…" not in result.stdout
