"""The numbers an eval reports: pass^k, Fisher's exact test, the rates."""

from __future__ import annotations

import pytest

from callgate.eval.metrics import RunOutcome, aggregate, fisher_exact, pass_hat_k, suite_pass_hat_k


def test_pass_hat_k_is_the_chance_that_k_drawn_runs_all_succeed() -> None:
    assert pass_hat_k(4, 4, 3) == 1.0
    assert pass_hat_k(0, 4, 1) == 0.0
    assert pass_hat_k(3, 4, 1) == 0.75
    assert pass_hat_k(3, 4, 2) == pytest.approx(3 / 6)  # C(3,2)/C(4,2)
    assert pass_hat_k(3, 4, 4) == 0.0  # one failure: four of four never all succeed
    assert pass_hat_k(2, 5, 3) == 0.0


def test_suite_pass_hat_k_averages_over_tasks_up_to_the_fewest_runs() -> None:
    result = suite_pass_hat_k([(4, 4), (2, 4)])

    assert list(result) == [1, 2, 3, 4]
    assert result[1] == pytest.approx((1 + 0.5) / 2)
    assert result[2] == pytest.approx((1 + 1 / 6) / 2)
    assert result[3] == pytest.approx(0.5)


def test_pass_hat_k_refuses_k_beyond_the_runs() -> None:
    with pytest.raises(ValueError, match="1 <= k <= runs"):
        pass_hat_k(1, 2, 3)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ((1, 9, 11, 3), 0.0027594561852200836),  # SciPy's documented example
        ((8, 2, 1, 5), 0.03496503496503495),
        ((3, 1, 1, 3), 0.4857142857142857),  # the lady tasting tea
        ((5, 0, 5, 0), 1.0),
        ((10, 0, 0, 10), 1.082508822446903e-05),
    ],
)
def test_fisher_exact_matches_known_values(
    table: tuple[int, int, int, int], expected: float
) -> None:
    assert fisher_exact(*table) == pytest.approx(expected, rel=1e-9)


def _run(task: str, success: bool, **kw: object) -> RunOutcome:
    values: dict[str, object] = {"status": "completed", **kw}
    return RunOutcome(task=task, repetition=0, success=success, **values)  # type: ignore[arg-type]


def test_rates_divide_calls_by_calls_and_runs_by_runs() -> None:
    runs = [
        _run(
            "a",
            True,
            calls=4,
            errors_by_kind={"construction": 1},
            wrong_tool_calls=1,
            duplicate_calls=1,
        ),
        _run(
            "a", False, calls=0, approval_hit=True, human_takeover=True, status="waiting_approval"
        ),
        _run("b", True, calls=4, errors_by_kind={"permission": 1}),
    ]

    m = aggregate(runs)

    assert m.success_rate == pytest.approx(2 / 3)
    assert m.calls_per_run == pytest.approx(8 / 3)
    assert m.error_rate == 0.25
    assert m.errors_by_kind == {"construction": 1, "permission": 1}
    assert m.wrong_tool_rate == 0.125
    assert m.duplicate_rate == 0.125
    assert m.approval_hit_rate == pytest.approx(1 / 3)
    assert m.human_takeover_rate == pytest.approx(1 / 3)
