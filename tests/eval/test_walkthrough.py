"""docs/evals.md's walk-through, run as the page shows it: the vague description
loses the task to its look-alike (and the linter warns), the better one wins it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner, Result

from callgate.cli.app import app

DOCS = Path(__file__).resolve().parents[2] / "docs" / "evals"
VAGUE = '    """Close a ticket.\n'
BETTER = (
    '    """Close a ticket as resolved: use it when the customer confirmed the fix.\n'
    "    To take a ticket out of the queue without resolving it, use tickets_archive.\n"
)


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def _copy(to: Path, *, better: bool) -> Path:
    # A directory per version: a toolbox file is imported once per path.
    shutil.copytree(DOCS, to)
    if better:
        tools = to / "support_tools.py"
        text = tools.read_text()
        assert VAGUE in text
        tools.write_text(text.replace(VAGUE, BETTER))
    return to


def test_a_better_description_turns_the_failing_eval_into_a_passing_one(tmp_path: Path) -> None:
    before = _copy(tmp_path / "before", better=False)
    after = _copy(tmp_path / "after", better=True)

    lint_before = _cli("lint", "--config", str(before / "callgate.toml"), "--fail-on", "warning")
    assert lint_before.exit_code == 1
    assert "description-short: 15 characters: 'Close a ticket.'" in lint_before.output
    lint_after = _cli("lint", "--config", str(after / "callgate.toml"), "--fail-on", "warning")
    assert lint_after.exit_code == 0, lint_after.output

    failing = _cli(
        "eval", "run", str(before / "support.toml"), "--model", "matcher",
        "--out", str(tmp_path / "before.json"),
    )  # fmt: skip
    assert "called support.tickets_archive, which it must not" in " ".join(failing.output.split())
    passing = _cli(
        "eval", "run", str(after / "support.toml"), "--model", "matcher",
        "--out", str(tmp_path / "after.json"), "--min-success", "1",
    )  # fmt: skip
    assert passing.exit_code == 0, passing.output
    compared = _cli(
        "eval", "compare", str(tmp_path / "before.json"), str(tmp_path / "after.json"), "--json"
    )
    verdicts = json.loads(compared.stdout)
    assert verdicts["overall"]["verdict"] == "better"
    assert [t["verdict"] for t in verdicts["tasks"]] == ["better"]


def test_the_scripted_model_cannot_tell_the_descriptions_apart() -> None:
    """The reason the walk-through needs --model matcher: a script passes either way."""
    result = _cli("eval", "run", str(DOCS / "support.toml"), "--json")
    assert json.loads(result.stdout)["overall"]["success_rate"] == 1.0
