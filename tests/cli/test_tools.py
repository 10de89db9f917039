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


def test_tools_table_shows_name_risk_scopes_and_summary_one_line_each(cli: Cli) -> None:
    names = [t["name"] for t in cli.json("tools")]

    result = cli("tools")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    rows = {name: [line for line in lines if line.split()[:1] == [name]] for name in names}
    assert all(len(found) == 1 for found in rows.values()), rows
    [apply] = rows["ops.budget_change_apply"]
    assert apply.split()[1:3] == ["write_high_risk", "campaigns:write"]
    assert apply.rstrip().endswith(
        "Set a campaign's daily budget to the amount shown by its preview."
    )
    # The table is the title, its header, its rule and one line per tool: no line wraps.
    assert len([line for line in lines if line.strip()]) == 3 + len(names)
    [status] = rows["ops.budget_change_status"]
    assert "Tell whether a change previewed with ops.budget_change_preview was applied" in status
    assert "Use it after" not in result.stdout  # one sentence, not the whole description


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


def test_narrow_terminal_shows_every_fact_and_cuts_only_summaries(cli: Cli) -> None:
    result = cli("tools", COLUMNS="100")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    facts = next(i for i, line in enumerate(lines) if line.startswith("ops.budget_change_preview"))
    assert lines[facts] == (
        "ops.budget_change_preview  read  scopes: campaigns:write  set by server: tenant_id"
    )
    assert lines[facts + 1] == (
        "    Preview setting one active campaign's daily budget to an absolute amount."
    )
    status = next(i for i, line in enumerate(lines) if line.startswith("ops.budget_change_status"))
    assert lines[status + 1].endswith("…")  # the summary, cut to the terminal's width
    assert lines[status + 2].startswith("ops.campaigns_find")
    assert all(len(line) <= 100 for line in lines)


def test_tools_search_ranks_what_a_model_would_find(cli: Cli) -> None:
    found = cli.json("tools", "--search", "roll back the bad release", "--limit", "3")

    names = [result["name"] for result in found["results"]]
    assert len(names) == 3
    assert {"release-rollback", "ops.deploy_rollback"} & set(names[:2])
    text = cli("tools", "--search", "send an email")
    assert text.exit_code == 0
    assert "ops.send_email" in text.stdout.splitlines()[0]


def test_tools_search_says_when_nothing_matches(cli: Cli) -> None:
    result = cli("tools", "--search", "zzzz qqqq")

    assert result.exit_code == 0
    assert "nothing matches" in result.stdout or "1." in result.stdout
