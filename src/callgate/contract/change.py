"""Preview / apply: one high-risk change, declared once, served as three tools.

``toolbox.change("budget_change", ...)`` returns a builder; decorate the
function that computes the change's impact with ``.preview`` and the one that
performs it with ``.apply`` (same parameters, or a subset). The toolbox then
serves:

- ``budget_change_preview(<args>)``: runs the preview function (nothing
  changes), keeps its arguments and impact in the store and returns a
  short-lived preview id bound to the tool, the exact arguments, the caller and
  the tenant;
- ``budget_change_apply(preview_id)``: performs exactly what was previewed,
  once, however often and concurrently the id arrives;
- ``budget_change_status(preview_id)``: whether it was applied (to reconcile
  after a timeout, which is never retried).

The runtime gives the three their behaviour (``callgate.runtime.changes``);
this module only describes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack

from callgate.contract.annotations import RiskTier
from callgate.contract.function import spec_from_function
from callgate.contract.options import CHANGE_OPTIONS, ChangeOptions, ToolOptions, check_options
from callgate.contract.spec import ToolSpec
from callgate.errors import InvalidArgument, InvalidDefinition

if TYPE_CHECKING:
    from callgate.contract.toolbox import Toolbox

F = TypeVar("F", bound=Callable[..., Any])

ChangeRole = Literal["preview", "apply", "status"]


@dataclass(kw_only=True, frozen=True)
class ChangeBinding:
    """Marks a ToolSpec as one of a change's three tools."""

    role: ChangeRole
    change: str
    """The change's full base name (``ops.budget_change``)."""
    ttl: float
    """Seconds a preview id stays valid."""
    preview_tool: str
    apply_tool: str
    status_tool: str
    performer: ToolSpec | None = None
    """For ``apply``: the spec of the real apply function (its handler and trusted
    fields); the model-facing apply tool takes only the preview id."""
    previewer: ToolSpec | None = None
    """For ``apply``: the preview function, run again just before applying to check
    that the impact is still what was previewed (and approved)."""
    verifier: ToolSpec | None = None
    """For ``status``: the optional function that checks, on the live system,
    whether the change is in effect (used when an apply's outcome is unknown)."""


def _ttl_text(ttl: float) -> str:
    minutes = ttl / 60
    return f"{minutes:g} minutes" if minutes >= 1 else f"{ttl:g} seconds"


def _preview_id_stub(preview_id: str) -> Any:
    """Stands in for the signature of the apply and status tools (never called)."""
    raise NotImplementedError  # pragma: no cover


class ChangeBuilder:
    """Collects the preview and apply functions of one change."""

    def __init__(self, toolbox: Toolbox, name: str, **options: Unpack[ChangeOptions]) -> None:
        """Collect the change ``name`` of ``toolbox``; the defaults of
        :class:`ChangeOptions` are applied here.

        Raises:
            InvalidDefinition: an option that is not one of :class:`ChangeOptions`.
            InvalidArgument: ``ttl`` is not positive.
        """
        check_options(options, CHANGE_OPTIONS, f"Toolbox({toolbox.name!r}).change({name!r})")
        ttl = options.get("ttl", 600.0)
        if ttl <= 0:
            raise InvalidArgument("ttl must be positive")
        self._toolbox = toolbox
        self._name = name
        self._ttl = ttl
        self._destructive = options.get("destructive", True)
        self._open_world = options.get("open_world", False)
        self._risk = options.get("risk")
        self._title = options.get("title")
        self._timeout = options.get("timeout")
        self._scopes = frozenset(options.get("scopes", ()))
        self._version = options.get("version", "1")
        self._tags = frozenset(options.get("tags", ()))
        self._private_data = options.get("private_data", False)
        self._input_examples = tuple(options.get("input_examples", ()))
        self._preview: Callable[..., Any] | None = None
        self._apply: Callable[..., Any] | None = None
        self._verify: Callable[..., Any] | None = None
        self._registered: list[str] = []

    def preview(self, fn: F) -> F:
        """Register the function computing the change's impact (it must change nothing)."""
        self._preview = fn
        self._maybe_register()
        return fn

    def apply(self, fn: F) -> F:
        """Register the function performing the change with the previewed arguments."""
        self._apply = fn
        self._maybe_register()
        return fn

    def verify(self, fn: F) -> F:
        """Optionally register a function that tells, from the live system, whether the
        change is in effect (same parameters as apply, or a subset; returns a bool).
        The status tool uses it to reconcile an apply whose outcome is unknown."""
        self._verify = fn
        self._maybe_register()
        return fn

    def _spec(self, fn: Callable[..., Any], role: str, **options: Unpack[ToolOptions]) -> ToolSpec:
        """The spec of ``<name>_<role>`` from ``fn``, with the options every tool of
        the change takes alike."""
        shared: ToolOptions = {
            "name": f"{self._name}_{role}",
            "scopes": self._scopes,
            "version": self._version,
            "tags": self._tags,
        }
        merged: ToolOptions = {**options, **shared}
        box = self._toolbox
        return spec_from_function(fn, toolbox=box.name, trusted_source=box.trusted, **merged)

    def _maybe_register(self) -> None:
        if self._preview is None or self._apply is None:
            return
        for name in self._registered:
            self._toolbox.remove(name)
        self._registered = []
        box = self._toolbox
        base = f"{box.name}.{self._name}"
        names = {role: f"{base}_{role}" for role in ("preview", "apply", "status")}

        def binding(
            role: ChangeRole,
            performer: ToolSpec | None = None,
            verifier: ToolSpec | None = None,
            previewer: ToolSpec | None = None,
        ) -> ChangeBinding:
            return ChangeBinding(
                role=role,
                change=base,
                ttl=self._ttl,
                preview_tool=names["preview"],
                apply_tool=names["apply"],
                status_tool=names["status"],
                performer=performer,
                verifier=verifier,
                previewer=previewer,
            )

        preview = self._spec(
            self._preview,
            "preview",
            title=f"Preview: {self._title}" if self._title else None,
            read_only=True,
            open_world=False,
            timeout=self._timeout,
            private_data=self._private_data,
            input_examples=self._input_examples,
        )
        performer = self._spec(
            self._apply,
            "apply",
            destructive=self._destructive,
            idempotent=False,
            open_world=self._open_world,
            timeout=self._timeout,
        )
        _check_subset(preview, performer)
        verifier = None
        if self._verify is not None:
            verifier = self._spec(
                self._verify,
                "verify",
                read_only=True,
            )
            _check_subset(preview, verifier)
        ttl = _ttl_text(self._ttl)
        preview = dataclasses.replace(
            preview,
            description=(
                f"{preview.description}\n\nNothing is changed. Returns a preview_id, valid "
                f"for {ttl}, bound to these exact arguments; to make the change call "
                f"{names['apply']} with it."
            ),
            output_schema=_preview_output_schema(preview.output_schema),
            change=binding("preview"),
            contract_hash="",
        )
        stub = self._spec(
            _preview_id_stub,
            "apply",
            title=self._title,
            # Repeating an apply with the same id changes nothing more.
            destructive=self._destructive,
            idempotent=True,
            open_world=self._open_world,
            # The change a preview/apply pair guards is high-risk by declaration.
            risk=self._risk if self._risk is not None else RiskTier.WRITE_HIGH_RISK,
            timeout=self._timeout,
        )
        apply = dataclasses.replace(
            stub,
            description=(
                f"{performer.description}\n\nTakes only a preview_id from {names['preview']} "
                f"(valid for {ttl}) and does exactly what was previewed, once: sending the "
                "same id again returns the same result. If it times out, do not retry: "
                f"call {names['status']} with the preview_id."
            ),
            input_schema=_preview_id_schema("The preview_id returned by " + names["preview"]),
            output_schema=performer.output_schema,
            change=binding("apply", performer, previewer=preview),
            contract_hash="",
        )
        status = dataclasses.replace(
            self._spec(
                _preview_id_stub,
                "status",
                title=f"Status: {self._title}" if self._title else None,
                read_only=True,
                open_world=False,
            ),
            description=(
                f"Tell whether a change previewed with {names['preview']} was applied: "
                "not_applied (and whether the preview is still valid), applying, applied "
                "(with the result) or failed; and where an approval stands. Use it after "
                f"{names['apply']} timed out or its outcome is unknown, instead of retrying."
            ),
            input_schema=_preview_id_schema("The preview_id of the change to check"),
            change=binding("status", verifier=verifier),
            contract_hash="",
        )
        for spec in (preview, apply, status):
            box.add_spec(spec)
            self._registered.append(spec.name)


def _preview_output_schema(impact: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a preview tool returns: the id, its expiry, the impact, the next step."""
    impact_schema = dict(impact) if impact is not None else {}
    defs = impact_schema.pop("$defs", None)
    out: dict[str, Any] = {
        "type": "object",
        "properties": {
            "preview_id": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time"},
            "impact": impact_schema,
            "next_step": {"type": "string"},
            "approval": {"type": "object"},
            "policy": {"type": "object"},
        },
        "required": ["preview_id", "expires_at", "impact", "next_step"],
    }
    if defs:
        out["$defs"] = defs
    return out


def _preview_id_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"preview_id": {"type": "string", "description": description}},
        "required": ["preview_id"],
        "additionalProperties": False,
    }


def _check_subset(preview: ToolSpec, performer: ToolSpec) -> None:
    """The apply function gets the previewed arguments: it may not need others."""
    known = set(preview.input_schema.get("properties", {})) | set(preview.trusted_fields)
    wanted = set(performer.input_schema.get("properties", {})) | set(performer.trusted_fields)
    missing = sorted(wanted - known)
    if missing:
        raise InvalidDefinition(
            f"change {performer.name!r}: the apply function takes {missing}, which the "
            "preview function does not; it can only receive previewed arguments"
        )
