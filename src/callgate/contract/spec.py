"""ToolSpec: everything callgate knows about one tool."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from callgate.contract.annotations import RiskTier, ToolAnnotations, derive_risk
from callgate.contract.context import ToolContext, TrustedField
from callgate.contract.naming import check_tool_name
from callgate.errors import InvalidArgument

if TYPE_CHECKING:
    from callgate.contract.change import ChangeBinding

ConciseView = Callable[[Any], Any]
"""Turns a tool's detailed (JSON-able) result into its concise form."""


class ToolHandler(Protocol):
    """How a tool is actually run, once the gate has decided it may run.

    ``prepare`` turns schema-valid model arguments into the handler's own form
    plus their JSON form with defaults filled in (raising
    ``pydantic.ValidationError`` or ``ConstructionError`` for what the JSON
    Schema cannot express); ``invoke`` runs the tool with those plus the
    injected trusted values and returns a JSON-able payload. A sync handler's
    ``invoke`` is run in a worker thread.
    """

    @property
    def is_async(self) -> bool: ...

    def prepare(self, arguments: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]: ...

    def invoke(
        self, prepared: Any, injected: Mapping[str, Any], ctx: ToolContext
    ) -> Awaitable[Any] | Any: ...


@dataclass(kw_only=True, frozen=True)
class ToolSpec:
    """A tool's contract.

    ``input_schema`` is the model-facing JSON Schema (Draft 2020-12): trusted
    fields are absent from it. ``contract_hash`` covers name, title,
    description, both schemas and the declared annotations, so any change a model
    or a reviewer would notice changes the hash.
    """

    name: str
    toolbox: str
    title: str | None
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    annotations: ToolAnnotations
    trusted_source: bool
    scopes: frozenset[str]
    handler: ToolHandler
    trusted_fields: Mapping[str, TrustedField] = field(default_factory=dict)
    input_examples: tuple[Mapping[str, Any], ...] = ()
    risk_override: RiskTier | None = None
    timeout: float | None = None
    version: str = "1"
    concise: ConciseView | None = None
    private_data: bool = False
    """The tool returns the user's private data (used by the trifecta guard)."""
    tags: frozenset[str] = frozenset()
    tenants: frozenset[str] | None = None
    """Tenants allowed to call the tool; None allows every tenant."""
    change: ChangeBinding | None = None
    """Set on the preview, apply and status tools of a declared change."""
    annotations_vouched: bool | None = None
    """Whether the annotations count, when someone other than the source vouches
    for them (a gateway operator giving an upstream tool a risk tier); None: they
    count when the source is trusted. Results stay as trusted as the source."""
    contract_hash: str = ""

    def __post_init__(self) -> None:
        check_tool_name(self.name)
        if self.timeout is not None and self.timeout <= 0:
            raise InvalidArgument(f"tool {self.name!r}: timeout must be positive")
        if not self.contract_hash:
            object.__setattr__(self, "contract_hash", self._compute_hash())

    @property
    def local_name(self) -> str:
        return self.name.removeprefix(f"{self.toolbox}.")

    @cached_property
    def effective_annotations(self) -> ToolAnnotations:
        """Annotations to act on: the claims if the source is trusted, else the worst case."""
        return self.annotations.effective(trusted=self.annotations_believed)

    @property
    def annotations_believed(self) -> bool:
        """Whether the annotations are acted on (see ``annotations_vouched``)."""
        if self.annotations_vouched is not None:
            return self.annotations_vouched
        return self.trusted_source

    @cached_property
    def risk(self) -> RiskTier:
        if self.risk_override is not None:
            return self.risk_override
        return derive_risk(self.effective_annotations)

    @property
    def retry_safe(self) -> bool:
        """Whether running it twice is harmless (read-only or idempotent)."""
        if self.change is not None and self.change.role == "apply":
            # Its idempotence comes from the preview id, claimed once per id: a
            # retry inside the same call would run the apply function twice.
            return False
        eff = self.effective_annotations
        return bool(eff.read_only or eff.idempotent)

    @property
    def summary(self) -> str:
        """The description's first line."""
        return self.description.strip().splitlines()[0] if self.description.strip() else ""

    def _compute_hash(self) -> str:
        body = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations.to_mcp(),
        }
        blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        """The JSON form used by ``callgate tools --json`` and later by MCP."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "risk": self.risk.value,
            "scopes": sorted(self.scopes),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations.to_mcp(),
            "trusted_source": self.trusted_source,
            "version": self.version,
            "contract_hash": self.contract_hash,
            "timeout": self.timeout,
            "input_examples": list(self.input_examples),
        }
