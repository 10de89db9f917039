"""Tool schemas as OpenAI accepts them, strict or not, and strict arguments mapped back.

OpenAI's ``strict: true`` (Chat Completions and Responses alike) constrains the
model's arguments to a subset of JSON Schema. :func:`strict_schema` rewrites any
tool schema into that subset:

- every object is closed (``additionalProperties: false``) and lists all its
  properties in ``required``; a field that was optional becomes nullable
  (``"type": [t, "null"]``, or ``anyOf: [..., {"type": "null"}]`` around a
  ``$ref``, an ``enum``, a ``const`` or a union);
- ``$defs`` (and ``definitions``) stay at the root and ``$ref`` to them stays
  (strict mode resolves them, recursion included); a ``$ref`` with a
  description beside it is inlined, since strict mode takes a bare ``$ref``
  only (a recursive one keeps the bare ``$ref`` and loses the description);
- ``oneOf`` becomes ``anyOf``, a one-element ``allOf`` is merged; ``anyOf``
  or ``oneOf`` next to a ``type`` only constrains it and is dropped;
- kept: ``type``, ``description``, ``title``, ``enum``, ``const``,
  ``properties``, ``items``, ``anyOf``, ``$ref``, ``pattern``, ``format`` (the
  formats strict mode knows), ``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum``, ``multipleOf``, ``minItems``, ``maxItems``. ``default``
  is folded into the description (the model must now send every field, and
  null gets the default). Everything else is dropped: ``minLength``,
  ``maxLength``, ``uniqueItems``, ``not``, ``if``/``then``/``else``,
  ``dependent*``, ``propertyNames``, ``min/maxProperties``, ``examples``,
  ``$schema``, ``$id``... These are validation only: the gate still checks the
  arguments against the original schema and says what was wrong;
- what strict mode cannot express at all, a free-form value (no ``type``, an
  object without ``properties``, a tuple, a many-part ``allOf``, a ``$ref``
  outside ``$defs``), becomes a string the model fills with JSON text (the
  description says so: :data:`JSON_TEXT_NOTE`); an array without ``items``
  becomes an array of such strings. The root is always an object: a root
  without properties takes no arguments; extra keys beside declared
  properties cannot be sent.

:meth:`StrictSchema.restore` undoes what the rewrite asks of the model: a null
for a field that was optional and did not admit null means "omitted" and is
removed; JSON text is parsed back (text that is not JSON stays a string, for
the gate to judge). The arguments that reach the gate carry only what the
original schema allows.

Non-strict mode (:func:`loose_schema`) passes the schema through, with the root
made an object with ``properties`` where it is not one (OpenAI requires both).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["JSON_TEXT_NOTE", "StrictSchema", "loose_schema", "strict_schema"]

JSON_TEXT_NOTE = "Write this value as JSON text."
"""The end of the description of a value the model must send as JSON text."""

_KEPT = (
    "description",
    "title",
    "enum",
    "const",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
)
_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
_ANNOTATIONS = {"description", "title", "default", "examples", "$comment", "deprecated"}
_JSON_TYPES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}

# -- restore plans: what to undo in the model's arguments, node by node ---------


@dataclass(frozen=True)
class _Json:
    """A value sent as JSON text."""


@dataclass(frozen=True)
class _Object:
    props: Mapping[str, _Plan | None]
    drop_null: frozenset[str]
    """Fields that were optional and did not admit null: null means omitted."""


@dataclass(frozen=True)
class _Array:
    items: _Plan


@dataclass(frozen=True, eq=False)
class _Ref:
    name: str
    defs: Mapping[str, _Plan | None]
    """Shared with the whole schema, filled as definitions are rewritten."""


@dataclass(frozen=True)
class _Branch:
    types: frozenset[str]
    keys: frozenset[str] | None
    plan: _Plan | None
    json_text: bool


@dataclass(frozen=True)
class _Union:
    branches: tuple[_Branch, ...]


_Plan: TypeAlias = _Json | _Object | _Array | _Ref | _Union


@dataclass(kw_only=True, frozen=True)
class StrictSchema:
    """A tool schema rewritten for OpenAI's strict mode.

    Args:
        schema: what OpenAI is sent as the tool's ``parameters``.
        json_text: how many values the model must send as JSON text (what
            strict mode cannot express).
    """

    schema: dict[str, Any]
    json_text: int = 0
    _plan: _Plan | None = field(default=None, repr=False)

    def restore(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The model's strict-mode arguments as the original schema has them:
        nulls of optional fields removed, JSON text parsed."""
        restored = _restore(self._plan, dict(arguments))
        return restored if isinstance(restored, dict) else dict(arguments)


def loose_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` for a non-strict tool: as it is, the root an object with properties."""
    out = copy.deepcopy(dict(schema))
    if out.get("type") != "object":
        out["type"] = "object"
    out.setdefault("properties", {})
    return out


def strict_schema(schema: Mapping[str, Any]) -> StrictSchema:
    """``schema`` rewritten for ``strict: true`` (see the module's docstring)."""
    rewriter = _Rewriter(schema)
    out, plan = rewriter.root()
    if rewriter.used:
        out["$defs"] = {name: rewriter.out_defs[name] for name in sorted(rewriter.used)}
    return StrictSchema(schema=out, json_text=rewriter.json_text, _plan=plan)


# -- the rewrite ----------------------------------------------------------------


def _def_name(ref: str) -> str | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return ref[len(prefix) :]
    return None


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {str(t) for t in declared}
    return set()


def _implied_types(schema: Mapping[str, Any]) -> set[str]:
    """The types an untyped schema's keywords imply (strict mode wants one stated)."""
    if "properties" in schema:
        return {"object"}
    if "items" in schema:
        return {"array"}
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        if isinstance(values, list) and values:
            return {_JSON_TYPES.get(type(v), "string") for v in values}
    return set()


def _with_default(schema: Mapping[str, Any]) -> str | None:
    """The description, with the default (if any, and not null) said in it."""
    description = schema.get("description")
    if "default" not in schema or schema["default"] is None:
        return description if isinstance(description, str) else None
    note = f"Default: {json.dumps(schema['default'], ensure_ascii=False)}."
    return f"{description} ({note})" if isinstance(description, str) and description else note


class _Rewriter:
    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.source = schema
        self.src_defs: dict[str, Any] = {
            **dict(schema.get("definitions") or {}),
            **dict(schema.get("$defs") or {}),
        }
        self.out_defs: dict[str, dict[str, Any]] = {}
        self.def_plans: dict[str, _Plan | None] = {}
        self.used: set[str] = set()
        self.json_text = 0
        self._recursive: dict[str, bool] = {}

    def root(self) -> tuple[dict[str, Any], _Plan | None]:
        root = {k: v for k, v in self.source.items() if k not in ("$defs", "definitions")}
        name = _def_name(str(root.get("$ref", "")))
        if name is not None and isinstance(self.src_defs.get(name), Mapping):
            # The arguments object itself in $defs (the root must be an object, not a $ref).
            root = {**self.src_defs[name], **{k: v for k, v in root.items() if k != "$ref"}}
        if not isinstance(root.get("properties"), Mapping) or not root["properties"]:
            # No declared fields: strict mode's root must be a closed object, so the
            # tool takes no arguments.
            out: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            out["additionalProperties"] = False
            for key in ("description", "title"):
                if isinstance(root.get(key), str):
                    out[key] = root[key]
            return out, None
        return self.object({**root, "type": "object"})

    # A reference is recursive if following references from its definition
    # leads back to it; only those must stay references when a sibling wants inlining.
    def recursive(self, name: str) -> bool:
        if name not in self._recursive:
            self._recursive[name] = name in self._reachable(self.src_defs.get(name), set())
        return self._recursive[name]

    def _reachable(self, node: Any, seen: set[str]) -> set[str]:
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and (name := _def_name(ref)) and name not in seen:
                seen.add(name)
                self._reachable(self.src_defs.get(name), seen)
            for value in node.values():
                self._reachable(value, seen)
        elif isinstance(node, list):
            for value in node:
                self._reachable(value, seen)
        return seen

    def json_node(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], _Plan]:
        self.json_text += 1
        description = _with_default(schema)
        text = f"{description} {JSON_TEXT_NOTE}" if description else JSON_TEXT_NOTE
        return {"type": "string", "description": text}, _Json()

    def node(self, schema: Any) -> tuple[dict[str, Any], _Plan | None]:
        if not isinstance(schema, Mapping):  # true, false: anything / nothing
            return self.json_node({})
        if "$ref" in schema:
            return self.ref(schema)
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            if len(all_of) != 1 or not isinstance(all_of[0], Mapping):
                return self.json_node(schema)
            merged = {**all_of[0], **{k: v for k, v in schema.items() if k != "allOf"}}
            return self.node(merged)
        union = schema.get("anyOf", schema.get("oneOf"))
        types = _types(schema)
        if isinstance(union, list) and not types and "properties" not in schema:
            return self.union(schema, union)
        if not types:
            types = _implied_types(schema)
            if not types:
                return self.json_node(schema)
        if "object" in types:
            if types - {"object", "null"} or not schema.get("properties"):
                return self.json_node(schema)
            return self.object(schema)
        if "array" in types:
            if types - {"array", "null"} or "prefixItems" in schema:
                return self.json_node(schema)
            items = schema.get("items")
            if isinstance(items, list):  # the old tuple form
                return self.json_node(schema)
            item, item_plan = self.node(items) if isinstance(items, Mapping) else self.json_node({})
            out = self.common(schema, types)
            out["items"] = item
            return out, (_Array(items=item_plan) if item_plan is not None else None)
        return self.common(schema, types), None

    def common(self, schema: Mapping[str, Any], types: set[str]) -> dict[str, Any]:
        ordered = sorted(types, key=lambda t: (t == "null", t))
        out: dict[str, Any] = {"type": ordered[0] if len(ordered) == 1 else ordered}
        for key in _KEPT:
            if key in schema:
                out[key] = copy.deepcopy(schema[key])
        if schema.get("format") in _FORMATS:
            out["format"] = schema["format"]
        description = _with_default(schema)
        if description is not None:
            out["description"] = description
        return out

    def object(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], _Plan | None]:
        required = set(schema.get("required") or ())
        props: dict[str, Any] = {}
        plans: dict[str, _Plan | None] = {}
        drop_null: set[str] = set()
        for name, sub in schema["properties"].items():
            out, plan = self.node(sub)
            if name not in required:
                if isinstance(plan, _Json) or not self.admits_null(sub, set()):
                    drop_null.add(name)
                out = _nullable(out)
            props[name] = out
            plans[name] = plan
        out = self.common(schema, _types(schema) or {"object"})
        out.update(properties=props, required=list(props), additionalProperties=False)
        if drop_null or any(p is not None for p in plans.values()):
            return out, _Object(props=plans, drop_null=frozenset(drop_null))
        return out, None

    def union(self, schema: Mapping[str, Any], union: list[Any]) -> tuple[dict[str, Any], _Plan]:
        branches: list[dict[str, Any]] = []
        plans: list[_Branch] = []
        for sub in union:
            out, plan = self.node(sub)
            if out in branches:
                continue  # e.g. two free-form branches, both JSON text now
            branches.append(out)
            plans.append(self.branch(out, plan))
        out = {"anyOf": branches}
        description = _with_default(schema)
        if description is not None:
            out["description"] = description
        if isinstance(schema.get("title"), str):
            out["title"] = schema["title"]
        # Plain branches are tried before JSON text ones: a string that fits a
        # string branch is that string, not JSON.
        ordered = sorted(plans, key=lambda b: b.json_text)
        return out, _Union(branches=tuple(ordered))

    def branch(self, out: Mapping[str, Any], plan: _Plan | None) -> _Branch:
        target = out
        if "$ref" in out and (name := _def_name(str(out["$ref"]))) is not None:
            target = self.out_defs.get(name, {})
        keys = target.get("properties")
        types = _types(target)
        if not types or "anyOf" in target:
            types = {"any"}  # a union in a union, or a definition still being rewritten
        return _Branch(
            types=frozenset(types),
            keys=frozenset(keys) if isinstance(keys, Mapping) else None,
            plan=plan,
            json_text=isinstance(plan, _Json),
        )

    def ref(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], _Plan | None]:
        ref = str(schema["$ref"])
        name = _def_name(ref)
        if name is None or name not in self.src_defs:
            return self.json_node(schema)  # outside $defs: not followed
        siblings = {k for k in schema if k != "$ref"}
        target = self.src_defs[name]
        if siblings - _ANNOTATIONS and isinstance(target, Mapping):
            # A $ref with constraints beside it means both (allOf): merged inline.
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.node(merged) if not self.recursive(name) else self.json_node(schema)
        description = _with_default(schema)
        if description is not None and not self.recursive(name) and isinstance(target, Mapping):
            return self.node({**target, "description": description, "default": None})
        self.define(name)
        return {"$ref": f"#/$defs/{name}"}, _Ref(name=name, defs=self.def_plans)

    def define(self, name: str) -> None:
        if name in self.used:
            return
        self.used.add(name)
        self.out_defs[name] = {}  # placeholder while a recursive definition refers to itself
        out, plan = self.node(self.src_defs[name])
        self.out_defs[name] = out
        self.def_plans[name] = plan

    def admits_null(self, schema: Any, seen: set[str]) -> bool:
        """Whether null is a value ``schema`` accepts (so the model's null is meant)."""
        if not isinstance(schema, Mapping):
            return schema is True
        if "null" in _types(schema):
            return True
        if None in (schema.get("enum") or ()) or ("const" in schema and schema["const"] is None):
            return True
        ref = schema.get("$ref")
        name = _def_name(ref) if isinstance(ref, str) else None
        if name and name not in seen and self.admits_null(self.src_defs.get(name), {*seen, name}):
            return True
        for key in ("anyOf", "oneOf"):
            if any(self.admits_null(sub, seen) for sub in schema.get(key) or ()):
                return True
        return False


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts null (for a field that was optional)."""
    if "anyOf" in schema:
        if {"type": "null"} not in schema["anyOf"]:
            schema = {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
        return schema
    if "$ref" in schema or "enum" in schema or "const" in schema:
        outer: dict[str, Any] = {k: schema[k] for k in ("description", "title") if k in schema}
        inner = {k: v for k, v in schema.items() if k not in outer}
        return {"anyOf": [inner, {"type": "null"}], **outer}
    declared = schema["type"]
    types = [declared] if isinstance(declared, str) else list(declared)
    if "null" not in types:
        types.append("null")
    return {**schema, "type": types}


# -- the way back ---------------------------------------------------------------


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), "string")


def _restore(plan: _Plan | None, value: Any) -> Any:
    if plan is None:
        return value
    if isinstance(plan, _Json):
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value  # not JSON: the text itself, for the gate to judge
    if isinstance(plan, _Object):
        if not isinstance(value, dict):
            return value
        return {
            key: _restore(plan.props.get(key), item)
            for key, item in value.items()
            if not (item is None and key in plan.drop_null)
        }
    if isinstance(plan, _Array):
        return [_restore(plan.items, item) for item in value] if isinstance(value, list) else value
    if isinstance(plan, _Ref):
        return _restore(plan.defs.get(plan.name), value)
    branch = _choose(plan, value)
    return _restore(branch.plan, value) if branch is not None else value


def _choose(plan: _Union, value: Any) -> _Branch | None:
    kind = _json_type(value)
    fits = [
        b
        for b in plan.branches
        if "any" in b.types or kind in b.types or (kind == "integer" and "number" in b.types)
    ]
    if kind == "object" and len(fits) > 1:
        # Strict mode sends every key of its branch: the branch with exactly these keys.
        exact = [b for b in fits if b.keys == frozenset(value)]
        return (exact or fits)[0]
    return fits[0] if fits else None
