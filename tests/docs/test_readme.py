"""The README's Python example runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_a_python_example() -> None:
    assert python_blocks()


def test_first_five_minutes_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(python_blocks()[0])
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "dict_keys(['deploy_id'])" in out
    assert "ok {'deploy_id': 'D-1', 'state': 'running', 'tenant': 'acme'}" in out
    assert "construction Unknown argument 'deploy'. Did you mean 'deploy_id'?" in out
    assert "permission You are not allowed to call ops.deploy_rollback" in out
    assert "alice ops.deploy_rollback None permission" in out
    assert (tmp_path / "callgate-readme.db").exists()


def shell_commands() -> list[str]:
    """The ``callgate ...`` lines of the README's shell examples (comments removed)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("callgate "):
                commands.append(line)
    return commands


def test_readme_shell_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    from typer.testing import CliRunner

    from callgate.cli.app import app

    monkeypatch.setenv("CALLGATE_STORE", f"sqlite:///{tmp_path / 'readme.db'}")
    commands = shell_commands()
    assert len(commands) >= 5
    runner = CliRunner()
    outputs = []
    for command in commands:
        result = runner.invoke(app, shlex.split(command)[1:])
        expected = 1 if "deploy_rollback" in command else 0  # a refused call exits 1
        assert result.exit_code == expected, (command, result.output)
        outputs.append(result.output)
    assert "ops.campaigns_find" in outputs[0]
    assert "Autumn Sale_Search_Retarget" in outputs[2]
    assert '"kind": "permission"' in outputs[3]
    assert "ops.deploy_rollback" in outputs[4]
