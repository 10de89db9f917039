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
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
    visible,
)
from callgate.cli._context import store_gate

if TYPE_CHECKING:
    from datetime import datetime

    from callgate.contract import Principal
    from callgate.runtime.gate import Gate
    from callgate.store import ApprovalRecord

# visible() lives in _common so that the views need not import this module, which imports
# them; it stays importable from here, where it was first written.
__all__ = ["StateFilter", "approvals_app", "visible"]

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
        gate = store_gate(ctx, store, config)
        records = asyncio.run(
            _list(gate, state=state.value if state else None, tenant=tenant, limit=limit)
        )
    from callgate.runtime.approvals import approval_json

    if as_json:
        print_json([approval_json(r, gate.clock.now()) for r in records])
        return
    from callgate.cli._approvals_view import print_list

    print_list(console(), records, gate.clock.now())


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
        gate = store_gate(ctx, store, config)
        record = asyncio.run(_get(gate, approval_id))
    from callgate.runtime.approvals import approval_json

    if as_json:
        print_json(approval_json(record, gate.clock.now()))
        return
    from callgate.cli._approvals_view import print_approval

    print_approval(console(), record, gate.clock.now())


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
    _decide_command(
        ctx,
        approval_id,
        approve=True,
        user=principal,
        tenant=tenant,
        roles=roles,
        text=note,
        as_json=as_json,
        store=store,
        config=config,
    )


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
    _decide_command(
        ctx,
        approval_id,
        approve=False,
        user=principal,
        tenant=tenant,
        roles=roles,
        text=reason,
        as_json=as_json,
        store=store,
        config=config,
    )


def _decide_command(
    ctx: typer.Context,
    approval_id: str,
    *,
    approve: bool,
    user: str,
    tenant: str | None,
    roles: str | None,
    text: str | None,
    as_json: bool,
    store: str | None,
    config: Path | None,
) -> None:
    """``approve`` and ``deny``: decide as the principal the options name, then print
    the decided request. ``text`` is the note of an approval, the reason of a denial.

    Raises:
        typer.Exit: with code 2 when the decision is refused or cannot be taken.
    """
    from callgate.config import local_principal

    with cli_errors():
        gate = store_gate(ctx, store, config)
        # Who decides is always named on the command line: the config's [principal]
        # is who calls, and deciding needs no scope (access checks tenant and roles).
        by = local_principal(gate, user=user, tenant=tenant, scopes=(), roles=split_list(roles))
        record = asyncio.run(_decide(gate, approval_id, approve=approve, by=by, text=text))
    _print_decision(record, as_json=as_json, now=gate.clock.now())


async def _decide(
    gate: Gate, approval_id: str, *, approve: bool, by: Principal, text: str | None
) -> ApprovalRecord:
    from callgate.runtime.approvals import ApprovalError

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


def _print_decision(record: ApprovalRecord, *, as_json: bool, now: datetime) -> None:
    from callgate.runtime.approvals import approval_json

    if as_json:
        print_json(approval_json(record, now))
        return
    from callgate.cli._approvals_view import print_decision

    print_decision(console(), record, now)
