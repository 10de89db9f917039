"""Who is calling, and what a tool may learn about the call it serves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, TypeAlias, TypeVar


@dataclass(kw_only=True, frozen=True)
class Principal:
    """The authenticated caller on whose behalf a tool runs.

    Set by the server from authentication, never by the model. ``attributes``
    holds further trusted values (project, locale, ...) that tools can receive
    through trusted fields.
    """

    user: str
    tenant: str | None = None
    scopes: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        user: str,
        tenant: str | None = None,
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "scopes", frozenset(scopes))
        object.__setattr__(self, "roles", frozenset(roles))
        object.__setattr__(self, "attributes", dict(attributes or {}))

    def as_cel(self) -> dict[str, Any]:
        """The principal as policy conditions see it."""
        return {
            "user": self.user,
            "tenant": self.tenant or "",
            "scopes": sorted(self.scopes),
            "roles": sorted(self.roles),
            "attributes": dict(self.attributes),
        }


@dataclass(kw_only=True, frozen=True)
class TrustedField:
    """Marks a parameter the server fills in; the model never sees or sets it.

    ``source`` names where the value comes from (``tenant``, ``user``,
    ``scopes``, ``session_id`` or a key of ``Principal.attributes`` / the gate's
    context). By default the parameter's own name is used, with ``tenant_id``
    and ``user_id`` meaning the principal's tenant and user.
    """

    source: str | None = None


T = TypeVar("T")

Trusted: TypeAlias = Annotated[T, TrustedField()]
"""``tenant_id: Trusted[str]``: a trusted field filled from the principal."""


@dataclass(kw_only=True, frozen=True)
class ToolContext:
    """What a tool function receives if it declares a ``ToolContext`` parameter."""

    call_id: str
    trace_id: str
    tool: str
    principal: Principal
    session_id: str | None
    idempotency_key: str | None
    deadline: datetime
    """When the gate will stop waiting for the tool (UTC)."""
    attempt: int
    """1 on the first try, higher on retries."""
