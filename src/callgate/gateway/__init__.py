"""The gateway: other people's MCP servers behind callgate's governed chain.

Each ``[[upstreams]]`` table of the config (:mod:`callgate.gateway.settings`)
becomes an :class:`~callgate.gateway.proxy.UpstreamToolbox`: the upstream's tools,
namespaced under its name, kept in step with it by a supervised connection
(:mod:`callgate.gateway.connection`), every call governed like a local tool's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from callgate.gateway.settings import UpstreamSettings, resolve

if TYPE_CHECKING:  # the MCP SDK is imported only when a config has upstreams
    from callgate.gateway.proxy import UpstreamToolbox

__all__ = ["upstream_toolboxes"]


def upstream_toolboxes(
    upstreams: Iterable[UpstreamSettings],
    label: str,
    environ: Mapping[str, str] | None = None,
) -> list[UpstreamToolbox]:
    """One toolbox per upstream, not yet connected (the gate opens them).

    Raises:
        UpstreamConfigError: an environment variable an upstream needs is not set.
    """
    upstreams = list(upstreams)
    if not upstreams:
        return []
    from callgate.gateway.proxy import UpstreamToolbox

    return [UpstreamToolbox(up, resolve(up, label, environ)) for up in upstreams]
