"""Resources, prompts, completion and the log level over MCP, for each request's principal.

Resources and prompts are read-only context, so they do not go through the
governed tool chain; visibility is still checked on every request (scopes and
tenants), and anything the principal may not see answers exactly like something
that does not exist.

Every ``resources/read`` and ``prompts/get`` is audited (:meth:`Gate.reads`, see
:mod:`callgate.runtime.reads`), found or not, before its answer leaves: who,
what, the outcome (``permission`` for a hidden one, though the client is told
"not found") and how long it took.

A function with a ``ToolContext`` parameter may ask the client, as tools do
(see :mod:`callgate.mcp._input`): with server-to-client requests at 2025-11-25,
with an ``input_required`` result and a sealed ``requestState`` at 2026-07-28.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext

from callgate.contract import Principal, ToolContext
from callgate.contract.context import ClientCannot, InputRequired
from callgate.contract.resources import (
    FunctionRunner,
    Message,
    MissingPromptArgument,
    PromptSpec,
    ResourceContents,
    ResourceSpec,
)
from callgate.errors import ErrorKind
from callgate.mcp import _wire
from callgate.mcp._input import ClientInputSink, ReplayGuard
from callgate.runtime.deadline import Deadline
from callgate.runtime.envelope import Status
from callgate.runtime.gate import Gate
from callgate.runtime.reads import Read, ReadKind
from callgate.runtime.runner import Unresponsive
from callgate.store.failures import StoreUnavailable

__all__ = ["MAX_COMPLETIONS", "ContextHandlers"]

MAX_COMPLETIONS = 100
"""The most values one completion answer may carry (MCP's limit)."""

Ctx = ServerRequestContext[Any, Any]
R = TypeVar("R")

_HIDDEN = "not visible to this principal (scopes or tenant)"


def _contents(
    contents: ResourceContents,
) -> types.TextResourceContents | types.BlobResourceContents:
    if contents.blob is not None:
        return types.BlobResourceContents(
            uri=contents.uri,
            mime_type=contents.mime_type,
            blob=base64.b64encode(contents.blob).decode("ascii"),
        )
    return types.TextResourceContents(
        uri=contents.uri, mime_type=contents.mime_type, text=contents.text or ""
    )


def _meta(read: Read) -> dict[str, Any]:
    # The audit record's id, as tools/call results carry it.
    return {"callgate/callId": read.call_id}


def _message(message: Message) -> types.PromptMessage:
    # The block's JSON is MCP's own content shape (see callgate.contract.content).
    return types.PromptMessage.model_validate(
        {"role": message.role, "content": message.content.to_json()}
    )


def _resource(spec: ResourceSpec) -> types.Resource:
    return types.Resource(
        uri=spec.uri,
        name=spec.name,
        title=spec.title,
        description=spec.description or None,
        mime_type=spec.mime_type,
    )


def _template(spec: ResourceSpec) -> types.ResourceTemplate:
    return types.ResourceTemplate(
        uri_template=spec.uri,
        name=spec.name,
        title=spec.title,
        description=spec.description or None,
        mime_type=spec.mime_type,
    )


def _prompt(spec: PromptSpec) -> types.Prompt:
    return types.Prompt(
        name=spec.name,
        title=spec.title,
        description=spec.description or None,
        arguments=[
            types.PromptArgument(
                name=arg.name, description=arg.description or None, required=arg.required
            )
            for arg in spec.arguments
        ]
        or None,
    )


def _completion(choices: Iterable[str], prefix: str) -> types.CompleteResult:
    matches = [value for value in choices if value.startswith(prefix)]
    return types.CompleteResult(
        completion=types.Completion(
            values=matches[:MAX_COMPLETIONS],
            total=len(matches),
            has_more=len(matches) > MAX_COMPLETIONS,
        )
    )


class ContextHandlers:
    """The MCP request handlers for the toolboxes' resources and prompts.

    Listings are recomputed on every request, so resources and prompts a
    toolbox adds later are served too; their order is URI or name order.

    Raises:
        ValueError: two toolboxes declare the same resource URI or prompt name
            (they are served without the toolbox prefix).
    """

    def __init__(
        self,
        gate: Gate,
        principal_of: Callable[[Ctx], Principal],
        *,
        replay: ReplayGuard,
        session_of: Callable[[Ctx], str | None] = lambda _ctx: None,
    ) -> None:
        self._gate = gate
        self._principal_of = principal_of
        self._replay = replay
        self._session_of = session_of
        self.log_level: types.LoggingLevel | None = None
        """The level the client asked for with logging/setLevel (2025-11-25); None: not set."""
        self._check_unique()

    def _check_unique(self) -> None:
        for kind, keys in (
            ("resource", [spec.uri for spec in self._all_resources()]),
            ("prompt", [spec.name for spec in self._all_prompts()]),
        ):
            duplicates = sorted({key for key in keys if keys.count(key) > 1})
            if duplicates:
                raise ValueError(f"more than one toolbox declares the {kind}(s) {duplicates}")

    def _all_resources(self) -> list[ResourceSpec]:
        return [spec for box in self._gate.toolboxes for spec in box.resources]

    def _all_prompts(self) -> list[PromptSpec]:
        return [spec for box in self._gate.toolboxes for spec in box.prompts]

    @property
    def has_resources(self) -> bool:
        return bool(self._all_resources())

    @property
    def has_prompts(self) -> bool:
        return bool(self._all_prompts())

    def resources(self, ctx: Ctx) -> list[ResourceSpec]:
        """The resources and templates the request's principal may read, in URI order."""
        principal = self._principal_of(ctx)
        visible = [s for s in self._all_resources() if s.visible_to(principal)]
        return sorted(visible, key=lambda spec: spec.uri)

    def prompts(self, ctx: Ctx) -> list[PromptSpec]:
        """The prompts the request's principal may get, in name order."""
        principal = self._principal_of(ctx)
        visible = [s for s in self._all_prompts() if s.visible_to(principal)]
        return sorted(visible, key=lambda spec: spec.name)

    def _find_resource(
        self, ctx: Ctx, uri: str, *, visible: bool = True
    ) -> tuple[ResourceSpec, dict[str, str]] | None:
        # Exact URIs win over templates that happen to match them too.
        candidates = self.resources(ctx) if visible else self._all_resources()
        for spec in sorted(candidates, key=lambda spec: spec.is_template):
            bound = spec.match(uri)
            if bound is not None:
                return spec, bound
        return None

    def _find_prompt(self, ctx: Ctx, name: str, read: Read | None = None) -> PromptSpec:
        for spec in self.prompts(ctx):
            if spec.name == name:
                return spec
        if read is not None:
            hidden = any(spec.name == name for spec in self._all_prompts())
            if hidden:
                read.refused(ErrorKind.PERMISSION, _HIDDEN)
            else:
                read.refused(ErrorKind.CONSTRUCTION, "no such prompt")
        raise _wire.not_found("Prompt", name, {"name": name})

    async def _start(
        self, ctx: Ctx, kind: ReadKind, name: str, arguments: Mapping[str, Any] | None = None
    ) -> Read:
        reads = await self._gate.reads()
        return reads.start(
            kind,
            name,
            principal=self._principal_of(ctx),
            session_id=self._session_of(ctx),
            arguments=arguments,
        )

    async def _audited(self, read: Read, body: Callable[[], Awaitable[R]]) -> R:
        """Run ``body`` and audit it: its answer (or error) leaves only once recorded.

        Raises:
            MCPError: what ``body`` raised, or ``-32603`` naming the record for a
                failure of the function itself (no internals reach the client).
        """
        try:
            result = await body()
        except anyio.get_cancelled_exc_class():
            read.outcome = ErrorKind.TRANSIENT
            read.detail["cancelled"] = True
            # Shielded: the record is written before the cancellation goes on.
            with anyio.CancelScope(shield=True):
                await self._record(read)
            raise
        except MCPError:
            read.outcome = read.outcome or ErrorKind.CONSTRUCTION
            await self._record(read)
            raise
        except Exception as exc:
            read.outcome = ErrorKind.UNRECOVERABLE
            read.detail["internal_error"] = f"{type(exc).__name__}: {exc}"[:2000]
            await self._record(read)
            raise _wire.internal(
                f"The server failed to read this {read.kind} (reference {read.call_id})."
            ) from exc
        read.outcome = read.outcome or Status.OK
        await self._record(read)
        return result

    async def _record(self, read: Read) -> None:
        """Audit the read; no read is served unaudited.

        Raises:
            MCPError: ``-32603`` saying to try again when the store does not
                answer (the record is kept and written once it does).
        """
        try:
            await (await self._gate.reads()).record(read)
        except StoreUnavailable:
            raise _wire.internal(
                f"The server could not record this {read.kind} read just now; nothing was "
                f"changed. Try again in a moment (reference {read.call_id})."
            ) from None

    async def _run(
        self,
        ctx: Ctx,
        params: types.InputResponseRequestParams,
        read: Read,
        key: str,
        wants_context: bool,
        run: Callable[[ToolContext | None, FunctionRunner], Awaitable[R]],
    ) -> R | types.InputRequiredResult:
        """Run a resource or prompt function within the gate's default timeout,
        with a ``ToolContext`` backed by the client when it declares one.

        The function runs on the gate's runner, as tools do: under ``key``'s caps
        (threads, stray work), answered at the deadline whatever it does, its
        late end recorded as a ``late`` audit record of the read.

        Raises:
            MCPError: ``-32602`` for a request state used before, ``-32021`` when
                the client lacks a capability the function needed, ``-32603`` when
                the function timed out or earlier reads of it are still running.
        """
        reads = await self._gate.reads()
        timeout = reads.timeout
        on_runner = reads.runner(read, key, Deadline(timeout))
        context: ToolContext | None = None
        sink: ClientInputSink | None = None
        if wants_context:
            try:
                sink = ClientInputSink(
                    ctx,
                    logger=read.name,
                    min_level=self.log_level,
                    params=params,
                    replay=self._replay,
                )
            except MCPError:
                read.refused(ErrorKind.CONSTRUCTION, "invalid or replayed requestState")
                raise
            context = ToolContext(
                call_id=read.call_id,
                trace_id=read.call_id,
                tool=f"{read.kind}:{read.name}",
                principal=self._principal_of(ctx),
                session_id=self._session_of(ctx),
                idempotency_key=None,
                deadline=self._gate.clock.now() + timedelta(seconds=timeout),
                attempt=1,
                sink=sink,
            )
        try:
            return await run(context, on_runner)
        except TimeoutError as exc:
            read.refused(ErrorKind.TRANSIENT, f"timed out after {timeout:g} s")
            raise _wire.internal(
                f"Reading this {read.kind} took too long; try again later."
            ) from exc
        except Unresponsive as exc:
            read.refused(ErrorKind.TRANSIENT, f"not responding: {exc.stuck} earlier reads run")
            raise _wire.internal(
                f"This {read.kind} is not responding ({exc.stuck} earlier reads are still "
                "running); try again later."
            ) from exc
        except InputRequired as exc:
            if sink is None or not exc.requests:
                raise
            read.outcome = Status.PENDING_INPUT
            read.detail["asked"] = sorted(exc.requests)
            return types.InputRequiredResult.model_validate(
                {
                    "resultType": "input_required",
                    "inputRequests": dict(exc.requests),
                    "requestState": sink.request_state(),
                    "_meta": _meta(read),
                }
            )
        except ClientCannot as exc:
            read.refused(ErrorKind.CONSTRUCTION, f"client lacks {exc.capability}")
            raise _wire.needs_capabilities(read.name, {exc.capability: {}}) from exc

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[_resource(spec) for spec in self.resources(ctx) if not spec.is_template]
        )

    async def list_resource_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[_template(spec) for spec in self.resources(ctx) if spec.is_template]
        )

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read one resource, audited: every content its function gave, in order.

        Raises:
            MCPError: ``-32602`` with ``data.uri`` when the URI is unknown, hidden
                from the principal, or the function raises ``LookupError`` (e.g.
                a template variable naming nothing); see also :meth:`_run`.
        """
        uri = params.uri
        read = await self._start(ctx, "resource", uri)

        async def body() -> types.ReadResourceResult | types.InputRequiredResult:
            found = self._find_resource(ctx, uri)
            if found is None:
                if self._find_resource(ctx, uri, visible=False) is not None:
                    read.refused(ErrorKind.PERMISSION, _HIDDEN)
                else:
                    read.refused(ErrorKind.CONSTRUCTION, "no such resource")
                raise _wire.not_found("Resource", uri, {"uri": uri})
            spec, bound = found
            read.arguments = bound
            read.allow()
            read.detail.update(toolbox=spec.toolbox, resource=spec.uri)
            try:
                contents = await self._run(
                    ctx,
                    params,
                    read,
                    f"resource:{spec.uri}",
                    spec.context_param is not None,
                    lambda context, run: spec.read(uri, context, run=run),
                )
            except LookupError as exc:
                read.refused(ErrorKind.CONSTRUCTION, f"the function found nothing: {exc}"[:200])
                raise _wire.not_found("Resource", uri, {"uri": uri}) from exc
            if isinstance(contents, types.InputRequiredResult):
                return contents
            return types.ReadResourceResult(
                contents=[_contents(item) for item in contents], _meta=_meta(read)
            )

        return await self._audited(read, body)

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        # Resources here are computed on read; there are no update events to send yet.
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Ctx, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        return types.EmptyResult()

    async def list_prompts(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[_prompt(spec) for spec in self.prompts(ctx)])

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Render one prompt, audited.

        Raises:
            MCPError: ``-32602`` for an unknown (or hidden) prompt or a missing
                required argument; see also :meth:`_run`.
        """
        arguments = params.arguments or {}
        read = await self._start(ctx, "prompt", params.name, arguments=arguments)

        async def body() -> types.GetPromptResult | types.InputRequiredResult:
            spec = self._find_prompt(ctx, params.name, read)
            read.allow()
            read.detail["toolbox"] = spec.toolbox
            try:
                messages = await self._run(
                    ctx,
                    params,
                    read,
                    f"prompt:{spec.name}",
                    spec.context_param is not None,
                    lambda context, run: spec.render(arguments, context, run=run),
                )
            except MissingPromptArgument as exc:
                read.refused(ErrorKind.CONSTRUCTION, str(exc))
                raise _wire.invalid_params(
                    str(exc), {"name": spec.name, "missing": list(exc.missing)}
                ) from exc
            if isinstance(messages, types.InputRequiredResult):
                return messages
            return types.GetPromptResult(
                description=spec.description or None,
                messages=[_message(m) for m in messages],
                _meta=_meta(read),
            )

        return await self._audited(read, body)

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Values starting with what the user typed, from the argument's known values.

        Raises:
            MCPError: ``-32602`` for an unknown prompt or resource template.
        """
        ref = params.ref
        name, prefix = params.argument.name, params.argument.value
        if isinstance(ref, types.PromptReference):
            spec = self._find_prompt(ctx, ref.name)
            choices = next((a.choices for a in spec.arguments if a.name == name), ())
            return _completion(choices, prefix)
        template = next(
            (s for s in self.resources(ctx) if s.is_template and s.uri == ref.uri),
            None,
        )
        if template is None:
            raise _wire.not_found("Resource template", ref.uri, {"uri": ref.uri})
        return _completion(template.completions.get(name, ()), prefix)

    async def set_logging_level(
        self, ctx: Ctx, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.log_level = params.level
        return types.EmptyResult()
