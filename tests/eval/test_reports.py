"""The demo suite, the HTML report and the comparison of two results."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

import callgate
from callgate.eval.compare import compare
from callgate.eval.html import render_html
from callgate.eval.results import EvalResult
from callgate.eval.runner import run_suite
from callgate.eval.tasks import load_suite

DEMO_SUITE = Path(callgate.__file__).parent / "demo" / "evals" / "demo.toml"


@pytest.fixture(scope="module")
def demo_result() -> EvalResult:
    import anyio

    return anyio.run(lambda: run_suite(load_suite(DEMO_SUITE), repeat=2, concurrency=8))


def test_every_demo_task_passes_with_its_script(demo_result: EvalResult) -> None:
    failed = [f"{r.task}: {r.failures}" for r in demo_result.runs if not r.success]

    assert failed == []
    assert len(demo_result.tasks) >= 25
    assert {t.split for t in demo_result.tasks} == {"dev", "heldout"}
    assert demo_result.pass_hat_k() == {1: 1.0, 2: 1.0}


def test_the_demo_suite_exercises_the_governance(demo_result: EvalResult) -> None:
    overall = demo_result.overall

    assert set(overall.errors_by_kind) == {"construction", "permission", "business_state"}
    assert overall.human_takeover_rate > 0
    assert overall.wrong_tool_rate > 0
    assert overall.duplicate_rate > 0
    taken_over = {r.task for r in demo_result.runs if r.human_takeover}
    assert taken_over == {"budget-big-raise-needs-approval", "email-external-needs-approval"}


def test_a_result_survives_its_json(demo_result: EvalResult) -> None:
    again = EvalResult.from_json(demo_result.to_json())

    assert again.to_json() == demo_result.to_json()


def test_the_html_report_is_one_file_with_plots(
    demo_result: EvalResult, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("matplotlib")
    page = render_html(demo_result)
    # The demo suite's report of this test run, kept with the run's other files.
    (tmp_path_factory.mktemp("eval-report") / "demo.html").write_text(page, encoding="utf-8")

    assert page.count("<svg") >= 3
    assert "budget-big-raise-needs-approval" in page
    assert "<script" not in page and "src=" not in page  # nothing to fetch


def test_without_matplotlib_the_report_says_it_has_no_plots(
    demo_result: EvalResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)

    page = render_html(demo_result)

    assert "<svg" not in page
    assert "No plots: matplotlib is not installed" in page


def _with_successes(result: EvalResult, task: str, successes: int) -> EvalResult:
    runs = []
    for run in result.runs:
        if run.task == task:
            ok = run.repetition < successes
            run = replace(run, success=ok, failures=() if ok else ("worse",))
        runs.append(run)
    return replace(result, runs=tuple(runs))


def test_compare_names_the_task_that_got_worse_and_the_one_that_got_better() -> None:
    import anyio

    suite = load_suite(DEMO_SUITE).select(tags=["email"])
    base = anyio.run(lambda: run_suite(suite, repeat=10))
    before = _with_successes(base, "email-colleague", 0)
    after = _with_successes(base, "email-external-needs-approval", 1)

    changes, overall = compare(before, after)
    by_task = {c.task: c for c in changes}

    better, worse = by_task["email-colleague"], by_task["email-external-needs-approval"]
    assert (better.verdict, better.delta) == ("better", 1.0)
    assert (worse.verdict, worse.delta) == ("worse", -0.9)
    assert worse.p_value is not None and worse.p_value < 0.001
    assert "significant" in worse.note and "not" not in worse.note
    assert overall.delta == pytest.approx(0.05)  # 10/20 -> 11/20
    assert overall.note.endswith("not significant")


def test_one_run_a_side_is_never_called_significant(demo_result: EvalResult) -> None:
    one = replace(demo_result, runs=tuple(r for r in demo_result.runs if r.repetition == 0))
    worse = _with_successes(one, "deploy-status-running", 0)

    changes, _ = compare(one, worse)

    change = next(c for c in changes if c.task == "deploy-status-running")
    assert change.verdict == "worse"
    assert change.note.startswith("one run a side")


def test_a_task_an_interrupted_run_never_reached_is_not_run_not_worse(
    demo_result: EvalResult,
) -> None:
    reached = [r for r in demo_result.runs if r.task != "deploy-status-running"]
    interrupted = replace(demo_result, runs=tuple(reached), interrupted=True)

    changes, overall = compare(demo_result, interrupted)
    by_task = {c.task: c for c in changes}

    assert by_task["deploy-status-running"].verdict == "not run"
    assert by_task["deploy-status-running"].delta == 0
    assert {c.verdict for c in changes} == {"same", "not run"}
    assert overall.verdict == "same"
    # (all) counts the tasks both ran: one that fails everywhere it ran is worse.
    failing = replace(interrupted, runs=tuple(replace(r, success=False) for r in reached))
    _, worse = compare(demo_result, failing)
    assert worse.before is not None and worse.after is not None
    assert (worse.before.runs, worse.after.runs) == (len(reached), len(reached))
    assert worse.delta == -1.0
    again = EvalResult.from_json(interrupted.to_json())
    assert again.interrupted and again.planned == demo_result.planned
