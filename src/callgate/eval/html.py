"""The HTML report: one self-contained file, plots inline as SVG.

Plots need matplotlib (``pip install matplotlib``); without it the report is
written with its tables only and says so at the top.
"""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING, Any

from callgate.eval.results import EvalResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["render_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;padding:0 1rem;max-width:1100px;color:#222}
h1{font-size:1.5rem} h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.9rem} td,th{padding:.25rem .6rem;border-bottom:1px solid #ddd}
th{text-align:left} td.n{text-align:right} .ok{color:#1a7f37} .bad{color:#cf222e} .mid{color:#9a6700}
.none{color:#8c959f}
.cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #ddd;border-radius:8px;padding:.6rem 1rem}
.card b{display:block;font-size:1.4rem} .plots{display:flex;flex-wrap:wrap;gap:1rem}
.note{background:#fff8c5;padding:.5rem 1rem;border-radius:6px}
.plots>div{max-width:100%} .plots svg{max-width:100%;height:auto} .wide{overflow-x:auto}
"""


_CLASSES = {"not run": "none", "passed": "ok", "failed": "bad", "mixed": "mid"}


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _plots(result: EvalResult) -> list[str]:
    from matplotlib.figure import Figure

    metrics = result.task_metrics()
    ids = [t.id for t in result.tasks]
    rates = [metrics[i].success_rate for i in ids]
    labels = [i.replace("$", r"\$") for i in ids]  # a task id's "$...$" is not TeX
    out = []

    fig = Figure(figsize=(6, max(2.5, 0.28 * len(ids) + 1)))
    ax = fig.subplots()
    # Each task's bar is whole: the share of runs that passed, then the share that
    # failed (a task that always fails is a red bar, not an empty row), grey when
    # the command was interrupted before any run of it.
    ran = [bool(metrics[i].runs) for i in ids]
    failed = [1 - r if was else 0.0 for r, was in zip(rates, ran, strict=True)]
    ax.barh(labels[::-1], rates[::-1], color="#2da44e", label="passed")
    ax.barh(labels[::-1], failed[::-1], left=rates[::-1], color="#cf222e", label="failed")
    if not all(ran):
        unrun = [0.0 if was else 1.0 for was in ran]
        ax.barh(labels[::-1], unrun[::-1], color="#d0d7de", label="not run")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, len(ids) - 0.4)  # not 5% of the rows blank at each end
    ax.set_xlabel("success rate")
    ax.set_title("Success by task")
    ax.tick_params(axis="y", labelsize=7)
    out.append(_svg(fig))

    pass_k = result.pass_hat_k()
    fig = Figure(figsize=(4.5, 3))
    ax = fig.subplots()
    ax.plot(list(pass_k), list(pass_k.values()), marker="o", color="#0969da")
    ax.set_ylim(-0.05, 1.05)  # a pass^k of 0 shows above the axis
    ax.set_xlabel("k")
    ax.set_ylabel("pass^k")
    ax.set_xticks(list(pass_k))
    ax.set_title("pass^k: k runs of a task all succeed")
    out.append(_svg(fig))

    overall = result.overall
    labels = ["errors", "wrong tool", "duplicates", "approval hits", "takeovers"]
    values = [
        overall.error_rate,
        overall.wrong_tool_rate,
        overall.duplicate_rate,
        overall.approval_hit_rate,
        overall.human_takeover_rate,
    ]
    fig = Figure(figsize=(4.5, 3))
    ax = fig.subplots()
    ax.bar(labels, values, color="#8250df")
    ax.set_ylim(0, max([1.0, *values]))
    ax.set_title("Rates (calls; runs for approvals, takeovers)")
    ax.tick_params(axis="x", labelsize=8, rotation=20)
    out.append(_svg(fig))

    kinds = overall.errors_by_kind
    if kinds:
        fig = Figure(figsize=(4.5, 3))
        ax = fig.subplots()
        ax.bar(list(kinds), list(kinds.values()), color="#cf222e")
        ax.set_title("Tool errors by kind")
        out.append(_svg(fig))
    return out


def _cell(value: Any, cls: str = "n") -> str:
    return f'<td class="{cls}">{html.escape(str(value))}</td>'


def render_html(result: EvalResult) -> str:
    """The report as one HTML document (plots inline when matplotlib is installed)."""
    try:
        plots = _plots(result)
        note = ""
    except ImportError:
        plots = []
        note = '<p class="note">No plots: matplotlib is not installed (pip install matplotlib).</p>'
    o = result.overall
    pass_k = result.pass_hat_k()
    cards = [
        ("success", f"{o.success_rate:.0%}", f"{o.successes}/{o.runs} runs"),
        (
            f"pass^{max(pass_k)}" if pass_k else "pass^k",
            f"{pass_k[max(pass_k)]:.2f}" if pass_k else "-",
            "all repetitions succeed",
        ),
        ("calls per run", f"{o.calls_per_run:.1f}", ""),
        (
            "error rate",
            f"{o.error_rate:.0%}",
            ", ".join(f"{k} {v}" for k, v in o.errors_by_kind.items()),
        ),
        ("wrong tool", f"{o.wrong_tool_rate:.0%}", "of calls"),
        ("human takeover", f"{o.human_takeover_rate:.0%}", "of runs"),
        (
            "tokens per run",
            f"{o.tokens['definitions'] + o.tokens['results']:.0f}",
            "definitions + results (est.)",
        ),
        ("wall time", f"{result.seconds:.2f} s", f"{o.seconds:.3f} s a run"),
    ]
    rows = []
    metrics = result.task_metrics()
    for info in result.tasks:
        m = metrics[info.id]
        cls = _CLASSES[m.outcome]
        failures = sorted({f for r in result.runs_of(info.id) for f in r.failures})
        rows.append(
            "<tr>"
            + _cell(info.id, "")
            + _cell(info.split, "")
            + _cell(", ".join(info.tags), "")
            + f'<td class="n {cls}">{m.successes}/{m.runs}</td>'
            + _cell(f"{m.calls_per_run:.1f}")
            + _cell(f"{m.error_rate:.0%}")
            + _cell(f"{m.wrong_tool_rate:.0%}")
            + _cell(f"{m.duplicate_rate:.0%}")
            + _cell(f"{m.approval_hit_rate:.0%}")
            + _cell(f"{m.human_takeover_rate:.0%}")
            + _cell("; ".join(failures), "")
            + "</tr>"
        )
    title = html.escape(f"callgate eval: {result.suite} · {result.model}")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{title}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>"
        f"<p>split {html.escape(result.split)}, {result.repeat} repetition(s), "
        f"{len(result.tasks)} tasks</p>{note}"
        + (
            f'<p class="note">Interrupted: {len(result.runs)} of {result.planned} runs '
            "ended; everything here covers those.</p>"
            if result.interrupted
            else ""
        )
        + '<div class="cards">'
        + "".join(
            f'<div class="card">{html.escape(k)}<b>{html.escape(v)}</b>{html.escape(s)}</div>'
            for k, v, s in cards
        )
        + '</div><h2>Plots</h2><div class="plots">'
        + "".join(f"<div>{p}</div>" for p in plots)
        + '</div><h2>Tasks</h2><div class="wide"><table><tr><th>task</th><th>split</th>'
        "<th>tags</th><th>pass</th><th>calls</th><th>errors</th><th>wrong tool</th>"
        "<th>duplicates</th><th>approval hits</th><th>takeover</th><th>failed checks</th></tr>"
        + "".join(rows)
        + "</table></div></body></html>\n"
    )
