"""The chain's shape: one composition, and a previewed change's behaviour in its own stage."""

from __future__ import annotations

import re
from pathlib import Path

from callgate.runtime import pipeline
from callgate.runtime.stages import change

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "callgate" / "runtime"


def test_only_the_change_stage_and_the_composition_know_previewed_changes() -> None:
    asks = re.compile(r"\.change\b(?!s)")
    allowed = {"changes.py", "stages/change.py", "pipeline.py", "policy.py"}
    found = [
        f"{path.relative_to(RUNTIME)}:{number}"
        for path in sorted(RUNTIME.rglob("*.py"))
        if str(path.relative_to(RUNTIME)) not in allowed
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if asks.search(line) and "import" not in line
    ]
    assert found == []


def test_a_change_s_tools_pass_every_stage_of_the_chain_but_where_they_differ() -> None:
    names = {role: [s.__name__ for s in stages] for role, stages in pipeline.CHANGE_STAGES.items()}
    chain = [stage.__name__ for stage in pipeline.STAGES]

    assert chain == [
        "resolve", "authorize", "rate_limit", "validate", "inject", "classify",
        "decide", "execute", "normalize", "shape",
    ]  # fmt: skip
    assert names["preview"] == [*chain[:5], "repeatable", *chain[5:8], "keep", *chain[8:]]
    assert names["apply"] == [*chain[:5], "bind", *chain[5:]]
    assert names["status"] == [*chain[:5], "bind", *chain[5:7], "check_status", *chain[8:]]
    assert pipeline.CHANGE_STAGES["apply"][5] is change.bind
