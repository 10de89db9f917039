"""What one run of a task measured, and the numbers over many runs.

Rates over calls (errors, wrong tools, duplicates) divide by the calls made;
rates over runs (success, approval hits, human takeovers) by the runs.
``pass^k`` is tau-bench's: the chance that k independent runs of a task all
succeed, estimated from c successes in n runs as C(c, k) / C(n, k), averaged
over the tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Aggregate", "RunOutcome", "aggregate", "fisher_exact", "pass_hat_k", "suite_pass_hat_k"]


@dataclass(kw_only=True, frozen=True)
class RunOutcome:
    """One run of one task: how it ended and what it spent.

    ``failures`` says which checks failed (empty: the run succeeded).
    """

    task: str
    repetition: int
    success: bool
    status: str
    failures: tuple[str, ...] = ()
    answer: str = ""
    calls: int = 0
    errors_by_kind: Mapping[str, int] = field(default_factory=dict)
    wrong_tool_calls: int = 0
    duplicate_calls: int = 0
    approval_hit: bool = False
    human_takeover: bool = False
    definition_tokens: int = 0
    result_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    tools_called: tuple[str, ...] = ()

    @property
    def errors(self) -> int:
        return sum(self.errors_by_kind.values())

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["errors_by_kind"] = dict(self.errors_by_kind)
        out["failures"] = list(self.failures)
        out["tools_called"] = list(self.tools_called)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOutcome:
        values = dict(data)
        values["failures"] = tuple(values.get("failures", ()))
        values["tools_called"] = tuple(values.get("tools_called", ()))
        return cls(**values)


def _rate(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


@dataclass(kw_only=True, frozen=True)
class Aggregate:
    """The metrics over a set of runs (one task's, or all of them)."""

    runs: int
    successes: int
    success_rate: float
    calls_per_run: float
    error_rate: float
    errors_by_kind: Mapping[str, int]
    wrong_tool_rate: float
    duplicate_rate: float
    approval_hit_rate: float
    human_takeover_rate: float
    tokens: Mapping[str, float]
    seconds: float
    """Mean wall time of a run."""

    @property
    def outcome(self) -> Literal["not run", "passed", "failed", "mixed"]:
        """``passed``: every run; ``failed``: none; ``not run``: no run was made
        (the command was interrupted first)."""
        if not self.runs:
            return "not run"
        if self.successes == self.runs:
            return "passed"
        return "failed" if not self.successes else "mixed"

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["errors_by_kind"] = dict(self.errors_by_kind)
        out["tokens"] = dict(self.tokens)
        return out


def aggregate(runs: Sequence[RunOutcome]) -> Aggregate:
    """The metrics over ``runs`` (zeros for none)."""
    n = len(runs)
    calls = sum(r.calls for r in runs)
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, count in r.errors_by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + count
    definitions = _rate(sum(r.definition_tokens for r in runs), n)
    results = _rate(sum(r.result_tokens for r in runs), n)
    model_in = _rate(sum(r.input_tokens for r in runs), n)
    model_out = _rate(sum(r.output_tokens for r in runs), n)
    return Aggregate(
        runs=n,
        successes=sum(r.success for r in runs),
        success_rate=_rate(sum(r.success for r in runs), n),
        calls_per_run=_rate(calls, n),
        error_rate=_rate(sum(kinds.values()), calls),
        errors_by_kind=dict(sorted(kinds.items())),
        wrong_tool_rate=_rate(sum(r.wrong_tool_calls for r in runs), calls),
        duplicate_rate=_rate(sum(r.duplicate_calls for r in runs), calls),
        approval_hit_rate=_rate(sum(r.approval_hit for r in runs), n),
        human_takeover_rate=_rate(sum(r.human_takeover for r in runs), n),
        tokens={
            "definitions": definitions,
            "results": results,
            "input": model_in,
            "output": model_out,
            "total": model_in + model_out,
        },
        seconds=_rate(sum(r.seconds for r in runs), n),
    )


def pass_hat_k(successes: int, runs: int, k: int) -> float:
    """tau-bench's pass^k of one task: C(successes, k) / C(runs, k).

    Raises:
        ValueError: ``k`` is not between 1 and ``runs``.
    """
    if not 1 <= k <= runs:
        raise ValueError(f"pass^k needs 1 <= k <= runs ({runs}), not k={k}")
    return math.comb(successes, k) / math.comb(runs, k)


def suite_pass_hat_k(counts: Iterable[tuple[int, int]]) -> dict[int, float]:
    """pass^k for k = 1 .. the fewest runs of a task, averaged over the tasks'
    ``(successes, runs)``."""
    counts = list(counts)
    if not counts:
        return {}
    most = min(n for _, n in counts)
    return {
        k: sum(pass_hat_k(c, n, k) for c, n in counts) / len(counts) for k in range(1, most + 1)
    }


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """The two-sided p-value of Fisher's exact test on the table [[a, b], [c, d]]
    (e.g. successes and failures before, then after).

    Every table with the same margins is as likely as the hypergeometric
    distribution says; the p-value sums those no more likely than the one seen
    (a relative tolerance keeps ties of floating-point equals, as R and SciPy do).
    """
    row1, col1, total = a + b, a + c, a + b + c + d
    if total == 0:
        return 1.0
    denominator = math.comb(total, col1)

    def prob(x: int) -> float:
        return math.comb(row1, x) * math.comb(total - row1, col1 - x) / denominator

    seen = prob(a)
    low, high = max(0, col1 - (total - row1)), min(row1, col1)
    p = sum(q for x in range(low, high + 1) if (q := prob(x)) <= seen * (1 + 1e-7))
    return min(1.0, p)
