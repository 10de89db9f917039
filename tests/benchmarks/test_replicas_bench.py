"""The replicas benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.test_benchmarks_run import run_script


@pytest.mark.slow
@pytest.mark.postgres
def test_replicas_quick_run_reports_both_setups_and_who_used_the_cpu() -> None:
    done = run_script("replicas.py", "--quick")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"\| one replica \| [\d,]+ \|", out), out
    assert re.search(r"\| two replicas \| [\d,]+ \|", out), out
    for column in ("CPU replica a", "CPU replica b", "CPU postgresql", "CPU load generator"):
        assert column in out
    assert re.search(r"two replicas / one: \d+\.\d\dx throughput", out), out
