"""The terminal form of an eval result: one row a task, then the totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from callgate.eval.results import EvalResult

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["print_result"]


_STYLES = {"not run": "dim", "passed": "green", "failed": "red", "mixed": "yellow"}


def _pct(value: float) -> str:
    return f"{value:.0%}"


def print_result(out: Console, result: EvalResult) -> None:
    """Print ``result`` as a table, the failed checks, and the overall metrics."""
    from rich.markup import escape
    from rich.table import Table

    # Suite, task ids, check texts and the model's words are text, not markup:
    # "[/]" in a reply must print as written, not stop the report after the runs.
    title = escape(f"{result.suite} · {result.model} · split {result.split}")
    if result.interrupted:
        title += f" · [bold red]interrupted: {len(result.runs)} of {result.planned} runs[/]"
    table = Table(title=title, title_justify="left")
    table.add_column("task", overflow="fold", min_width=22)
    table.add_column("split", no_wrap=True)
    for name in ("pass", "calls", "err", "wrong", "dup", "appr", "human", "s"):
        table.add_column(name, justify="right", no_wrap=True)
    for info in result.tasks:
        m = result.task_metrics()[info.id]
        style = _STYLES[m.outcome]
        table.add_row(
            escape(info.id),
            "held" if info.split == "heldout" else info.split,
            f"[{style}]{m.successes}/{m.runs}[/]",
            f"{m.calls_per_run:.1f}",
            _pct(m.error_rate),
            _pct(m.wrong_tool_rate),
            _pct(m.duplicate_rate),
            _pct(m.approval_hit_rate),
            _pct(m.human_takeover_rate),
            f"{m.seconds:.2f}",
        )
    out.print(table)
    for run in result.runs:
        if not run.success:
            out.print(
                f"[red]FAIL[/] {escape(run.task)} #{run.repetition + 1}: "
                + escape("; ".join(run.failures)),
                markup=True,
                highlight=False,
            )
    o = result.overall
    kinds = ", ".join(f"{k} {v}" for k, v in o.errors_by_kind.items()) or "none"
    pass_k = "  ".join(f"pass^{k} {v:.2f}" for k, v in result.pass_hat_k().items())
    out.print(
        f"success {_pct(o.success_rate)} ({o.successes}/{o.runs} runs)  {pass_k}\n"
        f"calls/run {o.calls_per_run:.2f}  errors {_pct(o.error_rate)} ({kinds})  "
        f"wrong tool {_pct(o.wrong_tool_rate)}  duplicates {_pct(o.duplicate_rate)}\n"
        f"approval hits {_pct(o.approval_hit_rate)}  human takeovers {_pct(o.human_takeover_rate)}  "
        f"tokens/run: definitions {o.tokens['definitions']:.0f}, results {o.tokens['results']:.0f}, "
        f"model {o.tokens['total']:.0f}  wall {result.seconds:.2f} s",
        highlight=False,
    )
