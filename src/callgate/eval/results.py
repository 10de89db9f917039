"""The result of an eval run: every run's outcome, and its JSON form.

The JSON (``callgate eval run --json`` / ``--out``) is what ``callgate eval
compare`` reads back: ``format``, ``suite``, ``model``, ``split``, ``repeat``,
``seconds``, ``overall`` (the metrics over every run, with ``pass_hat_k``),
``tasks`` (each task's id, split, tags, metrics and ``pass_hat_k``), ``runs``
(each run's outcome) and ``interrupted`` (true when the command was stopped
before every run was made: the result covers the runs that ended).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.errors import InvalidArgument
from callgate.eval.metrics import Aggregate, RunOutcome, aggregate, suite_pass_hat_k

__all__ = ["FORMAT", "EvalResult", "TaskInfo"]

FORMAT = 1
"""The version of the JSON layout."""


@dataclass(kw_only=True, frozen=True)
class TaskInfo:
    id: str
    split: str
    tags: tuple[str, ...] = ()


@dataclass(kw_only=True, frozen=True)
class EvalResult:
    """Every run of a suite's tasks with one model."""

    suite: str
    model: str
    split: str
    repeat: int
    tasks: tuple[TaskInfo, ...]
    runs: tuple[RunOutcome, ...]
    seconds: float = 0.0
    interrupted: bool = False
    """Stopped (Ctrl-C) before every run was made: ``runs`` are those that ended."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def planned(self) -> int:
        """How many runs were asked for: each task ``repeat`` times."""
        return len(self.tasks) * self.repeat

    def runs_of(self, task: str) -> list[RunOutcome]:
        return [r for r in self.runs if r.task == task]

    def task_metrics(self) -> dict[str, Aggregate]:
        return {t.id: aggregate(self.runs_of(t.id)) for t in self.tasks}

    @property
    def overall(self) -> Aggregate:
        return aggregate(self.runs)

    def pass_hat_k(self) -> dict[int, float]:
        """pass^k for k = 1 .. the repetitions, averaged over the tasks."""
        per = self.task_metrics()
        return suite_pass_hat_k((m.successes, m.runs) for m in per.values() if m.runs)

    def to_json(self) -> dict[str, Any]:
        per = self.task_metrics()
        return {
            "format": FORMAT,
            "suite": self.suite,
            "model": self.model,
            "split": self.split,
            "repeat": self.repeat,
            "seconds": round(self.seconds, 3),
            "overall": {
                **self.overall.to_json(),
                "pass_hat_k": {str(k): v for k, v in self.pass_hat_k().items()},
            },
            "tasks": [
                {
                    "id": t.id,
                    "split": t.split,
                    "tags": list(t.tags),
                    **per[t.id].to_json(),
                    "pass_hat_k": {
                        str(k): v
                        for k, v in suite_pass_hat_k(
                            [(per[t.id].successes, per[t.id].runs)]
                        ).items()
                    },
                }
                for t in self.tasks
            ],
            "runs": [r.to_json() for r in self.runs],
            "interrupted": self.interrupted,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, label: str = "results") -> EvalResult:
        """Read back :meth:`to_json`'s form.

        Raises:
            InvalidArgument: ``data`` is not an eval result of this format.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise InvalidArgument(
                f"{label}: not a callgate eval result (expected format {FORMAT}; "
                "write one with callgate eval run --out FILE)"
            )
        try:
            return cls(
                suite=str(data["suite"]),
                model=str(data["model"]),
                split=str(data["split"]),
                repeat=int(data["repeat"]),
                seconds=float(data.get("seconds", 0.0)),
                tasks=tuple(
                    TaskInfo(id=t["id"], split=t["split"], tags=tuple(t.get("tags", ())))
                    for t in data["tasks"]
                ),
                runs=tuple(RunOutcome.from_json(r) for r in data["runs"]),
                interrupted=bool(data.get("interrupted", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"{label}: a malformed eval result ({exc!r})") from None
