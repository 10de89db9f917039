"""The ``callgate`` command.

Every command that touches the store runs its async work in one
``asyncio.run`` with the gate opened and closed around it, so audit records
are durable before the process exits. Exit code 0 means the command ran
(whatever the status of a tool call's Envelope); 2 means the CLI itself could
not run, with a one-line message on stderr.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import platformdirs
import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from callgate import __version__
from callgate.cli import render
from callgate.cli._common import (
    CliError,
    JsonOption,
    StoreOnlyConfigOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    parse_attributes,
    print_json,
    read_arguments,
    safe_url,
    split_list,
)
from callgate.cli.approvals import approvals_app
from callgate.cli.audit_view import dropped_fields, records_json, summarize
from callgate.cli.demo_tour import run_tour
from callgate.cli.run import run
from callgate.cli.serve import serve
from callgate.config import GateConfig, default_config, load_config
from callgate.contract import Principal
from callgate.runtime.envelope import Envelope
from callgate.runtime.gate import Gate
from callgate.runtime.trifecta import static_check
from callgate.store import AuditRecord

app = typer.Typer(
    name="callgate",
    help="callgate: the model proposes; callgate disposes. Run `callgate demo` for a tour.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(approvals_app)
app.command()(serve)
app.command()(run)

DEMO_STATE_ENV = "CALLGATE_DEMO_STATE"
"""The file the demo tools keep their data in (read by ``callgate.demo``)."""

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config file (toolboxes, policy, limits, context); default: the demo tools.",
        show_default=False,
    ),
]
AuditConfigOption = StoreOnlyConfigOption


@dataclass(kw_only=True, frozen=True)
class _Globals:
    store: str | None = None
    config: Path | None = None


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
    ctx.obj = _Globals(store=store, config=config)


def _globals(ctx: typer.Context) -> _Globals:
    return ctx.obj if isinstance(ctx.obj, _Globals) else _Globals()


def _config(ctx: typer.Context, config: Path | None, *, demo_default: bool = True) -> GateConfig:
    """The command's ``--config``, else the global one, else the demo (or an empty) config."""
    path = config or _globals(ctx).config
    if path is not None:
        return load_config(path)
    return default_config() if demo_default else GateConfig()


def _store(ctx: typer.Context, store: str | None) -> str | None:
    return store or _globals(ctx).store


def demo_state_file(store_url: str) -> Path | None:
    """Where the demo keeps its data for the store ``store_url``.

    A SQLite file gets ``<name>.demo-state.json`` beside it; another
    persistent store one file per URL in the user data directory; an
    in-memory store none (its approvals die with the process, so should the
    demo's data).
    """
    if store_url in ("memory:", "memory://"):
        return None
    try:
        url = make_url(store_url)
    except ArgumentError:
        return None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return None
        db = Path(url.database).expanduser()
        return db.with_name(f"{db.name}.demo-state.json")
    digest = hashlib.sha256(store_url.encode()).hexdigest()[:12]
    return platformdirs.user_data_path("callgate", appauthor=False) / f"demo-state-{digest}.json"


@contextmanager
def _shared_demo_state(store_url: str) -> Iterator[None]:
    """Set ``$CALLGATE_DEMO_STATE`` (unless set) while the command runs.

    One ``callgate call`` per process would otherwise start from freshly seeded
    data each time: a budget set by one command would be unknown to the next.
    The variable is removed again afterwards, for callers running commands in
    process (tests).
    """
    path = demo_state_file(store_url)
    if path is None or os.environ.get(DEMO_STATE_ENV):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ[DEMO_STATE_ENV] = str(path)
    try:
        yield
    finally:
        os.environ.pop(DEMO_STATE_ENV, None)


# tools -----------------------------------------------------------------------
@app.command()
def tools(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    trusted_only: Annotated[
        bool,
        typer.Option(
            "--trusted-only", help="Only tools whose annotations come from a trusted source."
        ),
    ] = False,
    trifecta: Annotated[
        bool,
        typer.Option(
            "--trifecta",
            help="Report whether the toolset lets private data, untrusted content and a way "
            "out meet (the lethal trifecta), and which tools bring each.",
        ),
    ] = False,
) -> None:
    """List the tools with their risk tier, required scopes and a one-line description."""
    with cli_errors():
        # Listing tools needs no store: an in-memory one keeps the real one untouched.
        gate = _config(ctx, config).build_gate("memory://")
        specs = [s for s in gate.tools() if s.trusted_source or not trusted_only]
        if trifecta:
            report = static_check(specs)
            if as_json:
                print_json({"trifecta": report is not None, "tools": report or {}})
            else:
                render.print_trifecta(console(), report)
            return
        if as_json:
            print_json(
                [{**s.describe(), "trusted_fields": sorted(s.trusted_fields)} for s in specs]
            )
        else:
            render.print_tools(console(), specs)


# call ------------------------------------------------------------------------
@app.command()
def call(
    ctx: typer.Context,
    tool: Annotated[
        str, typer.Argument(metavar="TOOL", help="Full tool name, e.g. ops.campaigns_find.")
    ],
    principal: Annotated[
        str, typer.Option("--principal", metavar="USER", help="The user the call is made for.")
    ],
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            metavar="JSON",
            help="The model-filled arguments: JSON text, @file.json, or - for stdin. "
            "Passed to the gate as is (malformed JSON gets a construction error).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant", metavar="TENANT", help="The principal's tenant.", show_default=False
        ),
    ] = None,
    scopes: Annotated[
        str | None,
        typer.Option("--scopes", metavar="a,b", help="The principal's scopes.", show_default=False),
    ] = None,
    roles: Annotated[
        str | None,
        typer.Option("--roles", metavar="r1,r2", help="The principal's roles.", show_default=False),
    ] = None,
    attr: Annotated[
        list[str] | None,
        typer.Option(
            "--attr",
            metavar="KEY=VALUE",
            help="A trusted principal attribute (repeatable); key:=json for a JSON value.",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="ID",
            help="Session id (duplicate-call limit, retry budget).",
            show_default=False,
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            metavar="KEY",
            help="The same key (per tenant and tool) runs the tool once; later calls replay it.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="Seconds the tool may run (capped by the gate's limits).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Run one call through the governed chain and print its Envelope.

    Exit code 0 whenever an Envelope was produced, whatever its status.
    """
    with cli_errors():
        if timeout is not None and timeout <= 0:
            raise CliError(f"--timeout must be positive, not {timeout}")
        who = Principal(
            principal,
            tenant,
            scopes=split_list(scopes),
            roles=split_list(roles),
            attributes=parse_attributes(attr),
        )
        raw_args = read_arguments(args)
        cfg = _config(ctx, config)
        serves_demo = (config or _globals(ctx).config) is None
        with (
            _shared_demo_state(cfg.store_url(_store(ctx, store))) if serves_demo else nullcontext()
        ):
            gate = cfg.build_gate(_store(ctx, store))
            envelope, records = asyncio.run(
                _call(
                    gate,
                    tool,
                    raw_args,
                    principal=who,
                    session_id=session,
                    idempotency_key=idempotency_key,
                    timeout=timeout,
                    with_audit=not as_json,
                )
            )
    if as_json:
        print_json(envelope.model_dump(mode="json"))
        return
    render.render_envelope(console(), envelope, dropped_fields=dropped_fields(records))


async def _call(
    gate: Gate,
    tool: str,
    raw_args: str | None,
    *,
    principal: Principal,
    session_id: str | None,
    idempotency_key: str | None,
    timeout: float | None,
    with_audit: bool,
) -> tuple[Envelope, list[AuditRecord]]:
    async with opened(gate):
        envelope = await gate.call(
            tool,
            raw_args,
            principal=principal,
            session_id=session_id,
            idempotency_key=idempotency_key,
            timeout=timeout,
        )
        # Dropped trusted fields are operator facts: only the audit record has them.
        records = await gate.store.list_audit(call_id=envelope.call_id) if with_audit else []
    return envelope, records


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
    config: AuditConfigOption = None,
) -> None:
    """What was decided and what happened, newest last.

    A call with an intent record and no final one is shown as
    "unknown (no outcome recorded)"; with --json such intent records carry
    "outcome_unknown": true.
    """
    with cli_errors():
        cfg = _config(ctx, config, demo_default=False)
        gate = dataclasses.replace(cfg, toolboxes=(), secrets={}).build_gate(_store(ctx, store))
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
        where = safe_url(gate.store.url) + (f" for {call_id}" if call_id else "")
        out.print(f"No audit records in {where}")
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
        return await gate.store.list_audit(tail=tail, call_id=call_id)


# demo ------------------------------------------------------------------------
@app.command()
def demo(ctx: typer.Context, store: StoreOption = None) -> None:
    """A scripted tour of the governed chain against the demo tools (non-interactive)."""
    with cli_errors():
        cfg = default_config()
        url = cfg.store_url(_store(ctx, store))
        asyncio.run(run_tour(console(), cfg, url))


def main() -> None:
    """Entry point of the ``callgate`` console script."""
    app(prog_name="callgate")
