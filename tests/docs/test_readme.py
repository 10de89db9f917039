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
