"""The CLI's own failures: one line on stderr, no traceback, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ALICE_ARGS, Cli

FIND = ("call", "ops.campaigns_find", "--args", '{"query": "x"}', *ALICE_ARGS)


def _assert_cli_error(result_stderr: str, *fragments: str) -> None:
    assert result_stderr.startswith("callgate: error: ")
    assert len(result_stderr.splitlines()) == 1
    assert "Traceback" not in result_stderr
    for fragment in fragments:
        assert fragment in result_stderr


def _config(cli: Cli, text: str) -> str:
    (cli.tmp_path / "shop_tools.py").write_text(
        "from callgate import Toolbox\nshop = Toolbox('shop')\n"
    )
    path = cli.tmp_path / "bad.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('toolboxes = []\nstorre = "x"\n', ["storre: unknown key", "allowed: store, toolboxes"]),
        (
            'toolboxes = ["./nowhere.py:ops"]\n',
            ["toolboxes[0] ('./nowhere.py:ops')", "no such file"],
        ),
        ('toolboxes = ["no_such_module_xyz:ops"]\n', ["toolboxes[0]", "cannot import"]),
        ('toolboxes = ["./shop_tools.py:nothing"]\n', ["toolboxes[0]", "no attribute 'nothing'"]),
        (
            '[[policy.rules]]\nname = "big"\neffect = "deny"\nwhen = "args.amount >"\n',
            ["policy.rules[0] ('big').when: invalid CEL condition"],
        ),
        ("[limits]\nmax_attempts = 0\n", ["limits: max_attempts must be at least 1"]),
        ("toolboxes = [\n", ["invalid TOML"]),
    ],
    ids=[
        "unknown-key",
        "missing-file",
        "missing-module",
        "missing-attr",
        "bad-cel",
        "bad-limit",
        "toml",
    ],
)
def test_bad_config_is_named_with_file_and_key(cli: Cli, text: str, fragments: list[str]) -> None:
    config = _config(cli, text)

    for command in (("tools", "--config", config), (*FIND, "--config", config)):
        result = cli(*command)

        assert result.exit_code == 2
        assert result.stdout == ""
        _assert_cli_error(result.stderr, config, *fragments)


def test_missing_config_file(cli: Cli) -> None:
    result = cli("tools", "--config", str(cli.tmp_path / "nope.toml"))

    assert result.exit_code == 2
    _assert_cli_error(result.stderr, "nope.toml", "cannot read the config file")


def test_global_config_option_applies_to_commands(cli: Cli) -> None:
    config = _config(cli, "storre = 1\n")

    result = cli("--config", config, "tools")

    assert result.exit_code == 2
    _assert_cli_error(result.stderr, "storre: unknown key")


def test_malformed_store_url(cli: Cli) -> None:
    result = cli(*FIND, "--store", "not a url")

    assert result.exit_code == 2
    _assert_cli_error(result.stderr, "--store", "not a database URL")


def test_unreachable_store_masks_the_password(cli: Cli) -> None:
    result = cli("audit", "--store", "postgresql://u:s3cret@127.0.0.1:1/db")

    assert result.exit_code == 2
    _assert_cli_error(result.stderr, "cannot open the store postgresql://u:***@127.0.0.1:1/db")
    assert "s3cret" not in result.stderr


def test_store_from_the_environment(cli: Cli, tmp_path: Path) -> None:
    envelope = cli.json(*FIND)

    records = cli.json("audit", "--store", cli.store)

    assert [r["call_id"] for r in records] == [envelope["call_id"]]
    assert (tmp_path / "c.db").exists()


def test_version(cli: Cli) -> None:
    result = cli("--version")

    assert result.exit_code == 0
    assert result.stdout.strip() == "callgate 0.1.0"
