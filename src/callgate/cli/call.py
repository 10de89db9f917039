"""``callgate call``: one call through the governed chain, its Envelope printed."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_WAITING,
    CliError,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    parse_attributes,
    print_json,
    read_arguments,
)
from callgate.cli._context import (
    ConfigOption,
    RolesOption,
    ScopesOption,
    TenantOption,
    UserOption,
    config_path,
    demo_state_if,
    load,
    principal_from_options,
    store_option,
)

if TYPE_CHECKING:
    from callgate.contract import Principal
    from callgate.runtime.envelope import Envelope
    from callgate.runtime.gate import Gate
    from callgate.store import AuditRecord

EXIT_CODES = {
    "ok": EXIT_OK,
    "task": EXIT_OK,
    "error": EXIT_FAILED,
    "pending_approval": EXIT_WAITING,
    "pending_input": EXIT_WAITING,
}
"""The exit code of ``callgate call`` for each Envelope status (``Status`` values)."""


def call(
    ctx: typer.Context,
    tool: Annotated[
        str, typer.Argument(metavar="TOOL", help="Full tool name, e.g. ops.campaigns_find.")
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
    principal: UserOption = None,
    tenant: TenantOption = None,
    scopes: ScopesOption = None,
    roles: RolesOption = None,
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

    Exit code: 0 ok (or a task started), 1 an error Envelope, 3 waiting for a
    human's approval or input, 2 the CLI could not run.
    """
    with cli_errors():
        if timeout is not None and timeout <= 0:
            raise CliError(f"--timeout must be positive, not {timeout}")
        attributes = parse_attributes(attr)
        raw_args = read_arguments(args)
        cfg = load(ctx, config)
        serves_demo = config_path(ctx, config) is None
        store = store_option(ctx, store)
        with demo_state_if(serves_demo, cfg.store_url(store)):
            gate = cfg.build_gate(store)
            who = principal_from_options(
                gate,
                cfg.principal,
                user=principal,
                tenant=tenant,
                scopes=scopes,
                roles=roles,
                attributes=attributes,
            )
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
    else:
        from callgate.cli import render
        from callgate.cli.audit_view import dropped_fields

        render.render_envelope(console(), envelope, dropped_fields=dropped_fields(records))
    raise typer.Exit(EXIT_CODES.get(envelope.status.value, EXIT_FAILED))


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
        records = await gate.audit(call_id=envelope.call_id) if with_audit else []
    return envelope, records
