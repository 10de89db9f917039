"""Fixtures for the CLI tests: an in-process runner, a tmp store and a small config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from callgate.cli.app import app

SHOP_TOOLS = '''
from typing import Annotated

from callgate import Toolbox, Trusted, TrustedField

shop = Toolbox("shop", description="A tiny shop for the CLI tests.")
external = Toolbox("ext", trusted=False)


@shop.tool(scopes=["orders:read"], read_only=True, open_world=False)
def order_get(order_id: str, tenant_id: Trusted[str]) -> dict:
    """Get one order of your organization.

    Args:
        order_id: The order id, e.g. "O-1".
    """
    return {"id": order_id, "tenant": tenant_id, "lines": [f"line {i}" for i in range(200)]}


@shop.tool(scopes=["orders:write"], destructive=False, idempotent=False, open_world=False)
def refund(order_id: str, amount: int, tenant_id: Trusted[str]) -> dict:
    """Refund part of an order.

    Args:
        order_id: The order id.
        amount: Whole currency units.
    """
    return {"order_id": order_id, "refunded": amount}


@shop.tool(read_only=True, open_world=False)
def whoami(
    region: Trusted[str],
    project: Trusted[str],
    budget: Annotated[int, TrustedField(source="budget_cap")],
    user_id: Trusted[str],
) -> dict:
    """Say who is calling, from trusted values only."""
    return {"region": region, "project": project, "budget": budget, "user": user_id}


@external.tool(read_only=True)
def lookup(q: str) -> str:
    """Look something up somewhere else."""
    return q
'''

SHOP_CONFIG = """
toolboxes = ["./shop_tools.py:shop", "./shop_tools.py:external"]

[policy]
default = "allow"

[[policy.rules]]
name = "big-refunds"
effect = "require_approval"
tools = ["shop.refund"]
when = "args.amount > 100"
reason = "refunds above 100 need a human"

[[policy.rules]]
name = "refunds-need-cashier"
effect = "deny"
tools = ["shop.refund"]
when = '!("cashier" in principal.roles)'
reason = "only cashiers may refund"

[limits]
default_timeout = 5
max_result_tokens = 200

[context]
region = "eu-west-1"
"""


CALL_EXIT_CODES = {"ok": 0, "task": 0, "error": 1, "pending_approval": 3, "pending_input": 3}
"""``callgate call``'s exit code for each Envelope status."""


@dataclass(frozen=True)
class Cli:
    """Runs ``callgate`` in process against one tmp store."""

    runner: CliRunner
    store: str
    tmp_path: Path

    def __call__(self, *args: str, input: str | None = None, **env: str) -> Result:
        return self.runner.invoke(
            app, list(args), input=input, env={"COLUMNS": "200", **env}, catch_exceptions=False
        )

    def json(self, *args: str, input: str | None = None, exit_code: int = 0) -> Any:
        """The command's JSON output; it must exit with ``exit_code``."""
        result = self(*args, "--json", input=input)
        assert result.exit_code == exit_code, result.output
        return json.loads(result.stdout)

    def envelope(self, *args: str, input: str | None = None, **env: str) -> Any:
        """``callgate call ARGS --json``'s Envelope; the exit code must match its status."""
        result = self(*args, "--json", input=input, **env)
        envelope = json.loads(result.stdout)
        assert result.exit_code == CALL_EXIT_CODES[envelope["status"]], result.output
        return envelope

    def shop_config(self, extra: str = "") -> Path:
        (self.tmp_path / "shop_tools.py").write_text(SHOP_TOOLS)
        path = self.tmp_path / "callgate.toml"
        path.write_text(SHOP_CONFIG + extra)
        return path


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI with ``$CALLGATE_STORE`` on a tmp SQLite file (never the user's store)."""
    store = f"sqlite:///{tmp_path / 'c.db'}"
    monkeypatch.setenv("CALLGATE_STORE", store)
    return Cli(runner=CliRunner(), store=store, tmp_path=tmp_path)


ALICE_ARGS = (
    "--principal",
    "alice",
    "--tenant",
    "acme",
    "--scopes",
    "campaigns:read,campaigns:write",
)
