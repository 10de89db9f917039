"""The console benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.test_benchmarks_run import run_script

PAGES = (
    "| inbox ",
    "| audit, no filter ",
    "| audit, tool ",
    "| audit, user ",
    "| audit, status=error ",
    "| audit, outcome=unknown_outcome ",
    "| audit, trace_id ",
    "| audit, one day 15 days ago ",
    "| audit, page at the middle ",
    "| audit, tool + status=error ",
    "| tools (figures of the last day) ",
)


def figures_of(out: str, page: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in out.splitlines()
        if line.startswith(page)
    ]


@pytest.mark.slow
def test_a_small_sqlite_run_times_every_page_and_explains_the_audit_filters() -> None:
    done = run_script(
        "console.py",
        *("--records", "3000", "--store", "sqlite", "--rounds", "2", "--warmup", "1"),
        "--explain",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"## SQLite: 3,000 audit records loaded in [\d.]+ s", out), out[:2000]
    for page in PAGES:
        rows = figures_of(out, page)
        assert rows, f"no figures for {page!r}"
        for row in rows:  # page, as, p50, p95, store p50, rows read
            assert float(row[2]) > 0 and float(row[3]) >= float(row[2]), row
    # The trace's records were found (the page is not an empty one).
    assert int(figures_of(out, "| audit, trace_id ")[0][5]) > 0
    assert "### Query plans (SQLite)" in out
    assert "USING INDEX ix_audit_tenant_seq" in out
    assert "USING INDEX ix_audit_trace_id" in out


@pytest.mark.slow
@pytest.mark.postgres
def test_a_small_run_on_both_stores_prints_them_side_by_side() -> None:
    done = run_script(
        "console.py", *("--records", "3000", "--store", "both", "--rounds", "2", "--warmup", "1")
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "## PostgreSQL: 3,000 audit records loaded in" in out
    assert "| page " in out and "PostgreSQL p50" in out and "SQLite p95" in out
    side = out[out.index("## Side by side") :]
    assert len(figures_of(side, "| audit, ")) >= 10
