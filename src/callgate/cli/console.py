"""``callgate console``: the web console alone (approvals, audit, runs, tools,
health), and ``callgate console link``: a one-time sign-in link for a person.

``callgate serve`` serves the same console at ``/console`` beside ``/mcp``;
this command is for a machine that only decides approvals and reads the
audit, on the same store.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from callgate.cli._common import CliError, StoreOption, cli_errors, opened, split_list
from callgate.cli._context import (
    ConfigOption,
    RolesOption,
    TenantOption,
    UserOption,
    load,
    principal_from_options,
    store_gate,
    store_option,
)

__all__ = ["DEFAULT_CONSOLE_PORT", "console_app"]

DEFAULT_CONSOLE_PORT = 8766

console_app = typer.Typer(
    name="console",
    help="Serve the web console alone, or print a one-time sign-in link for it.",
    invoke_without_command=True,
)

HostOption = Annotated[str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")]


@console_app.callback()
def console(
    ctx: typer.Context,
    host: HostOption = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="TCP port.")
    ] = DEFAULT_CONSOLE_PORT,
    principal: UserOption = None,
    tenant: TenantOption = None,
    roles: RolesOption = None,
    config: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Serve the web console at http://HOST:PORT/console and print a one-time
    sign-in link for the principal (--principal, --tenant, --roles, or the
    config's principal). With an auth table in the config, people sign in with
    an access token of its issuer instead. Off loopback the session cookie is
    Secure: serve behind TLS.
    """
    if ctx.invoked_subcommand is not None:
        return
    from callgate.cli.serve import announce_console, listen, serving
    from callgate.console.web import console_app as make_app
    from callgate.mcp import LOOPBACK_HOSTS

    with cli_errors():
        cfg = load(ctx, config, demo_default=False)
        gate = cfg.build_gate(cfg.store_url(store_option(ctx, store)))
        who = principal_from_options(
            gate, cfg.principal, user=principal, tenant=tenant, scopes=None, roles=roles
        )
        identity = None
        if cfg.auth is not None:
            from callgate.cli._identity import http_identity

            identity = http_identity(cfg.auth, gate)
        app = make_app(
            gate,
            authenticate=identity.authenticate if identity is not None else None,
            secure=host not in LOOPBACK_HOSTS,
        )
        try:
            sock = listen(host, port)
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

        async def main() -> None:
            with sock:
                server = serving(app)
                async with opened(gate):
                    shown = f"[{host}]" if ":" in host else host
                    base = f"http://{shown}:{sock.getsockname()[1]}"
                    print(f"callgate: store {gate.store_url.split('@')[-1]}", file=sys.stderr)
                    await announce_console(app, base, who if identity is None else None)
                    try:
                        await server.serve(sockets=[sock])
                    finally:
                        if identity is not None:
                            await identity.verifier.aclose()

        asyncio.run(main())


@console_app.command()
def link(
    ctx: typer.Context,
    principal: Annotated[
        str,
        typer.Option("--principal", metavar="WHO", help="Who signs in with the link."),
    ],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="Their tenant.", show_default=False),
    ] = None,
    roles: Annotated[
        str | None,
        typer.Option(
            "--roles",
            metavar="ROLES",
            help="Their roles, comma-separated (approver, auditor, admin).",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str,
        typer.Option("--url", metavar="URL", help="Where the console is served."),
    ] = f"http://127.0.0.1:{DEFAULT_CONSOLE_PORT}",
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Print a one-time sign-in link for a person.

    The link works once, within 15 minutes, on the console of this store.
    Whoever can write the store can act as anyone, as with
    `callgate approvals --principal`.
    """
    from callgate.config import local_principal
    from callgate.console.sessions import ConsoleSessions
    from callgate.console.web import PREFIX

    with cli_errors():
        gate = store_gate(ctx, store, config)
        who = local_principal(
            gate, user=principal, tenant=tenant, scopes=(), roles=split_list(roles)
        )

        async def mint() -> str:
            async with opened(gate):
                return await ConsoleSessions(gate).mint_link(who)

        token = asyncio.run(mint())
    base = url.rstrip("/")
    if base.endswith(PREFIX):
        base = base[: -len(PREFIX)]
    typer.echo(f"{base}{PREFIX}/login?token={token}")
