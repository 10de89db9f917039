"""Serve a Gate over MCP, on the official SDK's low-level ``Server``.

Every ``tools/call`` runs through :meth:`Gate.call`; nothing here executes a
tool. Both wire generations come from the SDK: a 2025-11-25 client does the
``initialize`` handshake, a 2026-07-28 client sends its protocol version and
capabilities in ``_meta`` on every request (``server/discover`` included).

Who is calling is a fact of each request. Over stdio (and in memory) it is the
server's fixed principal, chosen by whoever starts it (``callgate serve
--principal/--tenant/--scopes``): the local user. Over Streamable HTTP the app
may authenticate every request (``streamable_http_app(authenticate=...)``, see
:class:`callgate.mcp._http.Authentication`); each request is then served for
its own caller, everywhere: what tools/list shows, the chain's calls and their
audit, resources, prompts, completions, tasks, approvals and the sealed
``requestState`` of 2026-07-28 rounds. Without authentication an HTTP request
is served for the fixed principal, which is only safe on loopback.

Example:
    server = build_server(gate, principal=Principal("local", tenant="acme"))
    async with Client(server) as client:
        await client.list_tools()
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from callgate import __version__
from callgate.config import local_principal
from callgate.contract import Principal, ToolSpec
from callgate.mcp import _wire
from callgate.mcp._approval import Confirmation
from callgate.mcp._context import ContextHandlers
from callgate.mcp._disclosure import Disclosure
from callgate.mcp._guard import internal_errors
from callgate.mcp._http import (
    LOOPBACK_HOSTS,
    MCP_PATH,
    caller_of,
    current_caller,
    streamable_http_app,
)
from callgate.mcp._input import ClientInputSink, ReplayGuard
from callgate.mcp._names import DEFAULT_SEPARATOR, WireNames
from callgate.mcp._sessions import Sessions
from callgate.mcp.tasks import TaskRunner
from callgate.runtime.envelope import Envelope
from callgate.runtime.gate import Gate

__all__ = [
    "LOOPBACK_HOSTS",
    "MCP_PATH",
    "build_server",
    "default_principal",
    "run_stdio",
    "streamable_http_app",
]


logger = logging.getLogger(__name__)


def default_principal(gate: Gate, *, user: str = "local", tenant: str | None = "acme") -> Principal:
    """The local principal for ``gate`` as ``callgate serve`` builds it without a
    config file (:func:`callgate.config.local_principal`): ``user`` of ``tenant``
    (the demo's), holding every scope the gate's tools, resources and prompts require.

    Raises:
        InvalidIdentity: ``user`` or ``tenant`` is no identity.
    """
    return local_principal(gate, user=user, tenant=tenant)


class ToolListChanges:
    """Tells connected clients that the tool list changed (``Toolbox.on_change``).

    2025-11-25 connections get ``notifications/tools/list_changed`` on their
    standalone channel (the stdio pipe, the Streamable HTTP GET stream): each is
    remembered from its ``notifications/initialized`` until it closes. 2026-07-28
    clients open a ``subscriptions/listen`` stream (the SDK's :class:`ListenHandler`)
    and get the event there. A burst of changes sends one notification.

    Toolboxes may change from any thread; the notification is sent on the
    event loop that serves the clients.
    """

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._sessions: dict[int, ServerSession] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def initialized(
        self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams
    ) -> None:
        """``notifications/initialized``: remember the connection until it closes."""
        self._serving()
        session = ctx.session
        key = id(session)
        self._sessions[key] = session
        # The SDK gives handlers no public handle on the connection; its exit
        # stack is the one place that knows when the connection ends.
        connection = getattr(session, "_connection", None)
        if isinstance(connection, Connection):
            connection.exit_stack.callback(self._sessions.pop, key, None)

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): one stream of change events."""
        self._serving()
        return await self._listen(ctx, params)

    def _serving(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop: nothing is scheduled on it yet
            self._loop = loop
            self._scheduled = False

    def changed(self, _box: object = None) -> None:
        """A toolbox changed: notify every connected client (soon, on its loop)."""
        loop = self._loop
        if loop is None or not loop.is_running() or self._scheduled:
            return
        self._scheduled = True
        try:
            loop.call_soon_threadsafe(self._spawn)
        except RuntimeError:  # the loop closed meanwhile: nobody left to tell
            self._scheduled = False

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._notify())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self) -> None:
        self._scheduled = False
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._sessions.pop(key, None)
            except Exception:  # advisory: one broken client must not stop the others
                logger.debug("tools/list_changed not delivered", exc_info=True)


class _Server(Server[Any]):
    """The SDK's server, advertising the list changes callgate announces: tools
    only, at both protocol versions.

    At 2026-07-28 the SDK derives every ``listChanged`` flag and
    ``resources.subscribe`` from ``subscriptions/listen`` being served; prompt
    and resource changes are not published, so they are not claimed.
    """

    fixed_principal: Principal | None = None
    """Whom a request without an authenticated caller is served for (None: nobody)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return capabilities
        update: dict[str, Any] = {}
        if capabilities.prompts is not None:
            update["prompts"] = capabilities.prompts.model_copy(update={"list_changed": False})
        if capabilities.resources is not None:
            update["resources"] = capabilities.resources.model_copy(
                update={"list_changed": False, "subscribe": False}
            )
        return capabilities.model_copy(update=update)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(
    gate: Gate,
    *,
    principal: Principal | None = None,
    name: str = "callgate",
    tool_separator: str = DEFAULT_SEPARATOR,
    unprefixed: Iterable[str] = (),
    session_id: str | None = None,
    session_key: bytes | None = None,
    request_state: RequestStateSecurity | None = None,
    task_lease: timedelta = timedelta(seconds=30),
) -> Server[Any]:
    """An MCP server whose tools are the gate's, each request served for its caller.

    tools/list shows the tools the caller may call, in name order, or, where
    ``[discovery]`` says so for this client, the meta-tools that search them
    (see :mod:`callgate.mcp._disclosure`). The gate is neither opened nor
    closed here: its owner does that around serving.

    Args:
        gate: the gate every call goes through.
        principal: whom a request without an authenticated caller is served
            for: every request over stdio and in memory, and over HTTP when
            the app does not authenticate (see the module docs). None: only
            authenticated HTTP requests are served.
        name: the server name reported to clients.
        tool_separator: what joins toolbox and tool in the names clients see
            (``toolbox__tool`` by default: hosts and model APIs refuse dots;
            ``.`` serves the full names). See :mod:`callgate.mcp._names`.
        unprefixed: toolboxes whose tools are exposed without the toolbox
            prefix (e.g. for clients that expect fixed names); the audit, policy
            and Envelopes keep the full names.
        session_id: one session for every call (stdio: one process serves one
            conversation); otherwise see :mod:`callgate.mcp._sessions`.
        session_key: the secret session ids are derived with (random by
            default); give replicas of one server the same one.
        request_state: how the ``requestState`` of 2026-07-28 ``input_required``
            results is sealed (the SDK's policy: its codec, TTL and audience);
            by default a key made now and held by this process only, so with
            several replicas pass ``RequestStateSecurity(keys=[shared secret])``.
            States are always bound to the caller's tenant and user: one sealed
            for alice is refused to bob.
        task_lease: how long a running task's lease lasts (its runner renews it
            every third of that); a task of a server that died reads as failed
            once its lease has run out.

    Resources and prompts of the toolboxes are served unprefixed, filtered by
    the caller like tools, and every read or get is audited; their
    capabilities are advertised when some toolbox declares any at build time.
    ``logging/setLevel`` is accepted and its level kept.

    A tool that asks the client something (``ToolContext.elicit``, ``sample``,
    ``list_roots``) does so with server-to-client requests at 2025-11-25 and
    with ``input_required`` results at 2026-07-28 (see :mod:`callgate.mcp._input`).

    When a served toolbox gains or loses a tool, clients are told
    (``tools.listChanged``, see :class:`ToolListChanges`). A cancelled request
    (``notifications/cancelled``, or a closed 2026-07-28 response stream) is
    cancelled by the SDK; the gate records the call before the cancellation goes on.

    Texts the model reads (errors, next steps, hints, tool descriptions) name
    tools as this server shows them. An unknown tool name is a protocol error
    (``-32602``, with close matches in its message), as both protocol versions
    specify; the call is still audited. A call refused because an authenticated
    2026-07-28 HTTP caller lacks scopes is answered ``403`` with an
    ``insufficient_scope`` challenge (see :func:`callgate.mcp._wire.insufficient_scope`).

    Raises:
        ValueError: two exposed names (tools, resource URIs or prompt names)
            would be the same, a tool's name would be over 64 characters, or
            the separator is not made of ``_``, ``-`` and ``.``.
    """
    names = WireNames(gate, separator=tool_separator, unprefixed=unprefixed)
    principal_of = _principal_of(principal)
    sessions = Sessions(principal_of, key=session_key, fixed=session_id)

    def binding(ctx: ServerRequestContext[Any, Any]) -> str:
        # JSON: a tenant or user holding "/" (or no tenant next to tenant "") must
        # never seal state another principal's requests would accept.
        caller = principal_of(ctx)
        return json.dumps([caller.tenant, caller.user])

    if request_state is None:
        security = RequestStateSecurity(keys=[secrets.token_bytes(32)], bind_principal=binding)
    else:
        security = RequestStateSecurity(
            codec=request_state.codec,
            ttl=request_state.ttl,
            audience=request_state.audience,
            bind_principal=binding,
        )
    replay = ReplayGuard(security.ttl)
    context = ContextHandlers(gate, principal_of, replay=replay, session_of=sessions.of)
    # Upstream servers connect after the server is built: their resources and
    # prompts may come, so the capabilities are advertised from the start.
    resources = context.has_resources or bool(gate.upstreams())
    prompts = context.has_prompts or bool(gate.upstreams())

    # Each tool's wire form is made once and again after a toolbox changes (from
    # any thread: a form made while one changed is kept under the stale generation,
    # which is never read). Which tools a caller sees is the gate's decision.
    wired: dict[int, dict[str, types.Tool]] = {}
    generation = [0]

    def forget_listing(_box: object = None) -> None:
        generation[0] += 1
        wired.clear()

    for box in gate.toolboxes:
        box.on_change(forget_listing)

    def wire(spec: ToolSpec) -> types.Tool:
        forms = wired.setdefault(generation[0], {})
        tool = forms.get(spec.name)
        if tool is None:
            tool = forms[spec.name] = _wire.tool(
                spec,
                name=names.shown(spec.name),
                description=names.describe(spec.description),
                input_schema=names.schema(spec.input_schema),
            )
        return tool

    # Every tool, or the meta-tools: per request ([discovery], see _disclosure).
    disclosure = Disclosure(gate, wire)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=disclosure.listing(principal_of(ctx), ctx))

    def input_schema(name: str) -> Any:
        # For the SDK's x-mcp-header checks of 2026-07-28 calls, made in the
        # request's task before any handler: a tool the caller is not shown has
        # no schema here either (no probing for hidden tools).
        caller = current_caller()
        who = caller.principal if caller is not None else principal
        if who is None:
            return None
        return next(
            (tool.input_schema for tool in disclosure.everything(who) if tool.name == name), None
        )

    async def govern(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> _wire.Round:
        """Run one ``tools/call`` round through the chain (the requester's approval
        asked first where the policy lets them confirm it)."""
        caller = principal_of(ctx)
        full = names.full(params.name)
        session = sessions.of(ctx)
        if full is None:
            raise await _unknown_tool(gate, params, caller, session, names)
        sink = ClientInputSink(
            ctx, logger=params.name, min_level=context.log_level, params=params, replay=replay
        )
        confirmation = Confirmation(gate=gate, principal=caller, sink=sink)
        # The tool the approval is about: the one a callgate.call_tool call names.
        target = gate.target(params.name, params.arguments, names) or full
        answered = confirmation.answered() if sink.input_required else None
        if answered is not None:  # the human answered last round's approval question
            await confirmation.decide(answered[0], target, answered[1])

        async def run() -> Envelope:
            # Every round, and the run after an approval, passes the whole chain:
            # the approved call is authorized again before it runs.
            return await gate.call(
                params.name,
                params.arguments or {},
                principal=caller,
                session_id=session,
                sink=sink,
                names=names,
            )

        envelope = await run()
        round_ = _wire.Round(
            envelope=envelope,
            spec=gate.tool(full),
            input_required=sink.input_required,
            request_state=sink.request_state,
            challenge=_scope_challenge(ctx),
        )
        pending = await confirmation.confirmable(envelope, target)
        if pending is not None and (answered is None or pending.id != answered[0]):
            if sink.input_required:
                return confirmation.ask(round_, pending)
            answer = await confirmation.ask_now(pending)
            if answer is not None and await confirmation.decide(pending.id, target, answer) != (
                "dismissed"
            ):
                round_.envelope = await run()
        return round_

    # Task-tagged tools run as durable tasks where the client declares the extension.
    tasks = TaskRunner(
        gate,
        principal_of=principal_of,
        wire_to_full=names.full,
        full_to_wire=names.shown,
        govern=govern,
        lease=task_lease,
    )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Any:
        return await tasks.answer(ctx, params)

    changes = ToolListChanges()
    for box in gate.toolboxes:
        box.on_change(changes.changed)

    server = _Server(
        name,
        version=__version__,
        title="callgate",
        instructions=(
            "Tools governed by callgate: every call is validated, authorized, "
            "checked by policy and audited. Errors say what to fix; a call that "
            "needs a human's approval asks the user to confirm it, or returns an "
            "approval id for another person to decide."
        ),
        get_tool_input_schema=input_schema,
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
        on_subscriptions_listen=changes.listen,
    )
    server.fixed_principal = principal
    # Outermost but for the SDK's tracing: nothing a handler raises by accident
    # reaches the client as its text (a driver's SQL, say).
    server.middleware.insert(1, internal_errors)
    # Seals outgoing requestState and verifies (and unseals) what clients echo.
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    tasks.install(server)
    # Registered apart: the constructor's on_set_logging_level warns that logging
    # is deprecated at 2026-07-28, but 2025-11-25 clients still send it.
    server.add_request_handler(
        "logging/setLevel", types.SetLevelRequestParams, context.set_logging_level
    )
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, changes.initialized
    )
    return server


def _principal_of(
    fixed: Principal | None,
) -> Callable[[ServerRequestContext[Any, Any]], Principal]:
    """Whom a request is served for: its authenticated HTTP caller, else ``fixed``.

    Raises (from the function returned):
        MCPError: ``-32600`` for a request without a caller when there is no
            fixed principal.
    """

    def principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal:
        caller = caller_of(ctx.request)
        if caller is not None:
            return caller.principal
        if fixed is None:
            raise _wire.unauthenticated()
        return fixed

    return principal_of


def _scope_challenge(ctx: ServerRequestContext[Any, Any]) -> Callable[[Iterable[str]], None] | None:
    """Where a call lacking scopes may be answered ``403`` with a challenge: an
    authenticated 2026-07-28 HTTP request (its answer is one JSON response; a
    2025-11-25 answer travels on an SSE stream already answered ``200``)."""
    caller = caller_of(ctx.request)
    if caller is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    return caller.challenge


async def _unknown_tool(
    gate: Gate,
    params: types.CallToolRequestParams,
    principal: Principal,
    session: str,
    names: WireNames,
) -> MCPError:
    """The protocol error for a tool this server does not show, after the chain
    has audited the attempt and written its close matches."""
    envelope = await gate.call(
        params.name,
        params.arguments or {},
        principal=principal,
        session_id=session,
        names=names,
    )
    return _wire.unknown_tool(envelope)


async def run_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes.

    Raises:
        ValueError: ``server`` was built without a principal (stdio has no
            credentials: its caller is the principal it was built for).
    """
    if getattr(server, "fixed_principal", ...) is None:
        raise ValueError("serving over stdio needs a server built with principal=...")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
