"""Serve a Gate over MCP, on the official SDK's low-level ``Server``.

Every ``tools/call`` runs through :meth:`Gate.call`; nothing here executes a
tool. Both wire generations come from the SDK: a 2025-11-25 client does the
``initialize`` handshake, a 2026-07-28 client sends its protocol version and
capabilities in ``_meta`` on every request (``server/discover`` included).

Who is calling: for now one fixed :class:`Principal` per server, chosen by
whoever starts it (``callgate serve --principal/--tenant/--scopes``). That is
only safe on loopback or stdio, where the caller is the local user;
authenticating remote callers (OAuth on Streamable HTTP) comes with the gateway.

Example:
    server = build_server(gate, principal=Principal("local", tenant="acme"))
    async with Client(server) as client:
        await client.list_tools()
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request

from callgate import __version__
from callgate.contract import Principal
from callgate.mcp import _wire
from callgate.mcp._context import ContextHandlers
from callgate.mcp._input import ClientInputSink, ReplayGuard
from callgate.runtime.envelope import Status
from callgate.runtime.gate import Gate

__all__ = [
    "LOOPBACK_HOSTS",
    "MCP_PATH",
    "build_server",
    "default_principal",
    "run_stdio",
    "streamable_http_app",
]

MCP_PATH = "/mcp"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_SESSION_HEADER = "mcp-session-id"


def default_principal(gate: Gate, *, user: str = "local", tenant: str | None = "acme") -> Principal:
    """A local principal holding every scope the gate's tools, resources and prompts
    require (for the demo)."""
    scopes = {scope for spec in gate.tools() for scope in spec.scopes}
    for box in gate.registry.toolboxes:
        scopes.update(scope for resource in box.resources for scope in resource.scopes)
        scopes.update(scope for prompt in box.prompts for scope in prompt.scopes)
    return Principal(user, tenant=tenant, scopes=scopes)


class WireNames:
    """Tool names on the wire: full ``toolbox.tool`` names, or bare ones for the
    toolboxes served unprefixed. Recomputed when a toolbox changes."""

    def __init__(self, gate: Gate, unprefixed: Iterable[str]) -> None:
        self._gate = gate
        self._unprefixed = frozenset(unprefixed)
        unknown = self._unprefixed - {box.name for box in gate.registry.toolboxes}
        if unknown:
            raise ValueError(f"no toolbox named {sorted(unknown)} to serve unprefixed")
        self._bare: dict[str, str] = {}
        self._refresh()
        for box in gate.registry.toolboxes:
            box.on_change(lambda _box: self._refresh())

    def _refresh(self) -> None:
        bare: dict[str, str] = {}
        full_names = {spec.name for spec in self._gate.tools()}
        for spec in self._gate.tools():
            if spec.toolbox not in self._unprefixed:
                continue
            local = spec.local_name
            if local in bare or local in full_names:
                raise ValueError(
                    f"serving {spec.name!r} as {local!r} would clash with another tool"
                )
            bare[local] = spec.name
        self._bare = bare

    def wire(self, full: str) -> str:
        spec = self._gate.registry.get(full)
        if spec is not None and spec.toolbox in self._unprefixed:
            return spec.local_name
        return full

    def full(self, wire: str) -> str:
        return self._bare.get(wire, wire)


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The Streamable HTTP session id of a 2025-11-25 connection; None elsewhere."""
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get(_SESSION_HEADER)
    return None


def build_server(
    gate: Gate,
    *,
    principal: Principal,
    name: str = "callgate",
    unprefixed: Iterable[str] = (),
    session_id: str | None = None,
    request_state: RequestStateSecurity | None = None,
) -> Server[Any]:
    """An MCP server whose tools are the gate's, called as ``principal``.

    tools/list shows the tools ``principal`` may call, in name order. The
    gate is neither opened nor closed here: its owner does that around serving.

    Args:
        gate: the gate every call goes through.
        principal: the caller every request is made for (see the module docs).
        name: the server name reported to clients.
        unprefixed: toolboxes whose tools are exposed without the ``toolbox.``
            prefix (e.g. for clients that expect fixed names); the audit, policy
            and Envelopes keep the full names.
        session_id: the session of calls that carry none of their own (stdio:
            one process serves one conversation).
        request_state: how the ``requestState`` of 2026-07-28 ``input_required``
            results is sealed (the SDK's policy); by default a key made now and
            held by this process only, so with several replicas pass
            ``RequestStateSecurity(keys=[shared secret])``. States are bound to
            the server's principal.

    Resources and prompts of the toolboxes are served unprefixed, filtered by
    ``principal`` like tools; their capabilities are advertised when some
    toolbox declares any at build time. ``logging/setLevel`` is accepted and
    its level kept.

    A tool that asks the client something (``ToolContext.elicit``, ``sample``,
    ``list_roots``) does so with server-to-client requests at 2025-11-25 and
    with ``input_required`` results at 2026-07-28 (see :mod:`callgate.mcp._input`).

    Raises:
        ValueError: two exposed names (tools, resource URIs or prompt names)
            would be the same.
    """
    names = WireNames(gate, unprefixed)
    binding = f"{principal.tenant or ''}/{principal.user}"
    security = request_state or RequestStateSecurity(
        keys=[secrets.token_bytes(32)], bind_principal=lambda _ctx: binding
    )
    replay = ReplayGuard(security.ttl)
    context = ContextHandlers(gate.registry, principal)
    resources = context.has_resources
    prompts = context.has_prompts

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[_wire.tool(spec, name=names.wire(spec.name)) for spec in gate.tools(principal)]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        full = names.full(params.name)
        sink = ClientInputSink(
            ctx, logger=params.name, min_level=context.log_level, params=params, replay=replay
        )
        envelope = await gate.call(
            full,
            params.arguments or {},
            principal=principal,
            session_id=_session_id(ctx) or session_id,
            sink=sink,
        )
        if sink.input_required and envelope.status is not Status.OK:
            if sink.stopped_for == "capability":
                raise MCPError(
                    types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"{params.name} needs the client capabilities {sorted(sink.missing)}",
                    {"requiredCapabilities": sink.missing},
                )
            if sink.stopped_for == "input":
                return types.InputRequiredResult(
                    input_requests=sink.pending, request_state=sink.request_state()
                )
        return _wire.call_result(envelope, gate.registry.get(full))

    server = Server(
        name,
        version=__version__,
        title="callgate",
        instructions=(
            "Tools governed by callgate: every call is validated, authorized, "
            "checked by policy and audited. Errors say what to fix; a call that "
            "needs a human's approval returns an approval id."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=context.list_resources if resources else None,
        on_list_resource_templates=context.list_resource_templates if resources else None,
        on_read_resource=context.read_resource if resources else None,
        on_subscribe_resource=context.subscribe if resources else None,
        on_unsubscribe_resource=context.unsubscribe if resources else None,
        on_list_prompts=context.list_prompts if prompts else None,
        on_get_prompt=context.get_prompt if prompts else None,
        on_completion=context.complete if resources or prompts else None,
    )
    # Seals outgoing requestState and verifies (and unseals) what clients echo.
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    # Registered apart: the constructor's on_set_logging_level warns that logging
    # is deprecated at 2026-07-28, but 2025-11-25 clients still send it.
    server.add_request_handler(
        "logging/setLevel", types.SetLevelRequestParams, context.set_logging_level
    )
    return server


def _security(host: str) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding, for loopback and other hosts."""
    if host in LOOPBACK_HOSTS:
        return TransportSecuritySettings(
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return TransportSecuritySettings(
        allowed_hosts=[host, f"{host}:*"],
        allowed_origins=[f"http://{host}:*", f"https://{host}:*", f"https://{host}"],
    )


def streamable_http_app(server: Server[Any], *, host: str = "127.0.0.1") -> Starlette:
    """An ASGI app serving ``server`` over Streamable HTTP at ``/mcp``.

    Requests whose Host or Origin header does not name ``host`` (or loopback,
    when ``host`` is loopback) are refused, against DNS rebinding. Run the
    app's lifespan (uvicorn does) before serving requests.
    """
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=_security(host)
    )


async def run_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
