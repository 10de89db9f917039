"""Two eval results side by side: which tasks got better or worse, and whether
the difference is more than chance.

Each task's successes before and after form a 2x2 table; Fisher's exact test
gives the chance of a difference at least as large if nothing had changed.
With one run a side no difference can be significant, and the note says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.eval.metrics import Aggregate, aggregate, fisher_exact
from callgate.eval.results import EvalResult

__all__ = ["SIGNIFICANT", "TaskChange", "compare", "compare_json"]

SIGNIFICANT = 0.05
"""The p-value below which a change is called significant."""


@dataclass(kw_only=True, frozen=True)
class TaskChange:
    """One task's success before and after (None: not in that result)."""

    task: str
    before: Aggregate | None
    after: Aggregate | None
    p_value: float | None

    @property
    def delta(self) -> float:
        if self.before is None or self.after is None or not (self.before.runs and self.after.runs):
            return 0.0
        return self.after.success_rate - self.before.success_rate

    @property
    def verdict(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "removed"
        if not (self.before.runs and self.after.runs):
            return "not run"  # on a side that was interrupted first: no change to tell
        if self.delta > 0:
            return "better"
        if self.delta < 0:
            return "worse"
        return "same"

    @property
    def note(self) -> str:
        if self.p_value is None:
            return ""
        if (
            self.before is not None
            and self.after is not None
            and min(self.before.runs, self.after.runs) < 2
        ):
            return "one run a side: repeat (--repeat N) to test significance"
        mark = "significant" if self.p_value < SIGNIFICANT else "not significant"
        return f"p={self.p_value:.3g} (Fisher), {mark}"


def _p(before: Aggregate, after: Aggregate) -> float:
    return fisher_exact(
        before.successes,
        before.runs - before.successes,
        after.successes,
        after.runs - after.successes,
    )


def compare(before: EvalResult, after: EvalResult) -> tuple[list[TaskChange], TaskChange]:
    """Each task's change (in ``before``'s order, new tasks last), and the overall one."""
    old, new = before.task_metrics(), after.task_metrics()
    ids = list(old) + [t for t in new if t not in old]
    changes = []
    for task in ids:
        b, a = old.get(task), new.get(task)
        p = _p(b, a) if b is not None and a is not None and b.runs and a.runs else None
        changes.append(TaskChange(task=task, before=b, after=a, p_value=p))
    # A task one side never ran (it was interrupted first) counts on neither side.
    unrun = {c.task for c in changes if c.verdict == "not run"}
    b_all = aggregate([r for r in before.runs if r.task not in unrun])
    a_all = aggregate([r for r in after.runs if r.task not in unrun])
    overall = TaskChange(
        task="(all)",
        before=b_all,
        after=a_all,
        p_value=_p(b_all, a_all) if b_all.runs and a_all.runs else None,
    )
    return changes, overall


def _side(m: Aggregate | None) -> Mapping[str, Any] | None:
    if m is None:
        return None
    return {"successes": m.successes, "runs": m.runs, "success_rate": m.success_rate}


def compare_json(before: EvalResult, after: EvalResult) -> dict[str, Any]:
    """:func:`compare` as JSON: ``overall`` and ``tasks`` (each with before, after,
    delta, verdict, p_value and note)."""
    changes, overall = compare(before, after)

    def one(c: TaskChange) -> dict[str, Any]:
        return {
            "task": c.task,
            "before": _side(c.before),
            "after": _side(c.after),
            "delta": c.delta,
            "verdict": c.verdict,
            "p_value": c.p_value,
            "note": c.note,
        }

    return {
        "before": {"suite": before.suite, "model": before.model},
        "after": {"suite": after.suite, "model": after.model},
        "overall": one(overall),
        "tasks": [one(c) for c in changes],
    }
