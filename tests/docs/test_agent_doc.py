"""docs/agent.md's example runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "agent.md"


def test_the_agent_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [example] = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    script = tmp_path / "agent_example.py"
    script.write_text(example)
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip() == "completed D-1 is running. 1"
