"""The ``callgate`` command.

Every command that touches the store runs its async work in one
``asyncio.run`` with the gate opened and closed around it, so audit records
are durable before the process exits. Exit codes are the same for every
command (:mod:`callgate.cli._common`): 0 done, 1 the call or run failed, 2 the
CLI itself could not run (one line on stderr), 3 waiting for a human.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from callgate import __version__
from callgate.cli._common import (
    JsonOption,
    StoreOnlyConfigOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    print_json,
    safe_url,
)
from callgate.cli._context import (
    DEMO_STATE_ENV,
    ConfigOption,
    Globals,
    demo_state_file,
    store_gate,
    store_option,
)
from callgate.cli._help import HelpGroup
from callgate.cli.approvals import approvals_app
from callgate.cli.call import call
from callgate.cli.console import console_app
from callgate.cli.contract import contract_app
from callgate.cli.eval import eval_app
from callgate.cli.lint import lint
from callgate.cli.replay import replay
from callgate.cli.run import run
from callgate.cli.serve import serve
from callgate.cli.tools import tools
from callgate.cli.upstreams import upstreams

if TYPE_CHECKING:
    from callgate.runtime.gate import Gate
    from callgate.store import AuditRecord

# Each command imports what it works with when it runs (see cli/_common.py):
# ``callgate --help`` loads typer and these modules, not the gate.

__all__ = ["DEMO_STATE_ENV", "app", "demo_state_file", "main"]

app = typer.Typer(
    name="callgate",
    help="callgate: the model proposes; callgate disposes. Run `callgate demo` for a tour.",
    cls=HelpGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for command in (serve, run, tools, call, upstreams, lint, replay):
    app.command()(command)
app.add_typer(approvals_app)
app.add_typer(console_app)
app.add_typer(contract_app)
app.add_typer(eval_app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"callgate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    store: StoreOption = None,
    config: ConfigOption = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    ctx.obj = Globals(store=store, config=config)


# audit -----------------------------------------------------------------------
@app.command()
def audit(
    ctx: typer.Context,
    tail: Annotated[
        int | None,
        typer.Option(
            "--tail",
            metavar="N",
            min=1,
            help="Only the newest N calls (records with --json).",
            show_default=False,
        ),
    ] = None,
    call_id: Annotated[
        str | None,
        typer.Option("--call", metavar="CALL_ID", help="Only this call.", show_default=False),
    ] = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    config: StoreOnlyConfigOption = None,
) -> None:
    """What was decided and what happened, newest last.

    A call with an intent record and no final one is shown as
    "unknown (no outcome recorded)"; with --json such intent records carry
    "outcome_unknown": true.
    """
    from callgate.cli import render
    from callgate.cli.audit_view import records_json, summarize

    with cli_errors():
        gate = store_gate(ctx, store, config)
        # A call has at most two records, so 2N records hold the newest N calls.
        limit = tail if as_json or tail is None else 2 * tail
        records = asyncio.run(_audit(gate, tail=limit, call_id=call_id))
    if as_json:
        print_json(records_json(records))
        return
    out = console()
    calls = summarize(records)
    if tail is not None:
        calls = calls[-tail:]
    if not calls:
        where = safe_url(gate.store_url) + (f" for {call_id}" if call_id else "")
        out.print(f"No audit records in {where}", markup=False)
        return
    render.print_audit(out, calls)
    unknown = sum(c.outcome_unknown for c in calls)
    if unknown:
        out.print(
            f"{unknown} call(s) with an intent and no outcome: the tool may or may not "
            "have acted; check before retrying.",
            style=render.WARNING,
        )
    if call_id is not None:
        render.audit_records(out, records)


async def _audit(gate: Gate, *, tail: int | None, call_id: str | None) -> list[AuditRecord]:
    async with opened(gate):
        return await gate.audit(tail=tail, call_id=call_id)


# demo ------------------------------------------------------------------------
@app.command()
def demo(ctx: typer.Context, store: StoreOption = None) -> None:
    """A scripted tour of the governed chain against the demo tools (non-interactive)."""
    from callgate.cli.demo_tour import run_tour
    from callgate.config import default_config

    with cli_errors():
        cfg = default_config()
        url = cfg.store_url(store_option(ctx, store))
        asyncio.run(run_tour(console(), cfg, url))


def main() -> None:
    """Entry point of the ``callgate`` console script."""
    app(prog_name="callgate")
