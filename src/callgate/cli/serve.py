"""``callgate serve``: the configured tools over MCP (Streamable HTTP or stdio)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callgate.cli._common import (
    CliError,
    CodeModeOption,
    DiscoveryOption,
    StoreOption,
    cli_errors,
    opened,
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
    startup_summary,
    store_option,
)
from callgate.cli._health import health_route
from callgate.cli._identity import HttpIdentity, http_identity
from callgate.cli._replicas import SECRET_ENV, server_options, shares_secrets
from callgate.mcp._names import DEFAULT_SEPARATOR

if TYPE_CHECKING:
    import uvicorn
    from mcp.server import Server

    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_BODY_TIMEOUT = 30.0
"""``callgate.mcp.DEFAULT_BODY_TIMEOUT``, restated so that ``callgate --help``
need not import the MCP SDK (a test holds the two equal)."""


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on (HTTP).")
    ] = DEFAULT_HOST,
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="TCP port (HTTP)."),
    ] = DEFAULT_PORT,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve over stdin/stdout instead of HTTP.")
    ] = False,
    principal: UserOption = None,
    tenant: TenantOption = None,
    scopes: ScopesOption = None,
    roles: RolesOption = None,
    config: ConfigOption = None,
    store: StoreOption = None,
    unprefixed: Annotated[
        list[str] | None,
        typer.Option(
            "--unprefixed",
            metavar="TOOLBOX",
            help="Expose this toolbox's tools without the toolbox prefix (repeatable); "
            "for clients that expect fixed tool names. Default: unprefixed in the config's mcp table.",
            show_default=False,
        ),
    ] = None,
    tool_separator: Annotated[
        str | None,
        typer.Option(
            "--tool-separator",
            metavar="SEP",
            help=f"What joins toolbox and tool in the names clients see (default "
            f"{DEFAULT_SEPARATOR!r}: ops{DEFAULT_SEPARATOR}deploy_status; '.' for "
            "ops.deploy_status, which several hosts and model APIs refuse). Default: the "
            "config's mcp table (tool_separator).",
            show_default=False,
        ),
    ] = None,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            metavar="SECONDS",
            min=0.001,
            help="Seconds a client has to send a request's body (HTTP); then 408.",
        ),
    ] = DEFAULT_BODY_TIMEOUT,
    discovery: DiscoveryOption = None,
    code_mode: CodeModeOption = False,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Serve HTTP on a host other than loopback without authentication: every caller "
            "who can reach the port acts as the one local principal. For a network you "
            "trust completely.",
        ),
    ] = False,
) -> None:
    """Serve the tools over MCP: Streamable HTTP at http://HOST:PORT/mcp, or --stdio.

    Every call goes through the governed chain and is audited. With an auth
    table in the config, each HTTP request's caller comes from its bearer token
    (docs/auth.md), and the approvals API is served beside /mcp. Without one, every call is made for one local principal (--principal,
    --tenant, --scopes, --roles, or the config file's principal), so HTTP on a
    host other than loopback is refused unless --insecure-no-auth says otherwise.
    GET /healthz answers a load balancer (no credentials). Requests whose Host
    or Origin header names another host are refused. At
    startup it prints on stderr the store, the principal and the toolboxes it
    serves.

    Tools are named toolbox__tool (host-safe); each log event is one line.
    """
    from callgate.mcp import LOOPBACK_HOSTS, build_server

    with cli_errors():
        cfg = load(ctx, config, discovery=discovery, code_mode=code_mode)
        exposed = not stdio and host not in LOOPBACK_HOSTS
        if exposed and cfg.auth is None and not insecure_no_auth:
            raise CliError(
                f"refusing to serve on {host} without authentication: anyone who can "
                "reach the port would act as the one local principal, with all of its "
                "scopes. Add an [auth] table to the config (docs/auth.md), serve on "
                "loopback (the default), or pass --insecure-no-auth if every client of "
                "that network is trusted."
            )
        serves_demo = config_path(ctx, config) is None
        store_url = cfg.store_url(store_option(ctx, store))
        with demo_state_if(serves_demo, store_url):
            gate = cfg.build_gate(store_url)
            who = principal_from_options(
                gate,
                cfg.principal,
                user=principal,
                tenant=tenant,
                scopes=scopes,
                roles=roles,
            )
            identity = None
            if cfg.auth is not None and not stdio:
                # Each request's caller comes from its token; the options above
                # still make the principal of `callgate call`-like defaults.
                identity = http_identity(cfg.auth, gate)
            try:
                server = build_server(
                    gate,
                    **server_options(who),
                    principal=None if identity is not None else who,
                    tool_separator=tool_separator or cfg.mcp.tool_separator or DEFAULT_SEPARATOR,
                    unprefixed=unprefixed if unprefixed is not None else cfg.mcp.unprefixed,
                    # stdio serves one client for the life of the process: one session.
                    session_id=f"stdio-{uuid.uuid4().hex}" if stdio else None,
                )
            except ValueError as exc:
                raise CliError(str(exc)) from None
            _one_line_logs()
            for line in startup_summary(gate, who):
                if identity is not None and line.startswith("principal: "):
                    line = identity.summary()
                print(f"callgate: {line}", file=sys.stderr)
            if not stdio and not shares_secrets() and gate.store_url.startswith("postgres"):
                print(
                    f"callgate: warning: {SECRET_ENV} is not set: another replica on this "
                    "store would not share this one's sessions or requestState "
                    "(docs/deploy.md)",
                    file=sys.stderr,
                )
            sys.stderr.flush()
            if stdio:
                asyncio.run(_serve_stdio(gate, server))
            else:
                if exposed and identity is None:
                    typer.echo(
                        f"callgate: warning: serving on {host} without authentication; "
                        f"every caller acts as {who.user}",
                        err=True,
                    )
                asyncio.run(
                    _serve_http(
                        gate,
                        server,
                        host=host,
                        port=port,
                        body_timeout=body_timeout,
                        identity=identity,
                        local=who if identity is None else None,
                    )
                )


async def _serve_stdio(gate: Gate, server: Server[Any]) -> None:
    from callgate.mcp import run_stdio

    async with opened(gate):
        _upstream_summary(gate)
        try:
            await run_stdio(server)
        finally:
            await _stop_tasks(server)


def _upstream_summary(gate: Gate) -> None:
    """Once the upstreams had their start-up wait: how each is, on stderr."""
    from callgate.cli.upstreams import status_lines

    for line in status_lines(gate):
        print(f"callgate: {line}", file=sys.stderr)
    sys.stderr.flush()


async def _stop_tasks(server: Server[Any]) -> None:
    """Stop background task calls before the gate closes (they are then recorded as
    outcome unknown, and read as failed once a server starts over the same store)."""
    from callgate.mcp import tasks

    runner = tasks.runner_of(server)
    if runner is not None:
        await runner.aclose()


class _OneLine(logging.Formatter):
    """Every log event on one line: an exception as its type and message, not its
    stack (a server with many failing clients must not flood its log)."""

    def formatException(self, ei: Any) -> str:
        exc = ei[1]
        return f"{type(exc).__name__}: {exc}" if exc is not None else ""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return " | ".join(line for line in text.splitlines() if line.strip())


class _StderrNow(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to whatever ``sys.stderr`` is when a record comes
    (not the stream of the moment it was made, which may be closed since)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _one_line_logs() -> None:
    """Warnings and errors of the server (callgate, the MCP SDK, uvicorn) on
    stderr, one line each; stdout stays the stdio transport's."""
    root = logging.getLogger()
    if any(isinstance(h.formatter, _OneLine) for h in root.handlers):
        return
    handler = _StderrNow()
    handler.setFormatter(_OneLine("callgate serve: %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` whose accepted connections send at once.

    The socket is made with ``proto=IPPROTO_TCP``: asyncio switches Nagle's
    algorithm off (``TCP_NODELAY``) on each accepted connection only when the
    listener's protocol says TCP, and ``socket.create_server`` leaves it 0. With
    Nagle on, uvicorn's separate writes of headers and body make every kept-alive
    response wait for the client's delayed ACK (about 40 ms on Linux).

    Raises:
        OSError: the address is taken, not local, or not allowed.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if hasattr(socket, "SO_REUSEADDR"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def serving(app: Any) -> uvicorn.Server:
    """The uvicorn server ``callgate serve`` runs ``app`` with (on sockets from ``listen``)."""
    import uvicorn
    from uvicorn.server import HANDLED_SIGNALS

    class _Uvicorn(uvicorn.Server):
        """uvicorn, except that a caught SIGINT/SIGTERM is not raised again on the way out.

        uvicorn re-raises the signal when ``serve`` returns, which would kill the
        process before the gate is closed and lose the audit records still queued.
        """

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    # log_config=None: uvicorn's loggers go through the one-line handler too.
    return _Uvicorn(uvicorn.Config(app, log_level="warning", lifespan="on", log_config=None))


async def announce_console(console: Any, base: str, local: Principal | None) -> None:
    """Print the console's URL, and a one-time sign-in link for ``local`` (the one
    local principal, when requests carry no identity of their own)."""
    from callgate.console.web import PREFIX

    print(f"callgate: console at {base}{PREFIX}", file=sys.stderr)
    if local is not None:
        token = await console.state.console.sessions.mint_link(local)
        print(
            f"callgate: sign in to the console as {local.user} (once, within 15 minutes): "
            f"{base}{PREFIX}/login?token={token}",
            file=sys.stderr,
        )
    sys.stderr.flush()


async def _serve_http(
    gate: Gate,
    mcp_server: Server[Any],
    *,
    host: str,
    port: int,
    body_timeout: float,
    identity: HttpIdentity | None = None,
    local: Principal | None = None,
) -> None:
    from callgate.console.web import console_app, with_console
    from callgate.mcp import LOOPBACK_HOSTS, MCP_PATH, streamable_http_app

    app: Any
    health = health_route(gate)
    if identity is None:
        app = streamable_http_app(mcp_server, host=host, body_timeout=body_timeout, routes=[health])
    else:
        app = streamable_http_app(
            mcp_server,
            host=host,
            body_timeout=body_timeout,
            authenticate=identity.authenticate,
            challenge=identity.challenge,
            routes=[*identity.routes, health],
        )
        app = identity.with_approvals(gate, app)
    console = console_app(
        gate,
        authenticate=identity.authenticate if identity is not None else None,
        secure=host not in LOOPBACK_HOSTS,
    )
    app = with_console(console, app)
    try:
        # Bound here, not by uvicorn, so the URL (with the real port for --port 0)
        # is printed once connections are accepted into the backlog.
        sock = listen(host, port)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    with sock:
        bound = sock.getsockname()[1]
        server = serving(app)
        async with opened(gate):
            _upstream_summary(gate)
            shown = f"[{host}]" if ":" in host else host
            print(f"callgate: serving MCP at http://{shown}:{bound}{MCP_PATH}", file=sys.stderr)
            await announce_console(console, f"http://{shown}:{bound}", local)
            sys.stderr.flush()
            try:
                await server.serve(sockets=[sock])
            finally:
                await _stop_tasks(mcp_server)
                if identity is not None:
                    await identity.verifier.aclose()
