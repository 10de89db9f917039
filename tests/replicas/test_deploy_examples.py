"""The deployment examples of docs/deploy.md: each file parses, its services are
the layout the doc describes, and every ``callgate`` command line in them is one
the CLI accepts (parsed against the real command, not run)."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from callgate.cli.app import app
from callgate.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"
DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def parses(argv: list[str]) -> Any:
    """The context ``callgate ARGV`` would run with (options parsed, nothing run;
    a bad option raises the CLI's usage error)."""
    assert argv[0].endswith("callgate"), argv
    group: Any = typer.main.get_command(app)
    name, *rest = argv[1:]
    command = group.commands.get(name)
    assert command is not None, f"no command {name!r}"
    return command.make_context(name, list(rest))


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_compose_file_has_the_documented_layout() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "callgate-a", "callgate-b", "proxy"}
    a, b = services["callgate-a"], services["callgate-b"]
    assert a == b  # replicas are alike: one config, one store, one shared secret
    assert a["environment"]["CALLGATE_STORE"].startswith("postgresql://")
    assert a["environment"]["CALLGATE_SERVER_SECRET"] == "${CALLGATE_SERVER_SECRET}"
    assert a["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for service in ("callgate-a", "callgate-b"):
        assert f"{service}:8765" in services["proxy"]["command"]


@pytest.mark.parametrize("service", ["callgate-a", "migrate"])
def test_the_compose_commands_are_valid_callgate_commands(service: str) -> None:
    ctx = parses(compose()["services"][service]["command"])
    assert ctx.params["config"] == Path("/etc/callgate/callgate.toml")
    if service == "callgate-a":
        assert (ctx.params["host"], ctx.params["port"]) == ("0.0.0.0", 8765)


def test_the_systemd_unit_runs_a_valid_serve_command() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(EXAMPLES / "callgate@.service")
    argv = shlex.split(unit["Service"]["ExecStart"].replace("%i", "8766"))
    ctx = parses(argv)
    assert ctx.info_name == "serve" and ctx.params["port"] == 8766
    assert unit["Service"]["KillSignal"] == "SIGTERM"
    assert unit["Service"]["EnvironmentFile"] == "/etc/callgate/env"


def test_the_example_config_loads_with_authentication() -> None:
    config = load_config(EXAMPLES / "callgate.toml")
    assert config.auth is not None  # a non-loopback host is served only with [auth]


def test_the_doc_names_every_example_file() -> None:
    text = DOC.read_text()
    for path in EXAMPLES.iterdir():
        assert f"examples/deploy/{path.name}" in text
