"""Readable (rich) forms of tools, Envelopes and the audit trail."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from rich import box
from rich.console import Console
from rich.json import JSON
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from callgate.cli.audit_view import CallSummary
from callgate.contract import ToolSpec
from callgate.runtime.envelope import Envelope, Status
from callgate.store import AuditRecord

STATUS_STYLES = {
    Status.OK: "bold green",
    Status.ERROR: "bold red",
    Status.PENDING_APPROVAL: "bold yellow",
    Status.PENDING_INPUT: "bold yellow",
    Status.TASK: "bold cyan",
}
RISK_STYLES = {"read": "green", "write_idempotent": "yellow", "write_high_risk": "red"}
DECISION_STYLES = {"allow": "green", "deny": "red", "require_approval": "yellow"}
WARNING = "bold yellow"


def _fits(out: Console, table: Table) -> bool:
    """Whether ``table`` fits the console without folding its cells."""
    return Measurement.get(out, out.options.update_width(10_000), table).maximum <= out.width


def print_tools(out: Console, specs: Sequence[ToolSpec]) -> None:
    """One line per tool: the table if its facts fit the console, else a line of
    facts and a line of summary per tool.

    Name, risk, scopes and server-set fields are never cut; the summary (the
    description's first sentence) is cut to the console's width with "…" (the
    whole description is in ``callgate tools --json``).
    """
    facts = tools_table(specs, summary_width=None)
    room = out.width - Measurement.get(out, out.options.update_width(10_000), facts).maximum
    # The summary column costs its separator (1) and is worth showing from 20.
    if room - 1 >= 20:
        out.print(tools_table(specs, summary_width=room - 1))
        return
    out.print(Text(f"{len(specs)} tools", style="italic"))
    for spec in specs:
        risk = spec.risk.value
        line = Text.assemble((spec.name, "bold"), "  ", (risk, RISK_STYLES.get(risk, "")))
        line.append(f"  scopes: {', '.join(sorted(spec.scopes)) or '-'}")
        if spec.trusted_fields:
            line.append(f"  set by server: {', '.join(sorted(spec.trusted_fields))}")
        out.print(line)
        summary = Text(f"    {one_line(spec)}", style="dim", no_wrap=True, overflow="ellipsis")
        out.print(summary, no_wrap=True, overflow="ellipsis")


def one_line(spec: ToolSpec) -> str:
    """The first sentence of ``spec``'s description (a period followed by a space or
    the end; ``ops.deploy_status`` is no sentence end)."""
    summary = spec.summary
    match = re.match(r"(.+?[.!?])(?:\s|$)", summary)
    return match.group(1) if match else summary


def tools_table(specs: Sequence[ToolSpec], *, summary_width: int | None = 60) -> Table:
    """Name, risk tier, scopes, server-set fields and summary of each tool, one line
    each; with ``summary_width`` None, without the summary."""
    table = Table(
        title=f"{len(specs)} tools",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    table.add_column("tool", style="bold", no_wrap=True)
    table.add_column("risk", no_wrap=True)
    table.add_column("scopes", no_wrap=True)
    table.add_column("set by server", no_wrap=True)
    if summary_width is not None:
        table.add_column("summary", no_wrap=True, overflow="ellipsis", max_width=summary_width)
    for spec in specs:
        risk = spec.risk.value
        # A tool's words (an upstream's too) are text: "[/]" in one is no markup.
        cells: list[str | Text] = [
            Text(spec.name),
            Text(risk, style=RISK_STYLES.get(risk, "")),
            Text(", ".join(sorted(spec.scopes)) or "-"),
            Text(", ".join(sorted(spec.trusted_fields)) or "-"),
        ]
        if summary_width is not None:
            cells.append(Text(one_line(spec)))
        table.add_row(*cells)
    return table


def _duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def render_envelope(
    out: Console, envelope: Envelope, *, dropped_fields: Sequence[str] = ()
) -> None:
    """Status, decision, error and next step, payload, then any truncation notice."""
    head = Text.assemble((envelope.tool, "bold"), "  ")
    head.append(envelope.status.value, style=STATUS_STYLES.get(envelope.status, "bold"))
    if envelope.error is not None and envelope.status.value == "error":
        head.append(f" ({envelope.error.kind.value})", style="red")
    if envelope.replayed:
        head.append("  replayed: stored result, the tool did not run again", style="cyan")
    out.print(head)

    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim", no_wrap=True)
    facts.add_column(overflow="fold")
    if envelope.error is not None:
        facts.add_row("error", Text(envelope.error.message_for_model, style="red"))
        if envelope.error.next_step:
            facts.add_row("next step", Text(envelope.error.next_step))
        if envelope.error.retryable:
            facts.add_row("retryable", "yes")
    if envelope.decision is not None:
        decision = Text(
            envelope.decision.effect, style=DECISION_STYLES.get(envelope.decision.effect, "")
        )
        if envelope.decision.rule:
            decision.append(f"  rule {envelope.decision.rule}", style="dim")
        if envelope.decision.reason:
            decision.append(f": {envelope.decision.reason}")
        facts.add_row("decision", decision)
    else:
        facts.add_row("decision", Text("not reached", style="dim"))
    if dropped_fields:
        facts.add_row(
            "dropped",
            Text(
                f"{', '.join(dropped_fields)}: set by the server; the value supplied "
                "with the arguments was discarded (and audited)",
                style=WARNING,
            ),
        )
    if envelope.timing is not None:
        attempts = envelope.timing.attempts
        facts.add_row(
            "timing",
            f"{_duration(envelope.timing.duration_ms)}, {attempts} attempt"
            + ("s" if attempts != 1 else ""),
        )
    if envelope.idempotency_key:
        facts.add_row("idempotency key", Text(envelope.idempotency_key))
    facts.add_row("call id", envelope.call_id)
    out.print(facts)

    if isinstance(envelope.payload, str):
        # Text as is: a result cut by characters is a slice of JSON text, not a value.
        out.print(Text(envelope.payload), soft_wrap=True)
    elif envelope.payload is not None:
        out.print(JSON.from_data(envelope.payload, default=str), soft_wrap=True)
    if envelope.truncated is not None:
        out.print(Text(envelope.truncated.notice, style=WARNING))


def print_audit(out: Console, calls: Sequence[CallSummary]) -> None:
    """The audit table if it fits the console, else two lines per call (nothing cut)."""
    table = audit_table(calls)
    if _fits(out, table):
        out.print(table)
        return
    out.print(Text(_calls_title(calls), style="italic"))
    for call in calls:
        line = Text.assemble(
            (_time(call), ""),
            "  ",
            (call.tool, "bold"),
            "  ",
            (call.decision or "-", DECISION_STYLES.get(call.decision or "", "dim")),
            " -> ",
            _outcome(call),
        )
        more = Text(f"    {call.who}, {_duration(call.duration_ms)}, attempts {call.attempts}")
        if call.dropped_fields:
            more.append(f", dropped: {', '.join(call.dropped_fields)}", style=WARNING)
        out.print(line)
        out.print(more, style="dim" if not call.dropped_fields else "")


def audit_table(calls: Sequence[CallSummary]) -> Table:
    """One row per call: time, who, tool, decision, outcome, duration, attempts, dropped."""
    table = Table(
        title=_calls_title(calls),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    for header in ("time (UTC)", "user (tenant)", "tool", "decision", "outcome"):
        table.add_column(header, overflow="fold")
    table.add_column("duration", justify="right", overflow="fold")
    table.add_column("attempts", justify="right", overflow="fold")
    table.add_column("dropped", overflow="fold")
    for call in calls:
        table.add_row(
            _time(call),
            # Plain Text: a URI like ``notes://n1`` is no emoji code or markup.
            Text(call.who),
            Text(call.tool),
            Text(call.decision or "-", style=DECISION_STYLES.get(call.decision or "", "dim")),
            _outcome(call),
            _duration(call.duration_ms),
            str(call.attempts),
            Text(", ".join(call.dropped_fields), style=WARNING) if call.dropped_fields else "",
        )
    return table


def _calls_title(calls: Sequence[CallSummary]) -> str:
    return f"{len(calls)} call{'s' if len(calls) != 1 else ''} (newest last)"


def _time(call: CallSummary) -> str:
    return call.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _outcome(call: CallSummary) -> Text:
    if call.outcome_unknown:
        return Text(call.outcome, style=WARNING)
    return Text(call.outcome, style=_outcome_style(call.outcome))


def _outcome_style(outcome: str) -> str:
    if outcome == "ok":
        return "green"
    if outcome.startswith("pending"):
        return "yellow"
    return "red"


def audit_records(out: Console, records: Sequence[AuditRecord]) -> None:
    """Every recorded field of each record (for one call)."""
    for record in records:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in (
            ("phase", record.phase),
            ("at", record.at.astimezone(UTC).isoformat()),
            # Resource reads and prompt gets (``resource:<uri>``) have no version.
            (
                "tool",
                f"{record.tool} (version {record.tool_version})"
                if record.tool_version
                else record.tool,
            ),
            ("risk", record.risk),
            ("user (tenant)", f"{record.user} ({record.tenant})"),
            ("session", record.session_id),
            ("decision", record.decision),
            ("decision reason", record.decision_reason),
            ("status", record.status),
            ("outcome", record.outcome),
            ("duration", _duration(record.duration_ms) if record.duration_ms else None),
            ("attempts", str(record.attempts)),
            ("idempotency key", record.idempotency_key),
            ("dropped fields", ", ".join(record.dropped_fields) or None),
            ("args hash", record.args_hash),
            ("contract hash", record.contract_hash),
            ("trace id", record.trace_id),
            ("detail", repr(record.detail) if record.detail else None),
        ):
            if value is not None:
                grid.add_row(name, Text(str(value)))
        out.print(Text(f"{record.call_id} #{record.seq}", style="bold"))
        out.print(grid)


def print_trifecta(console: Console, report: Mapping[str, list[str]] | None) -> None:
    """The static lethal-trifecta check, readable."""
    if report is None:
        console.print(
            "No lethal trifecta: private data, untrusted content and a way out do not all "
            "meet in this toolset.",
            style="green",
        )
        return
    console.print(
        "Lethal trifecta: this toolset can read private data, take in untrusted content "
        "and send data out. In a session that has done the first two, callgate asks a "
        "human before any of the third runs.",
        style="yellow",
    )
    labels = {
        "private_data": "private data",
        "untrusted_content": "untrusted content",
        "exfiltration": "can send data out",
    }
    for key, label in labels.items():
        console.print(f"  {label}: {', '.join(report.get(key, []))}", markup=False)


def print_search(out: Console, outcome: Mapping[str, Any]) -> None:
    """The ranking of ``callgate tools --search``: rank, name, summary, and which
    rankings found each (BM25, dense)."""
    results = outcome["results"]
    if not results:
        out.print(f"nothing matches {outcome['query']!r}", markup=False)
    for result in results:
        found_by = [
            f"{label} #{result[key]}"
            for label, key in (("bm25", "bm25_rank"), ("dense", "dense_rank"))
            if result[key] is not None
        ]
        kind = " (skill)" if result["kind"] == "skill" else ""
        out.print(
            f"{result['rank']:>3}. [bold]{escape(result['name'])}[/bold]{kind}  "
            f"[dim]{', '.join(found_by)}[/dim]"
        )
        out.print(f"     {escape(result['summary'])}", overflow="ellipsis", no_wrap=True)
    if outcome["note"]:
        out.print(f"[dim]{escape(outcome['note'])}[/dim]")
