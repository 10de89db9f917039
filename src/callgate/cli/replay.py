"""``callgate replay``: a recorded agent run against the config as it is now.

Exit code: 0 no call is taken otherwise now, 1 differences were found, 2 the
CLI could not run (an unknown run id among them).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    print_json,
    safe_url,
    visible,
)
from callgate.cli._context import (
    ConfigOption,
    RolesOption,
    ScopesOption,
    config_path,
    demo_state_if,
    load,
    store_option,
)

if TYPE_CHECKING:
    from rich.console import Console

    from callgate.config import GateConfig
    from callgate.replay import ReplayReport
    from callgate.replay.report import CallReplay
    from callgate.runtime.gate import Gate

LIVE_WARNING = (
    "--live: every call the gate would run without a human is made again, against the "
    "tools as they are now; their side effects (writes, payments, messages) happen again."
)


def replay(
    ctx: typer.Context,
    run_id: Annotated[
        str,
        typer.Argument(metavar="RUN_ID", help="The agent run to replay (callgate run prints it)."),
    ],
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Make the calls again against the tools as they are now and compare their "
            "results (side effects happen again); default: answer every call from the recording.",
        ),
    ] = False,
    scopes: ScopesOption = None,
    roles: RolesOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Replay a recorded agent run against the current config and report what changed.

    The model's recorded responses are fed back; each call is checked again
    (validation against today's contract, authorization, policy) and answered
    from the recording, or made again with --live. The calls are checked for the
    run's user and tenant. Exit code: 0 nothing changed, 1 differences found, 2
    the CLI could not run.
    """
    with cli_errors():
        cfg = load(ctx, config)
        serves_demo = config_path(ctx, config) is None
        store = store_option(ctx, store)
        out = console()
        if live:
            typer.echo(LIVE_WARNING, err=True)
        with demo_state_if(serves_demo, cfg.store_url(store)):
            gate = cfg.build_gate(store)
            report = asyncio.run(_replay(gate, cfg, run_id, live=live, scopes=scopes, roles=roles))
    if as_json:
        print_json(report.to_json())
    else:
        _print(out, report)
    raise typer.Exit(EXIT_FAILED if report.changed else EXIT_OK)


async def _replay(
    gate: Gate,
    cfg: GateConfig,
    run_id: str,
    *,
    live: bool,
    scopes: str | None,
    roles: str | None,
) -> ReplayReport:
    from callgate.cli._common import split_list
    from callgate.cli._context import principal_from_options
    from callgate.contract import Principal
    from callgate.replay import recording_of, replay

    async with opened(gate):
        record = await (await gate.runs()).get_run(run_id)
        if record is None:
            raise CliError(f"no agent run {run_id!r} in {safe_url(gate.store_url)}")
        then = recording_of(record).principal
        if then is None:  # recorded before runs kept their principal's grants
            who = principal_from_options(
                gate,
                cfg.principal,
                user=record.user,
                tenant=record.tenant,
                scopes=scopes,
                roles=roles,
            )
        else:  # as the run recorded it, but for what --scopes and --roles say
            who = Principal(
                then.user,
                tenant=then.tenant,
                scopes=split_list(scopes) if scopes is not None else then.scopes,
                roles=split_list(roles) if roles is not None else then.roles,
                attributes=then.attributes,
            )
        return await replay(
            gate, run_id, principal=who, live=live, on_call=_progress if live else None
        )


def _progress(call: CallReplay, total: int) -> None:
    """A line on stderr as each live call is made again (a call takes as long as its tool)."""
    typer.echo(
        f"callgate: [{call.number}/{total}] {visible(call.tool)}: {call.then or '?'} -> {call.now}"
        + (" (changed)" if call.changed else ""),
        err=True,
    )


def _print(out: Console, report: ReplayReport) -> None:
    from rich.text import Text

    source = "live calls" if report.live else "answers from the recording"
    out.print(Text(f"replay of {report.run_id} ({source})", style="bold"))
    for call in report.calls:
        style = "red" if call.changed else "green"
        head = Text(f"#{call.number} ", style="dim") + Text(call.tool, style="bold")
        head += Text(f"  {call.then or '?'} -> {call.now}")
        head += Text("  changed" if call.changed else "  unchanged", style=style)
        if call.answered == "none":
            head += Text("  (not made in the recording)", style="dim")
        out.print(head)
        for difference in call.differences:
            out.print(Text(f"    {difference.kind}: ", style=style) + Text(difference.text))
    out.print(Text(report.summary()))
