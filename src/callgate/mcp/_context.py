"""Resources, prompts, completion and the log level over MCP, for one principal.

Resources and prompts are read-only context, so they do not go through the
governed tool chain; visibility is still checked on every request (scopes and
tenants), and anything the principal may not see answers exactly like something
that does not exist.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext

from callgate.contract import Principal
from callgate.contract.resources import (
    Message,
    MissingPromptArgument,
    PromptSpec,
    ResourceContents,
    ResourceSpec,
)
from callgate.runtime.registry import Registry

__all__ = ["MAX_COMPLETIONS", "ContextHandlers"]

MAX_COMPLETIONS = 100
"""The most values one completion answer may carry (MCP's limit)."""

Ctx = ServerRequestContext[Any, Any]


def _not_found(what: str, key: str, data: dict[str, Any]) -> MCPError:
    # -32602 is what SEP-2164 standardizes for an unknown resource; ``data``
    # names what was asked for, never why it is hidden.
    return MCPError(types.INVALID_PARAMS, f"{what} not found: {key}", data)


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

    def __init__(self, registry: Registry, principal: Principal) -> None:
        self._registry = registry
        self._principal = principal
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
        return [spec for box in self._registry.toolboxes for spec in box.resources]

    def _all_prompts(self) -> list[PromptSpec]:
        return [spec for box in self._registry.toolboxes for spec in box.prompts]

    @property
    def has_resources(self) -> bool:
        return bool(self._all_resources())

    @property
    def has_prompts(self) -> bool:
        return bool(self._all_prompts())

    def resources(self) -> list[ResourceSpec]:
        """The resources and templates the principal may read, in URI order."""
        visible = [s for s in self._all_resources() if s.visible_to(self._principal)]
        return sorted(visible, key=lambda spec: spec.uri)

    def prompts(self) -> list[PromptSpec]:
        """The prompts the principal may get, in name order."""
        visible = [s for s in self._all_prompts() if s.visible_to(self._principal)]
        return sorted(visible, key=lambda spec: spec.name)

    def _find_resource(self, uri: str) -> tuple[ResourceSpec, dict[str, str]] | None:
        # Exact URIs win over templates that happen to match them too.
        specs = sorted(self.resources(), key=lambda spec: spec.is_template)
        for spec in specs:
            bound = spec.match(uri)
            if bound is not None:
                return spec, bound
        return None

    def _find_prompt(self, name: str) -> PromptSpec:
        for spec in self.prompts():
            if spec.name == name:
                return spec
        raise _not_found("Prompt", name, {"name": name})

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[_resource(spec) for spec in self.resources() if not spec.is_template]
        )

    async def list_resource_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[_template(spec) for spec in self.resources() if spec.is_template]
        )

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """Read one resource.

        Raises:
            MCPError: ``-32602`` with ``data.uri`` when the URI is unknown, hidden
                from the principal, or the function raises ``LookupError`` (e.g.
                a template variable naming nothing).
        """
        uri = params.uri
        found = self._find_resource(uri)
        if found is None:
            raise _not_found("Resource", uri, {"uri": uri})
        try:
            contents = await found[0].read(uri)
        except LookupError as exc:
            raise _not_found("Resource", uri, {"uri": uri}) from exc
        return types.ReadResourceResult(contents=[_contents(contents)])

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
        return types.ListPromptsResult(prompts=[_prompt(spec) for spec in self.prompts()])

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        """Render one prompt.

        Raises:
            MCPError: ``-32602`` for an unknown (or hidden) prompt or a missing
                required argument.
        """
        spec = self._find_prompt(params.name)
        try:
            messages = await spec.render(params.arguments or {})
        except MissingPromptArgument as exc:
            raise MCPError(
                types.INVALID_PARAMS, str(exc), {"name": spec.name, "missing": list(exc.missing)}
            ) from exc
        return types.GetPromptResult(
            description=spec.description or None, messages=[_message(m) for m in messages]
        )

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Values starting with what the user typed, from the argument's known values.

        Raises:
            MCPError: ``-32602`` for an unknown prompt or resource template.
        """
        ref = params.ref
        name, prefix = params.argument.name, params.argument.value
        if isinstance(ref, types.PromptReference):
            spec = self._find_prompt(ref.name)
            choices = next((a.choices for a in spec.arguments if a.name == name), ())
            return _completion(choices, prefix)
        template = next(
            (s for s in self.resources() if s.is_template and s.uri == ref.uri),
            None,
        )
        if template is None:
            raise _not_found("Resource template", ref.uri, {"uri": ref.uri})
        return _completion(template.completions.get(name, ()), prefix)

    async def set_logging_level(
        self, ctx: Ctx, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.log_level = params.level
        return types.EmptyResult()
