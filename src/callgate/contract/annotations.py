"""Behaviour hints and the risk tier derived from them.

Annotations follow the MCP specification's ``ToolAnnotations``. They are claims:
they count only when the tool's source is trusted. Absent hints take the
specification's conservative defaults (not read-only, destructive, not
idempotent, open-world).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RiskTier(StrEnum):
    """How much harm a call can do, from least to most."""

    READ = "read"
    WRITE_IDEMPOTENT = "write_idempotent"
    WRITE_HIGH_RISK = "write_high_risk"


@dataclass(kw_only=True, frozen=True)
class ToolAnnotations:
    """The four MCP behaviour hints; None means the author did not say."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    def effective(self, *, trusted: bool) -> ToolAnnotations:
        """The hints to act on: the claims when trusted, else the worst case.

        A read-only tool is never destructive, and repeating it changes nothing,
        so those two follow from ``read_only`` when it is claimed by a trusted source.
        """
        if not trusted:
            return ToolAnnotations(
                read_only=False, destructive=True, idempotent=False, open_world=True
            )
        read_only = bool(self.read_only)
        destructive = False if read_only else self.destructive
        idempotent = True if read_only else self.idempotent
        return ToolAnnotations(
            read_only=read_only,
            destructive=True if destructive is None else destructive,
            idempotent=False if idempotent is None else idempotent,
            open_world=True if self.open_world is None else self.open_world,
        )

    def to_mcp(self) -> dict[str, Any]:
        """The hints the author gave, under their MCP names (absent ones omitted)."""
        out: dict[str, Any] = {}
        for attr, key in _MCP_KEYS:
            value = getattr(self, attr)
            if value is not None:
                out[key] = value
        return out


_MCP_KEYS = (
    ("read_only", "readOnlyHint"),
    ("destructive", "destructiveHint"),
    ("idempotent", "idempotentHint"),
    ("open_world", "openWorldHint"),
)


def derive_risk(effective: ToolAnnotations) -> RiskTier:
    """Risk tier of a tool from its *effective* annotations."""
    if effective.read_only:
        return RiskTier.READ
    if effective.idempotent and not effective.destructive:
        return RiskTier.WRITE_IDEMPOTENT
    return RiskTier.WRITE_HIGH_RISK
