"""``callgate lint`` end to end: the demo passes, a badly designed toolbox fails
with findings that say why and how to fix, waivers and --json for CI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from callgate.lint import RULES
from tests.cli.conftest import Cli
from tests.gateway.upstreams import (
    Servers,
    everything,
    git_server,
    servers_fixture,
    write_config,
)

__all__ = ["servers_fixture"]  # the fixture ``servers``, for the real upstreams' test

BAD_TOOLS = '''
from callgate import Toolbox

bad = Toolbox("bad")


@bad.tool
def thing(tenant_id: str, q: str, filters: dict) -> list[str]:
    """Does stuff."""
    raise ValueError("failed")
'''


def bad_config(cli: Cli, extra: str = "") -> Path:
    (cli.tmp_path / "bad_tools.py").write_text(BAD_TOOLS)
    path = cli.tmp_path / "bad.toml"
    path.write_text('toolboxes = ["./bad_tools.py:bad"]\n' + extra)
    return path


def test_the_demo_tools_pass_the_linter(cli: Cli) -> None:
    result = cli("lint")
    assert result.exit_code == 0, result.output
    assert "0 errors, 0 warnings" in result.output
    report = cli.json("lint")
    assert report["counts"]["error"] == 0 and report["counts"]["warning"] == 0
    assert report["tools"] >= 10
    assert not any(f["tool"].startswith("callgate.") for f in report["findings"])


def test_a_badly_designed_tool_fails_with_the_rule_why_and_fix(cli: Cli) -> None:
    config = bad_config(cli)
    # Errors only fail a run by default; these are warnings.
    assert cli("lint", "--config", str(config)).exit_code == 0
    result = cli("lint", "--config", str(config), "--fail-on", "warning")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "bad.thing" in out
    for rule in (
        "description-short",
        "param-trusted",
        "schema-free-object",
        "risk-unguarded-write",
    ):
        assert rule in out
    assert "fix: declare it Trusted[...]" in out
    report = cli.json("lint", "--config", str(config), "--fail-on", "warning", exit_code=1)
    found = {f["rule"] for f in report["findings"]}
    assert {"description-short", "param-trusted", "error-next-step"} <= found
    assert all(
        set(f) >= {"rule", "severity", "tool", "message", "why", "fix", "waived"}
        for f in report["findings"]
    )
    assert report["counts"] == {"error": 0, "warning": 7, "info": 7}


def test_waivers_in_the_config_and_disabled_rules_let_a_run_pass(cli: Cli) -> None:
    waivers = """
[lint]
disable = ["risk-unguarded-write"]

[lint.waive."bad.*"]
description-short = "a fixture"
param-trusted = "a fixture"
schema-free-object = "a fixture"
param-description = "a fixture"
"""
    config = bad_config(cli, waivers)
    strict = cli("lint", "--config", str(config), "--fail-on", "warning")
    assert strict.exit_code == 0, strict.output
    assert "waived" in strict.output
    report = cli.json("lint", "--config", str(config), "--all")
    assert report["waived"] == 6
    assert not any(f["rule"] == "risk-unguarded-write" for f in report["findings"])


def test_a_config_naming_an_unknown_rule_and_bad_options_are_refused_in_one_line(cli: Cli) -> None:
    config = bad_config(cli, '[lint]\ndisable = ["descripton-short"]\n')
    result = cli("lint", "--config", str(config))
    assert result.exit_code == 2
    assert "did you mean 'description-short'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert cli("lint", "--disable", "nope").exit_code == 2
    assert cli("lint", "--fail-on", "fatal").exit_code == 2


def test_a_tools_list_file_is_linted_as_one_catalogue(cli: Cli) -> None:
    listed = {
        "tools": [
            {
                "name": "get_order",
                "description": "Get an order.",
                "inputSchema": {"type": "object", "properties": {"order": {"type": "integer"}}},
            },
            {"name": "get_orders", "description": "Get orders.", "inputSchema": {"type": "object"}},
        ]
    }
    path = cli.tmp_path / "tools.json"
    path.write_text(json.dumps(listed))
    report = cli.json("lint", "--schemas", str(path), exit_code=0)
    found = {(f["tool"], f["rule"]) for f in report["findings"]}
    assert ("get_order", "name-lookalike") in found
    assert ("get_order", "param-description") in found
    assert cli("lint", "--schemas", str(path), "--fail-on", "warning").exit_code == 1
    broken = cli.tmp_path / "broken.json"
    broken.write_text("{not json")
    result = cli("lint", "--schemas", str(broken))
    assert result.exit_code == 2 and "not a JSON file" in result.stderr


def test_rules_lists_every_rule(cli: Cli) -> None:
    listed = cli.json("lint", "--rules")
    assert [r["id"] for r in listed] == list(RULES)
    assert "why:" in cli("lint", "--rules").output


@pytest.mark.slow
def test_real_upstream_servers_are_linted_through_the_gateway(cli: Cli, servers: Servers) -> None:
    repo = cli.tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    config = write_config(cli.tmp_path, everything(servers), git_server(servers, repo))
    report = cli.json("lint", "--config", str(config), "--fail-on", "warning", exit_code=1)
    found = {(f["tool"], f["rule"]) for f in report["findings"]}
    # The classic pair a model confuses, in mcp-server-git.
    assert ("git.git_diff_staged", "name-lookalike") in found
    # Untrusted upstream writes that nothing guards.
    assert ("git.git_commit", "risk-unguarded-write") in found
    # Each server keeps its own naming style: kebab-case and snake_case are not mixed up.
    assert not any(rule == "name-case" for _, rule in found)
    assert report["tools"] >= 20
