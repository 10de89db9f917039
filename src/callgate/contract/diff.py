"""Contract diff: what changed between two versions of a tool catalogue, and
whether what was written against the old one still works with the new one.

A catalogue is what ``callgate contract snapshot`` writes (each tool as
:meth:`ToolSpec.describe` gives it, under a small header), what ``callgate
tools --json`` prints, or an MCP ``tools/list`` result (or its bare list of
tools). :func:`read_catalogue` reads each into one shape, :class:`ToolContract`.

Every difference is a :class:`Change` under a stable rule id (:data:`RULES`),
of one severity:

- ``breaking``: a call that passed may now fail, a result may now hold what its
  consumers never saw, or the gate may now stop or park calls it let through;
- ``compatible``: everything that worked still works;
- ``note``: text the model reads changed (a description, a title, a default).

Inputs and outputs are judged in opposite directions: a parameter that accepts
fewer values breaks callers, a result that may hold more kinds of value breaks
its consumers.

Risk and scopes are compared only when both sides state them; a ``tools/list``
states neither. A risk tier is never derived from a ``tools/list``'s
annotations: they are the claims of an upstream nobody vouched for, which the
gate takes as the worst case (every such tool is ``write_high_risk``, so a
derived tier could never change). The hints themselves are compared as
declared, with the MCP defaults for absent ones, so a tool that stops claiming
``readOnlyHint`` is reported all the same.

Local ``$ref``s (``#/$defs/...``) are inlined, each at most once along a path,
so a recursive schema is compared down to its first repetition. An optional's
``anyOf [X, {"type": "null"}]`` is read as X that may be null. Other
composition (``anyOf``, ``oneOf``, ``allOf``, ``not``, ``prefixItems``, a
``$ref`` to another document) is not compared in detail: when it changed, the
change is reported as breaking, so that CI stops and a person looks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from callgate.contract._schema_diff import schema_changes
from callgate.contract.annotations import RiskTier, ToolAnnotations
from callgate.errors import InvalidArgument

__all__ = [
    "RULES",
    "Change",
    "ContractDiff",
    "Severity",
    "ToolContract",
    "ToolDiff",
    "diff_catalogues",
    "read_catalogue",
]

SNAPSHOT_KEY = "callgate_contract_snapshot"
"""The header key of a snapshot file; its value is the format's version (1)."""


class Severity(StrEnum):
    """What a change means to what was written against the old contract."""

    BREAKING = "breaking"
    COMPATIBLE = "compatible"
    NOTE = "note"


_B, _C, _N = Severity.BREAKING, Severity.COMPATIBLE, Severity.NOTE
_REVIEW = "callgate does not compare it in detail: review it"
_FAILS = "calls that passed validation may now fail"
_PASSES = "every call that passed still passes"
_SURPRISES = "consumers may now receive values they never did"
_FITS = "every result still fits what consumers expected"

RULES: dict[str, tuple[Severity, str]] = {
    # the tool
    "tool-removed": (_B, "calls to it now fail as calls to an unknown tool"),
    "tool-added": (_C, "existing calls are unaffected"),
    "risk-raised": (_B, "policies keyed on risk may now ask for approval or deny its calls"),
    "risk-lowered": (_C, "it is now held to less than before"),
    "scope-added": (_B, "callers without the new scope are now refused"),
    "scope-removed": (_C, "callers need fewer scopes"),
    "read-only-dropped": (_B, "it may now change state where callers expected a read"),
    "read-only-added": (_C, "it now claims to change nothing"),
    "destructive-added": (_B, "it may now destroy or overwrite data"),
    "destructive-dropped": (_C, "it now claims to only add"),
    "idempotent-dropped": (_B, "repeating a call is no longer claimed harmless: it is not retried"),
    "idempotent-added": (_C, "repeating a call is now claimed harmless"),
    "open-world-added": (_B, "it now reaches outside systems: data sent to it may leave"),
    "open-world-dropped": (_C, "it now claims to stay inside"),
    "title-changed": (_N, "the model and the operators read it"),
    "description-changed": (_N, "the model reads it to choose and fill the tool"),
    # its input: fewer accepted values break callers
    "param-required-added": (_B, "calls without it now fail validation"),
    "param-added": (_C, "existing calls still pass"),
    "param-removed": (_B, "the object takes no other fields: calls sending it now fail"),
    "param-removed-open": (_C, "the object takes other fields: calls sending it still pass"),
    "param-made-required": (_B, "calls without it now fail validation"),
    "param-made-optional": (_C, "calls without it now pass too"),
    "type-narrowed": (_B, _FAILS),
    "type-widened": (_C, _PASSES),
    "type-changed": (_B, _FAILS),
    "enum-narrowed": (_B, "calls sending a value it lost now fail validation"),
    "enum-widened": (_C, _PASSES),
    "const-added": (_B, _FAILS),
    "const-changed": (_B, _FAILS),
    "const-removed": (_C, _PASSES),
    "bound-tightened": (_B, _FAILS),
    "bound-loosened": (_C, _PASSES),
    "pattern-added": (_B, _FAILS),
    "pattern-changed": (_B, "the new pattern may refuse values the old one accepted"),
    "pattern-removed": (_C, _PASSES),
    "object-closed": (_B, "calls sending fields beyond its properties now fail"),
    "object-opened": (_C, _PASSES),
    "default-changed": (_N, "a call that leaves it out now gets another value"),
    "format-changed": (_N, "a hint to the model; the gate does not enforce formats"),
    "composition-changed": (_B, _REVIEW),
    # its output: more possible values break consumers
    "output-schema-added": (_C, "results now state their structure"),
    "output-schema-removed": (_B, "results no longer state a structure consumers can rely on"),
    "output-field-added": (_C, "consumers that do not know it still work"),
    "output-field-removed": (_B, "consumers reading it now find nothing"),
    "output-field-made-optional": (_B, "results may now lack it"),
    "output-field-made-required": (_C, "results now always have it"),
    "output-type-narrowed": (_C, _FITS),
    "output-type-widened": (_B, _SURPRISES),
    "output-type-changed": (_B, _SURPRISES),
    "output-enum-narrowed": (_C, _FITS),
    "output-enum-widened": (_B, _SURPRISES),
    "output-const-added": (_C, _FITS),
    "output-const-changed": (_B, _SURPRISES),
    "output-const-removed": (_B, _SURPRISES),
    "output-bound-tightened": (_C, _FITS),
    "output-bound-loosened": (_B, _SURPRISES),
    "output-pattern-added": (_C, _FITS),
    "output-pattern-changed": (_B, _SURPRISES),
    "output-pattern-removed": (_B, _SURPRISES),
    "output-composition-changed": (_B, _REVIEW),
}
"""Every rule: its id, its severity and why the change matters, in one line."""


@dataclass(kw_only=True, frozen=True)
class Change:
    """One difference in one tool's contract."""

    rule: str
    path: str
    """Where: "" for the tool itself (or its whole input or result), else the
    parameter or result field (``budget.amount``, ``items[]``, ``items[].sku``)."""
    what: str
    """What changed, e.g. ``enum no longer has 'paused'``."""

    @property
    def severity(self) -> Severity:
        return RULES[self.rule][0]

    @property
    def message(self) -> str:
        """What changed and why it matters, in one line."""
        return f"{self.what}: {RULES[self.rule][1]}"

    def to_json(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.path,
            "message": self.message,
        }


ToolStatus = Literal["added", "removed", "changed"]


@dataclass(kw_only=True, frozen=True)
class ToolDiff:
    """The changes of one tool, breaking ones first."""

    name: str
    status: ToolStatus
    changes: tuple[Change, ...]

    @property
    def breaking(self) -> bool:
        return any(c.severity is Severity.BREAKING for c in self.changes)

    def count(self, severity: Severity) -> int:
        return sum(c.severity is severity for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "breaking": self.breaking,
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(kw_only=True, frozen=True)
class ContractDiff:
    """The comparison of two catalogues: the tools that changed (those with a
    breaking change first, then by name) and the names of those that did not."""

    tools: tuple[ToolDiff, ...]
    unchanged: tuple[str, ...]

    @property
    def breaking(self) -> bool:
        return any(t.breaking for t in self.tools)

    @property
    def counts(self) -> dict[str, int]:
        """How many changes of each severity."""
        return {s.value: sum(t.count(s) for t in self.tools) for s in Severity}

    def to_json(self) -> dict[str, Any]:
        return {
            "breaking": self.breaking,
            "counts": self.counts,
            "tools": [t.to_json() for t in self.tools],
            "unchanged": list(self.unchanged),
        }


# Reading a catalogue -------------------------------------------------------------
@dataclass(kw_only=True, frozen=True)
class ToolContract:
    """What the comparison looks at of one tool; None: the catalogue does not say."""

    name: str
    title: str | None
    description: str
    risk: RiskTier | None
    scopes: frozenset[str] | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    annotations: ToolAnnotations


_HINTS = (
    ("read_only", "readOnlyHint"),
    ("destructive", "destructiveHint"),
    ("idempotent", "idempotentHint"),
    ("open_world", "openWorldHint"),
)


def read_catalogue(data: Any) -> dict[str, ToolContract]:
    """The tools of a snapshot, of ``callgate tools --json``'s list or of an MCP
    ``tools/list`` result (``{"tools": [...]}``, its JSON-RPC response, or the
    bare list), by name.

    Raises:
        InvalidArgument: ``data`` is none of these, a tool has no name or a
            malformed field, or two tools share a name.
    """
    if isinstance(data, Mapping) and isinstance(data.get("result"), Mapping):
        data = data["result"]  # a JSON-RPC response to tools/list
    if isinstance(data, Mapping):
        version = data.get(SNAPSHOT_KEY)
        if version is not None and version != 1:
            raise InvalidArgument(f"snapshot format {version!r} is not supported (only 1)")
        if "tools" not in data:
            raise InvalidArgument('expected a "tools" list, a snapshot or a list of tools')
        data = data["tools"]
    if not isinstance(data, list):
        raise InvalidArgument(f"expected a list of tools, not {type(data).__name__}")
    tools: dict[str, ToolContract] = {}
    for index, entry in enumerate(data):
        contract = _read_tool(entry, index)
        if contract.name in tools:
            raise InvalidArgument(f"tool {contract.name!r} is listed twice")
        tools[contract.name] = contract
    return tools


def _read_tool(entry: Any, index: int) -> ToolContract:
    if not isinstance(entry, Mapping):
        raise InvalidArgument(f"tools[{index}]: expected an object, not {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"tools[{index}]: no name")
    where = f"tool {name!r}"
    mcp = "inputSchema" in entry or "outputSchema" in entry
    input_schema = entry.get("inputSchema" if mcp else "input_schema", {"type": "object"})
    output_schema = entry.get("outputSchema" if mcp else "output_schema")
    if not isinstance(input_schema, Mapping):
        raise InvalidArgument(f"{where}: the input schema is not an object")
    if output_schema is not None and not isinstance(output_schema, Mapping):
        raise InvalidArgument(f"{where}: the output schema is not an object")
    hints = entry.get("annotations") or {}
    if not isinstance(hints, Mapping):
        raise InvalidArgument(f"{where}: annotations is not an object")
    claimed: dict[str, bool] = {}
    for attr, key in _HINTS:
        value = hints.get(key)
        if value is not None and not isinstance(value, bool):
            raise InvalidArgument(f"{where}: annotations.{key} is not true or false")
        if value is not None:
            claimed[attr] = value
    risk = entry.get("risk")
    if risk is not None and risk not in [tier.value for tier in RiskTier]:
        raise InvalidArgument(f"{where}: risk {risk!r} is not one of {', '.join(RiskTier)}")
    scopes = entry.get("scopes")
    if scopes is not None and not (
        isinstance(scopes, list) and all(isinstance(s, str) for s in scopes)
    ):
        raise InvalidArgument(f"{where}: scopes is not a list of strings")
    title = entry.get("title") or hints.get("title")
    description = entry.get("description") or ""
    return ToolContract(
        name=name,
        title=title if isinstance(title, str) else None,
        description=description if isinstance(description, str) else str(description),
        risk=RiskTier(risk) if risk is not None else None,
        scopes=frozenset(scopes) if scopes is not None else None,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=ToolAnnotations(**claimed),
    )


# Comparing -------------------------------------------------------------------------
def diff_catalogues(
    before: Mapping[str, ToolContract], after: Mapping[str, ToolContract]
) -> ContractDiff:
    """Compare two catalogues read by :func:`read_catalogue`."""
    diffs: list[ToolDiff] = []
    unchanged: list[str] = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            diffs.append(
                _one(name, "removed", [Change(rule="tool-removed", path="", what="removed")])
            )
        elif name not in before:
            diffs.append(_one(name, "added", [Change(rule="tool-added", path="", what="new tool")]))
        else:
            changes = list(_tool_changes(before[name], after[name]))
            if changes:
                diffs.append(_one(name, "changed", changes))
            else:
                unchanged.append(name)
    diffs.sort(key=lambda d: (not d.breaking, d.name))
    return ContractDiff(tools=tuple(diffs), unchanged=tuple(unchanged))


_ORDER = {Severity.BREAKING: 0, Severity.COMPATIBLE: 1, Severity.NOTE: 2}


def _one(name: str, status: ToolStatus, changes: list[Change]) -> ToolDiff:
    # Stable sort: within a severity, the changes stay in schema order.
    ordered = sorted(changes, key=lambda c: _ORDER[c.severity])
    return ToolDiff(name=name, status=status, changes=tuple(ordered))


def _tool_changes(old: ToolContract, new: ToolContract) -> Iterator[Change]:
    tiers = list(RiskTier)
    if old.risk is not None and new.risk is not None and old.risk != new.risk:
        rule = "risk-raised" if tiers.index(new.risk) > tiers.index(old.risk) else "risk-lowered"
        yield Change(rule=rule, path="", what=f"risk {old.risk.value} -> {new.risk.value}")
    if old.scopes is not None and new.scopes is not None:
        if added := sorted(new.scopes - old.scopes):
            yield Change(rule="scope-added", path="", what=f"now needs {', '.join(added)}")
        if dropped := sorted(old.scopes - new.scopes):
            yield Change(
                rule="scope-removed", path="", what=f"no longer needs {', '.join(dropped)}"
            )
    yield from _hint_changes(old.annotations, new.annotations)
    if old.title != new.title:
        shown = f"title {json.dumps(old.title)} -> {json.dumps(new.title)}"
        yield Change(rule="title-changed", path="", what=shown)
    if old.description.strip() != new.description.strip():
        yield Change(rule="description-changed", path="", what="description changed")
    yield from _schema(old.input_schema, new.input_schema, output=False)
    if old.output_schema is None and new.output_schema is not None:
        yield Change(rule="output-schema-added", path="", what="output schema added")
    elif old.output_schema is not None and new.output_schema is None:
        yield Change(rule="output-schema-removed", path="", what="output schema removed")
    elif old.output_schema is not None and new.output_schema is not None:
        yield from _schema(old.output_schema, new.output_schema, output=True)


_HINT_RULES = {
    "read_only": ("read-only-added", "read-only-dropped"),
    "destructive": ("destructive-added", "destructive-dropped"),
    "idempotent": ("idempotent-added", "idempotent-dropped"),
    "open_world": ("open-world-added", "open-world-dropped"),
}


def _hint_changes(old: ToolAnnotations, new: ToolAnnotations) -> Iterator[Change]:
    """The hints as declared, absent ones taken at the MCP defaults. A read-only
    tool's other hints follow from it, so they count only while it stays a writer."""
    before, after = old.effective(trusted=True), new.effective(trusted=True)
    keys = dict(_HINTS)
    for attr, (added, dropped) in _HINT_RULES.items():
        was, now = getattr(before, attr), getattr(after, attr)
        implied = attr in ("destructive", "idempotent") and (before.read_only or after.read_only)
        if was == now or implied:
            continue
        shown = f"{keys[attr]} {_hint(getattr(old, attr), was)} -> {_hint(getattr(new, attr), now)}"
        yield Change(rule=added if now else dropped, path="", what=shown)


def _hint(declared: bool | None, effective: bool) -> str:
    value = "true" if effective else "false"
    return value if declared is not None else f"absent ({value})"


def _schema(old: Mapping[str, Any], new: Mapping[str, Any], *, output: bool) -> Iterator[Change]:
    for rule, path, what in schema_changes(old, new, output=output):
        yield Change(rule=rule, path=path, what=what)
