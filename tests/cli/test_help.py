"""Every command's rendered `--help`: what a user reads before anything else."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main

from callgate.cli.app import app

from .conftest import Cli


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    """(path, command) of the root, every command and every subcommand."""
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(path: tuple[str, ...], command: Any) -> None:
        found.append((path, command))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk((*path, name), sub)

    walk((), typer.main.get_command(app))
    return found


COMMANDS = _commands()


def _words(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "callgate" for p, _ in COMMANDS]
)
def test_help_shows_every_option_with_its_description_and_no_placeholders(
    cli: Cli, path: tuple[str, ...], command: Any
) -> None:
    result = cli(*path, "--help", COLUMNS="100")

    assert result.exit_code == 0, result.output
    text = result.stdout
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert "<bool>" not in text
    shown = _words(text)
    for param in command.params:
        if param.param_type_name == "option":
            assert param.help, f"{' '.join(path)} {param.opts[0]} has no description"
        # The description as written: nothing taken for markup and dropped.
        if param.help:
            assert _words(param.help) in shown, (param.name, param.help)


def test_the_command_list_gives_each_command_one_sentence_on_one_line(cli: Cli) -> None:
    for path, command in COMMANDS:
        if not getattr(command, "commands", None):
            continue
        result = cli(*path, "--help", COLUMNS="100")
        panel = result.stdout.split("Commands")[1].splitlines()[1:]
        rows = [line.strip("│ ").strip() for line in panel if line.startswith("│")]
        names = sorted(command.commands)
        assert sorted(row.split()[0] for row in rows) == names  # no continuation lines
        for row in rows:
            summary = row.split(maxsplit=1)[1]
            assert summary.endswith("."), row  # a whole sentence, not cut mid-way
            assert re.search(r"[.;] [A-Z]", summary) is None, row  # and only one


WHO = ("principal", "tenant", "scopes", "roles")


def test_call_serve_and_run_share_one_rule_for_the_principal() -> None:
    by_path = dict(COMMANDS)
    for name in ("call", "serve", "run"):
        options = {p.name: p for p in by_path[(name,)].params}
        for option in WHO:
            assert not options[option].required, (name, option)
    helps = {
        name: [p.help for p in by_path[(name,)].params if p.name in WHO]
        for name in ("call", "serve", "run")
    }
    assert helps["call"] == helps["serve"] == helps["run"]
    assert len(helps["call"]) == len(WHO)


def test_every_command_takes_store() -> None:
    for path, command in COMMANDS:
        if getattr(command, "commands", None):
            continue
        names = {opt for p in command.params for opt in p.opts}
        assert "--store" in names, path
