"""``callgate approvals``: the operator console for parked calls.

The CLI reads and writes the store directly: whoever runs it states who they
are (``--principal``, ``--tenant``, ``--roles``), and that principal passes the
same check as anywhere else (:func:`callgate.access.check`): of the request's
tenant, not its requester, in every approver set its rules named. Refused
attempts are audited. Deciding does not run the call: an
approved call runs once, when its caller makes the same call again (or resumes
it with ``Gate.resume``); ``show`` then includes its Envelope under ``result``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from callgate.access import describe_approvers
from callgate.cli._common import (
    CliError,
    JsonOption,
    StoreOnlyConfigOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    print_json,
    split_list,
)
from callgate.cli.render import WARNING, render_envelope
from callgate.config import GateConfig, load_config
from callgate.contract import InvalidIdentity, Principal
from callgate.runtime.approvals import ApprovalError, approval_json, effective_state
from callgate.runtime.envelope import Envelope
from callgate.runtime.gate import Gate
from callgate.store import ApprovalRecord

approvals_app = typer.Typer(
    name="approvals",
    help="List, inspect, approve and deny calls parked for a human's approval.",
    no_args_is_help=True,
)


class StateFilter(enum.StrEnum):
    """The states ``list --state`` accepts (``expired``: pending or approved, past its time)."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    USED = "used"
    EXPIRED = "expired"


ConfigOption = StoreOnlyConfigOption
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The approval id (apr_...).")]
DeciderOption = Annotated[
    str,
    typer.Option("--principal", metavar="WHO", help="Who decides (recorded in the audit)."),
]
DeciderTenantOption = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        metavar="TENANT",
        help="The decider's tenant: only the request's own tenant may decide it.",
        show_default=False,
    ),
]
DeciderRolesOption = Annotated[
    str | None,
    typer.Option(
        "--roles",
        metavar="a,b",
        help="The decider's roles, where the policy names approver roles.",
        show_default=False,
    ),
]


def _gate(ctx: typer.Context, store: str | None, config: Path | None) -> Gate:
    """A gate on the store named by the options, the root command's, or the defaults.

    Approvals need no tools, so no toolbox is imported (nor any tool code run).
    """
    # The root callback keeps its --store/--config on ctx.obj (a ``_Globals``).
    path = config or getattr(ctx.obj, "config", None)
    cfg = load_config(path) if path is not None else GateConfig()
    url = store or getattr(ctx.obj, "store", None)
    return dataclasses.replace(cfg, toolboxes=(), secrets={}).build_gate(url)


@approvals_app.command("list")
def list_(
    ctx: typer.Context,
    state: Annotated[
        StateFilter | None,
        typer.Option("--state", help="Only approvals in this state.", show_default=False),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="Only this tenant's.", show_default=False),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="At most N, newest first.")
    ] = 100,
    as_json: JsonOption = False,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Approval requests, newest first: id, state, tool, who asked, why, age."""
    with cli_errors():
        gate = _gate(ctx, store, config)
        records = asyncio.run(
            _list(gate, state=state.value if state else None, tenant=tenant, limit=limit)
        )
    if as_json:
        print_json([approval_json(r) for r in records])
        return
    print_list(console(), records)


async def _list(
    gate: Gate, *, state: str | None, tenant: str | None, limit: int
) -> list[ApprovalRecord]:
    async with opened(gate):
        approvals = await gate.approvals()
        return await approvals.list(state=state, tenant=tenant, limit=limit)


@approvals_app.command()
def show(
    ctx: typer.Context,
    approval_id: IdArgument,
    as_json: JsonOption = False,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """One request: every exact argument, the impact, who asked and why, the decision."""
    with cli_errors():
        gate = _gate(ctx, store, config)
        record = asyncio.run(_get(gate, approval_id))
    if as_json:
        print_json(approval_json(record))
        return
    print_approval(console(), record)


async def _get(gate: Gate, approval_id: str) -> ApprovalRecord:
    async with opened(gate):
        record = await (await gate.approvals()).get(approval_id)
    if record is None:
        raise CliError(f"no approval request {approval_id!r}")
    return record


@approvals_app.command()
def approve(
    ctx: typer.Context,
    approval_id: IdArgument,
    principal: DeciderOption,
    tenant: DeciderTenantOption = None,
    roles: DeciderRolesOption = None,
    note: Annotated[
        str | None,
        typer.Option("--note", metavar="TEXT", help="Why (kept with the decision and audited)."),
    ] = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Approve a pending request (not your own); the call runs when its caller repeats it."""
    with cli_errors():
        gate = _gate(ctx, store, config)
        by = _decider(principal, tenant, roles)
        record = asyncio.run(_decide(gate, approval_id, approve=True, by=by, text=note))
    _print_decision(record, as_json=as_json)


@approvals_app.command()
def deny(
    ctx: typer.Context,
    approval_id: IdArgument,
    principal: DeciderOption,
    tenant: DeciderTenantOption = None,
    roles: DeciderRolesOption = None,
    *,
    reason: Annotated[
        str,
        typer.Option("--reason", metavar="TEXT", help="Why; the requester (the model) is told."),
    ],
    as_json: JsonOption = False,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Deny a pending request; the caller gets a permission error with the reason."""
    with cli_errors():
        gate = _gate(ctx, store, config)
        by = _decider(principal, tenant, roles)
        record = asyncio.run(_decide(gate, approval_id, approve=False, by=by, text=reason))
    _print_decision(record, as_json=as_json)


def _decider(user: str, tenant: str | None, roles: str | None) -> Principal:
    """The deciding principal, built (and so normalized) once, like every other."""
    try:
        return Principal(user, tenant, roles=split_list(roles))
    except InvalidIdentity as exc:
        raise CliError(f"--principal/--tenant/--roles: {exc}") from None


async def _decide(
    gate: Gate, approval_id: str, *, approve: bool, by: Principal, text: str | None
) -> ApprovalRecord:
    async with opened(gate):
        approvals = await gate.approvals()
        try:
            if approve:
                return await approvals.approve(approval_id, by=by, note=text)
            return await approvals.deny(approval_id, by=by, reason=text or "")
        except ApprovalError as exc:
            hint = " (name the decider's tenant with --tenant)" if by.tenant is None else ""
            hint = hint if exc.code == "other_tenant" else ""
            raise CliError(f"refused: {exc}{hint}") from None


def _print_decision(record: ApprovalRecord, *, as_json: bool) -> None:
    if as_json:
        print_json(approval_json(record))
        return
    print_decision(console(), record)


# readable forms -----------------------------------------------------------------
STATE_STYLES = {
    "pending": "bold yellow",
    "approved": "bold green",
    "used": "green",
    "denied": "bold red",
    "expired": "dim",
}


_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me", "Zl", "Zp"})
_BLANK_LETTERS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0"})
"""Letters that render as nothing (Hangul fillers)."""


def visible(text: str) -> str:
    """``text`` with everything that could hide or disguise content escaped.

    Arguments come from a model; a terminal must not be made to hide, reorder or
    smuggle any part of what a person approves: control and format characters
    (ANSI escapes, bidi overrides), combining marks and variation selectors
    (which can carry hidden bytes), line/paragraph separators, unassigned and
    private-use code points, and blank letters are shown as ``\\uXXXX``.
    Newlines and ordinary non-ASCII text stay as they are.
    """
    out = []
    for ch in text:
        hidden = ch != "\n" and (
            unicodedata.category(ch) in _HIDDEN_CATEGORIES
            or ch in _BLANK_LETTERS
            or (ch != " " and ch.isspace())
        )
        out.append(
            (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}") if hidden else ch
        )
    return "".join(out)


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


def _state(record: ApprovalRecord) -> Text:
    state = effective_state(record)
    return Text(state, style=STATE_STYLES.get(state, ""))


def print_list(out: Console, records: list[ApprovalRecord]) -> None:
    """One row per request: id, state, tool, requested by, reason, age."""
    if not records:
        out.print("No approval requests")
        return
    now = datetime.now(UTC)
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
            _state(record),
            _plain(record.tool),
            _who(record.user, record.tenant),
            _plain(record.reason),
            _age(record.created_at, now),
        )
    out.print(table)


def print_approval(out: Console, record: ApprovalRecord) -> None:
    """Everything a person needs to decide: exact arguments, impact, who, why, decision."""
    out.print(Text.assemble(_plain(record.id, "bold"), "  ", _state(record)))
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
    facts.add_row("next", _plain(_next_step(record)))
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


def _next_step(record: ApprovalRecord) -> str:
    state = effective_state(record)
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


def print_decision(out: Console, record: ApprovalRecord) -> None:
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
    out.print(_plain(_next_step(record), "dim"))
