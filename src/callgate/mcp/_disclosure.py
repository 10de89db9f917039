"""Which tools tools/list shows a client: every tool, or the meta-tools.

``[discovery]`` decides per request (:meth:`DiscoverySettings.choose`):

- a client asks explicitly with the endpoint's query parameter
  ``?tools=search`` (or ``direct``, ``auto``): a host that lets its user type a
  server URL can opt in without any other support;
- else the mode configured for its name (``[discovery.clients]``, matched on
  the ``clientInfo.name`` it sent at ``initialize`` or, at 2026-07-28, in
  each request's ``_meta``);
- else the configured mode; ``auto`` shows the meta-tools above
  ``max_tools`` tools, or when the definitions would take more than
  ``max_share`` of ``context_window``.

With search, the list is the meta-tools, the pinned tools and callgate's own
(``read_more``, ``approval_status``): a fixed list, whatever the catalogue
does, so hosts' prompt caches hold. Every tool stays callable by name (listing
is not permission, and the chain checks every call): the list decides what a
model is shown, not what it may do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

import mcp_types as types
from mcp.server import ServerRequestContext

from callgate.contract import Principal, ToolSpec
from callgate.discovery.meta import META_TOOLS, meta_tools
from callgate.discovery.settings import DiscoveryMode
from callgate.runtime.gate import Gate

__all__ = ["QUERY_PARAMETER", "Disclosure"]

QUERY_PARAMETER = "tools"
"""``/mcp?tools=search``: the client's explicit choice."""


class Disclosure:
    """Picks each request's tool list (see the module docs).

    Args:
        gate: whose tools and ``[discovery]`` settings.
        wire: a tool's wire form (cached by the server).
    """

    def __init__(self, gate: Gate, wire: Callable[[ToolSpec], types.Tool]) -> None:
        self._gate = gate
        self._wire = wire
        self._tokens: dict[tuple[int, frozenset[str], str | None], int] = {}

    def listing(
        self, caller: Principal, ctx: ServerRequestContext[Any, Any] | None
    ) -> list[types.Tool]:
        """The tools shown to ``caller`` for this request."""
        specs = self._gate.tools(caller)
        meta = set(META_TOOLS)
        direct = [spec for spec in specs if spec.name not in meta]
        discovery = self._gate.discovery
        mode = discovery.settings.choose(
            tools=sum(1 for spec in direct if spec.toolbox != "callgate"),
            tokens=self._size(caller, direct),
            requested=_requested(ctx),
            client=_client_name(ctx),
        )
        if mode == "direct":
            return [self._wire(spec) for spec in direct]
        keep = set(meta_tools(discovery)) | {spec.name for spec in discovery.pinned(caller)}
        keep |= {spec.name for spec in direct if spec.toolbox == "callgate"}
        return [self._wire(spec) for spec in specs if spec.name in keep]

    def everything(self, caller: Principal) -> list[types.Tool]:
        """Every tool ``caller`` may call, listed or not (schema lookups)."""
        return [self._wire(spec) for spec in self._gate.tools(caller)]

    def _size(self, caller: Principal, specs: list[ToolSpec]) -> int:
        # Counted once per catalogue generation and caller's reach: at 10,000
        # tools, serializing every definition costs tens of milliseconds.
        key = (self._gate.discovery.catalogue_generation, caller.scopes, caller.tenant)
        size = self._tokens.get(key)
        if size is None:
            if len(self._tokens) > 256:
                self._tokens.clear()
            text = json.dumps(
                [self._wire(spec).model_dump(mode="json", exclude_none=True) for spec in specs],
                ensure_ascii=False,
            )
            size = self._tokens[key] = len(text) // 4
        return size


def _requested(ctx: ServerRequestContext[Any, Any] | None) -> DiscoveryMode | None:
    request = getattr(ctx, "request", None) if ctx is not None else None
    params = getattr(request, "query_params", None)
    if params is None:
        return None
    value = params.get(QUERY_PARAMETER)
    return value if value in get_args(DiscoveryMode) else None


def _client_name(ctx: ServerRequestContext[Any, Any] | None) -> str | None:
    # Both generations: from initialize, or from each 2026-07-28 request's _meta
    # (the SDK makes the same client_params of it).
    params = getattr(ctx.session, "client_params", None) if ctx is not None else None
    name = getattr(getattr(params, "client_info", None), "name", None)
    return name if isinstance(name, str) else None
