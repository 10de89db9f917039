"""What an upstream serves (tools, resources, templates, prompts), as one listing:
fetched page by page, and kept as JSON in the store between runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pydantic
from mcp import Client, MCPError

__all__ = ["MAX_PAGES", "Listing", "fetch_listing"]

MAX_PAGES = 100
"""Pages of a listing read at most (a paginator that never ends cannot hang us)."""


@dataclass(kw_only=True, frozen=True)
class Listing:
    """What an upstream serves, as last listed."""

    tools: list[types.Tool]
    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def dump(items: list[Any]) -> list[Any]:
            return [
                item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items
            ]

        return {
            "tools": dump(self.tools),
            "resources": dump(self.resources),
            "templates": dump(self.templates),
            "prompts": dump(self.prompts),
        }

    @classmethod
    def from_json(cls, data: Any) -> Listing:
        """The listing kept by :meth:`to_json`.

        Raises:
            pydantic.ValidationError: it is not one (kept by another SDK version, say).
        """
        return cls(
            tools=[types.Tool.model_validate(item) for item in data["tools"]],
            resources=[types.Resource.model_validate(item) for item in data["resources"]],
            templates=[types.ResourceTemplate.model_validate(item) for item in data["templates"]],
            prompts=[types.Prompt.model_validate(item) for item in data["prompts"]],
        )


async def fetch_listing(client: Client, *, timeout: float, pinned: bool = False) -> Listing:
    """Everything ``client``'s server lists, each page within ``timeout`` seconds;
    resources and prompts where it declares them.

    ``pinned``: the client adopted a 2026-07-28 version without asking the server
    (no ``server/discover``), so it knows none of the server's capabilities. Then
    resources and prompts are asked for anyway, and a server that answers with an
    error or not with a listing has none.
    """
    capabilities = client.server_capabilities
    tools = await _pages(lambda c: client.list_tools(cursor=c, cache_mode="bypass"), timeout)
    resources: list[Any] = []
    templates: list[Any] = []
    prompts: list[Any] = []
    if capabilities.resources is not None or pinned:
        resources = await _optional(
            lambda c: client.list_resources(cursor=c, cache_mode="bypass"), timeout, pinned
        )
        templates = await _optional(
            lambda c: client.list_resource_templates(cursor=c, cache_mode="bypass"),
            timeout,
            pinned,
        )
    if capabilities.prompts is not None or pinned:
        prompts = await _optional(
            lambda c: client.list_prompts(cursor=c, cache_mode="bypass"), timeout, pinned
        )
    return Listing(tools=tools, resources=resources, templates=templates, prompts=prompts)


async def _optional(
    fetch: Callable[[str | None], Awaitable[Any]], timeout: float, probing: bool
) -> list[Any]:
    """:func:`_pages`; while ``probing`` (capabilities unknown), a listing the server
    refuses or does not answer as one is an empty one."""
    if not probing:
        return await _pages(fetch, timeout)
    try:
        return await _pages(fetch, timeout)
    except (MCPError, pydantic.ValidationError):
        return []


async def _pages(fetch: Callable[[str | None], Awaitable[Any]], timeout: float) -> list[Any]:
    """Every item of a paginated listing, a bounded number of pages."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        with anyio.fail_after(timeout):
            page = await fetch(cursor)
        for key in ("tools", "resources", "resource_templates", "prompts"):
            if hasattr(page, key):
                items.extend(getattr(page, key))
                break
        cursor = page.next_cursor
        if not cursor:
            break
    return items
