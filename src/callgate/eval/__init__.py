"""Evals: run a suite of tasks through the agent loop and measure how it went.

A suite (:mod:`callgate.eval.tasks`, a TOML file) lists tasks: a prompt, the
calls and answer that make a run a success, and a script for a deterministic
model. :func:`run_suite` runs each task through the real loop over the gate,
N times, a few at once; :class:`EvalResult` holds the outcomes and the metrics
(:mod:`callgate.eval.metrics`); :mod:`callgate.eval.report` and
:mod:`callgate.eval.html` show them; :mod:`callgate.eval.compare` tells two
results apart. ``callgate eval`` is the command (docs/evals.md).
"""

from __future__ import annotations

from callgate.eval.metrics import Aggregate, RunOutcome, fisher_exact, pass_hat_k
from callgate.eval.results import EvalResult
from callgate.eval.tasks import Suite, Task, load_suite, parse_suite

__all__ = [
    "Aggregate",
    "EvalResult",
    "RunOutcome",
    "Suite",
    "Task",
    "fisher_exact",
    "load_suite",
    "parse_suite",
    "pass_hat_k",
]
