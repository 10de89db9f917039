"""Who the calls of `call`, `run` and `serve` are made for: one rule for all three.

The command's options, else the config file's ``[principal]``, else user
``local``, the demo's tenant with the demo tools, every scope the tools require,
no roles.
"""

from __future__ import annotations

import pytest

from callgate.agent import ScriptedModel, call, reply
from callgate.agent.model import Model

from .conftest import Cli

PRINCIPAL = """
[principal]
user = "dan@acme.example"
tenant = "acme"
roles = ["cashier"]
attributes = { project = "apollo" }
"""
REFUND = ("--args", '{"order_id": "O-1", "amount": 20}')


def test_call_without_options_acts_for_the_local_principal_like_serve_and_run(cli: Cli) -> None:
    envelope = cli.envelope("call", "ops.campaigns_find", "--args", '{"query": "Autumn Sale"}')
    [record] = [r for r in cli.json("audit") if r["phase"] == "final"]

    assert envelope["status"] == "ok"
    assert (record["user"], record["tenant"]) == ("local", "acme")


def test_the_config_principal_is_used_and_options_win(cli: Cli) -> None:
    config = str(cli.shop_config(PRINCIPAL))
    refund = ("call", "shop.refund", "--config", config, *REFUND)

    as_configured = cli.envelope(*refund)
    without_role = cli.envelope(*refund, "--roles", "clerk")
    whoami = cli.envelope("call", "shop.whoami", "--config", config, "--attr", "budget_cap:=9")

    assert as_configured["status"] == "ok"  # the refund rule wants the role cashier
    assert without_role["status"] == "error"
    assert "only cashiers may refund" in without_role["error"]["message_for_model"]
    assert whoami["payload"] == {
        "region": "eu-west-1",
        "project": "apollo",  # from [principal].attributes
        "budget": 9,  # --attr adds to them
        "user": "dan@acme.example",
    }


def _scripted(monkeypatch: pytest.MonkeyPatch, model: ScriptedModel) -> None:
    def make(provider: str, name: str, *, base_url: str | None = None) -> Model:
        return model

    monkeypatch.setattr("callgate.cli.run.make_model", make)


ROLLBACK = {"deploy_id": "D-2", "reason": "search-indexer 1.8.0 failed its rollout"}


@pytest.mark.parametrize(("roles", "outcome"), [((), "error"), (("--roles", "oncall"), "ok")])
def test_run_grants_roles_the_demo_rollback_needs(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, roles: tuple[str, ...], outcome: str
) -> None:
    _scripted(monkeypatch, ScriptedModel([call("ops.deploy_rollback", ROLLBACK), reply("Done.")]))

    result = cli.json("run", "Roll back D-2", "--provider", "openai", "--model", "m", *roles)

    [made] = result["calls"]
    assert made["status"] == outcome
    assert result["status"] == "completed"


def test_serve_prints_the_store_masked_the_principal_and_the_toolboxes(cli: Cli) -> None:
    # The store cannot be opened, so serve stops right after its startup lines.
    store = "postgresql://u:s3cret@127.0.0.1:1/db"

    result = cli("serve", "--stdio", "--store", store, "--roles", "oncall,viewer")

    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "callgate: store: postgresql://u:***@127.0.0.1:1/db"
    assert lines[1].startswith("callgate: principal: local of tenant acme; scopes: campaigns:read")
    assert lines[1].endswith("; roles: oncall, viewer")
    assert lines[2].startswith("callgate: toolboxes: callgate (2 tools), ops (")
    assert "s3cret" not in result.stderr
