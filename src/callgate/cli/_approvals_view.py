"""How ``callgate approvals`` shows requests and decisions on a terminal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from callgate.access import describe_approvers
from callgate.cli._common import visible
from callgate.cli.render import WARNING, render_envelope
from callgate.runtime.approvals import effective_state
from callgate.runtime.envelope import Envelope
from callgate.store import ApprovalRecord

STATE_STYLES = {
    "pending": "bold yellow",
    "approved": "bold green",
    "used": "green",
    "denied": "bold red",
    "expired": "dim",
}


def _plain(text: str, style: str = "") -> Text:
    """``text`` as is: never parsed as rich markup, invisible characters escaped."""
    return Text(visible(text), style=style)


def _json_text(value: Any, *, indent: int | None = None) -> Text:
    return Text(visible(json.dumps(value, ensure_ascii=False, indent=indent, default=str)))


def _age(created_at: datetime, now: datetime) -> str:
    seconds = max(0, int((now - created_at).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _who(user: str, tenant: str | None) -> Text:
    return _plain(f"{user} ({tenant})" if tenant else user)


def _state(record: ApprovalRecord, now: datetime) -> Text:
    state = effective_state(record, now)
    return Text(state, style=STATE_STYLES.get(state, ""))


def print_list(out: Console, records: list[ApprovalRecord], now: datetime) -> None:
    """One row per request: id, state, tool, requested by, reason, age (as of ``now``)."""
    if not records:
        out.print("No approval requests")
        return
    table = Table(
        title=f"{len(records)} approval request{'s' if len(records) != 1 else ''} (newest first)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    for header in ("id", "state", "tool", "requested by", "reason"):
        table.add_column(header, overflow="fold")
    table.add_column("age", justify="right", no_wrap=True)
    for record in records:
        table.add_row(
            _plain(record.id),
            _state(record, now),
            _plain(record.tool),
            _who(record.user, record.tenant),
            _plain(record.reason),
            _age(record.created_at, now),
        )
    out.print(table)


def print_approval(out: Console, record: ApprovalRecord, now: datetime) -> None:
    """Everything a person needs to decide: exact arguments, impact, who, why, decision."""
    out.print(Text.assemble(_plain(record.id, "bold"), "  ", _state(record, now)))
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim", no_wrap=True)
    facts.add_column(overflow="fold")
    facts.add_row("tool", _plain(record.tool))
    facts.add_row("requested by", _who(record.user, record.tenant))
    facts.add_row("why", _plain(record.reason, WARNING))
    if record.rule:
        facts.add_row("rule", _plain(record.rule))
    facts.add_row(
        "who may approve",
        _plain(
            (
                f"of tenant {record.tenant or '(none)'}, not {record.user} (four eyes): "
                if record.approved_by == "another"
                else f"{record.user} themself (a confirmation), or of tenant "
                f"{record.tenant or '(none)'}: "
            )
            + describe_approvers(record.approvers)
        ),
    )
    facts.add_row("requested at", _when(record.created_at))
    facts.add_row("expires at", _when(record.expires_at))
    if record.preview_id:
        facts.add_row("preview", _plain(record.preview_id))
    if record.decided_by:
        decision = Text(f"{record.state if record.state != 'used' else 'approved'} by ")
        decision.append(visible(record.decided_by), style="bold")
        if record.decided_at:
            decision.append(f" at {_when(record.decided_at)}")
        facts.add_row("decision", decision)
        if record.note:
            facts.add_row("note" if record.state != "denied" else "reason", _plain(record.note))
    else:
        facts.add_row("decision", Text("none yet", style="dim"))
    facts.add_row("next", _plain(_next_step(record, now)))
    out.print(facts)

    out.print(Text("Exact arguments the tool will receive", style="bold"))
    arguments = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    arguments.add_column("name", style="bold", overflow="fold")
    arguments.add_column("value (JSON)", overflow="fold")
    arguments.add_column("from", style="dim", no_wrap=True)
    # Without a preview, what the model did not send the server injected; with
    # one, the rest was bound when the preview was made.
    bound = "preview" if record.preview_id else "server"
    for name, value in record.arguments.items():
        source = "model" if name in record.model_arguments else bound
        arguments.add_row(_plain(name), _json_text(value), source)
    out.print(arguments)
    if record.impact is not None:
        out.print(Text("Impact", style="bold"))
        out.print(_json_text(record.impact, indent=2))
    if record.result is not None:
        out.print(Text("Result of the approved call", style="bold"))
        _print_result(out, record.result)


def _print_result(out: Console, result: dict[str, Any]) -> None:
    try:
        envelope = Envelope.model_validate(result)
    except ValueError:
        out.print(_json_text(result, indent=2))
        return
    render_envelope(out, envelope)


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _next_step(record: ApprovalRecord, now: datetime) -> str:
    state = effective_state(record, now)
    requester = record.user
    if state == "pending":
        tenant = f" --tenant {record.tenant}" if record.tenant else ""
        return f"approve or deny it (callgate approvals approve|deny {record.id} --principal WHO{tenant})"
    if state == "approved":
        return f"runs once, when {requester} repeats the call (or resumes {record.id})"
    if state == "used":
        return f"done: the approved call ran ({record.used_by_call or '?'})"
    if state == "denied":
        return f"{requester}'s call is refused with the reason given"
    return "expired: nothing will run; the caller must ask again"


def print_decision(out: Console, record: ApprovalRecord, now: datetime) -> None:
    """One line on what was decided and what happens next."""
    line = Text.assemble(
        (record.state, STATE_STYLES.get(record.state, "")),
        " ",
        _plain(record.id, "bold"),
        " (",
        _plain(record.tool),
        ", requested by ",
        _who(record.user, record.tenant),
        ")",
    )
    out.print(line)
    out.print(_plain(_next_step(record, now), "dim"))
