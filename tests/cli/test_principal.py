"""Who the calls of `call`, `run` and `serve` are made for: one rule for all three,
and for ``callgate.mcp.default_principal``.

The command's options, else the config file's ``[principal]``, else user
``local``, no tenant (``acme`` with the demo tools), every scope the tools,
resources and prompts require, no roles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate.agent import ScriptedModel, call, reply
from callgate.agent.model import Model
from callgate.cli import _context
from callgate.cli._context import describe_principal
from callgate.config import DEFAULT_USER, default_config, load_config
from callgate.contract import Principal
from callgate.mcp import default_principal

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
    assert lines[2].startswith("callgate: toolboxes: callgate (7 tools), ops (")
    assert "s3cret" not in result.stderr


PEOPLE_TOOLS = '''
from callgate import Toolbox, ToolContext

people = Toolbox("people")


@people.tool(read_only=True, open_world=False)
def whoami(ctx: ToolContext) -> dict:
    """Say who is calling, as the gate sees them."""
    who = ctx.principal
    return {
        "user": who.user,
        "tenant": who.tenant,
        "scopes": sorted(who.scopes),
        "roles": sorted(who.roles),
    }


@people.resource("people://handbook", scopes=["handbook:read"])
def handbook() -> str:
    """The handbook."""
    return "Be kind."


@people.prompt(scopes=["coaching:use"])
def coach() -> str:
    """Coach a colleague."""
    return "Ask how their week went."
'''


def _people(tmp_path: Path) -> Path:
    """A config whose resource and prompt need scopes that no tool needs."""
    (tmp_path / "people_tools.py").write_text(PEOPLE_TOOLS)
    config = tmp_path / "people.toml"
    config.write_text('toolboxes = ["./people_tools.py:people"]\n')
    return config


def _from_payload(payload: dict[str, Any]) -> Principal:
    return Principal(
        payload["user"], payload["tenant"], scopes=payload["scopes"], roles=payload["roles"]
    )


def _served(cli: Cli, *args: str) -> str:
    """The principal ``callgate serve`` prints at startup (it then fails on the store)."""
    result = cli("serve", "--stdio", "--store", "postgresql://u@127.0.0.1:1/db", *args)
    assert result.exit_code == 2
    [line] = [line for line in result.stderr.splitlines() if "principal: " in line]
    return line.split("principal: ", 1)[1]


@pytest.mark.parametrize(
    ("options", "user", "tenant"),
    [((), DEFAULT_USER, None), (("--principal", "Dan", "--tenant", "ACME"), "dan", "acme")],
    ids=["defaults", "options"],
)
def test_call_serve_run_and_default_principal_act_for_the_same_principal(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    options: tuple[str, ...],
    user: str,
    tenant: str | None,
) -> None:
    config = _people(cli.tmp_path)
    chosen = ("--config", str(config), *options)
    _scripted(monkeypatch, ScriptedModel([call("people.whoami"), reply("Done.")]))

    called = cli.envelope("call", "people.whoami", *chosen)
    ran = cli.json("run", "Who am I?", "--provider", "openai", "--model", "m", *chosen)
    served = _served(cli, *chosen)
    gate = load_config(config).build_gate("memory://")
    in_code = default_principal(gate, user=user, tenant=tenant)

    [run_call] = ran["calls"]
    assert called["payload"] == run_call["payload"]
    # Every scope served: the resource's and the prompt's too, though no tool needs them.
    assert called["payload"] == {
        "user": user,
        "tenant": tenant,
        "scopes": ["coaching:use", "handbook:read"],
        "roles": [],
    }
    assert _from_payload(called["payload"]) == in_code
    assert served == describe_principal(in_code)


def test_without_a_config_all_act_for_the_demos_local_principal(cli: Cli) -> None:
    served = _served(cli)
    in_code = default_principal(default_config().build_gate("memory://"))

    assert (in_code.user, in_code.tenant, in_code.roles) == ("local", "acme", frozenset())
    assert "deploy:rollback" in in_code.scopes
    assert served == describe_principal(in_code)


def test_the_options_help_names_the_defaults_the_principal_is_built_with() -> None:
    # Restated in the CLI so that --help imports no config module.
    assert _context.DEFAULT_USER == DEFAULT_USER
    assert default_config().principal.tenant == _context.DEMO_TENANT


def test_serving_http_beyond_loopback_without_authentication_is_refused(cli: Cli) -> None:
    result = cli("serve", "--host", "0.0.0.0", "--port", "0")

    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without authentication" in result.stderr
    assert "--insecure-no-auth" in result.stderr


def test_insecure_no_auth_serves_beyond_loopback_with_a_warning(cli: Cli) -> None:
    # The store cannot be opened, so serve stops once it has said who callers act as.
    store = "postgresql://u:s3cret@127.0.0.1:1/db"

    result = cli(
        "serve", "--host", "0.0.0.0", "--port", "0", "--insecure-no-auth", "--store", store
    )

    assert "refusing" not in result.stderr
    assert "warning: serving on 0.0.0.0 without authentication" in result.stderr
    assert "s3cret" not in result.stderr
