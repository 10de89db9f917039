"""Tool schemas as Anthropic's ``input_schema`` accepts them.

Two profiles:

- :func:`input_schema` (every tool): the tool's JSON Schema with its local
  references inlined and an object at the root.
- :func:`strict_input_schema` (tools marked ``strict``): the same, narrowed to
  the subset strict (grammar-constrained) tool use compiles, or ``None`` when the
  schema cannot be narrowed without refusing arguments it accepts.

What is done to a schema, and why:

- ``$ref`` into the same document (``#/$defs/X``, ``#/definitions/X``, any
  ``#/...`` pointer) is replaced by its target, because we cannot be sure every
  model and every compatible endpoint resolves references, and an inlined shape
  is read where it is used. ``$ref`` siblings that only annotate (description,
  title, default, ...) override the target's; other siblings are kept next to an
  ``allOf`` of the target, which is what 2020-12 means by them.
- A reference met again inside its own expansion (a recursive schema) becomes
  an unconstrained schema with a description naming the shape; so does a
  reference that cannot be resolved (another document, ``$dynamicRef``), and
  any reference past the first 1,000 inlined (shared definitions can make the
  inlined form exponentially large). Both
  accept more than the original, never less: the model is not constrained there,
  and callgate's gate still validates the arguments against the original schema.
- Dropped: ``$schema``, ``$id``, ``$anchor``, ``$dynamicAnchor``,
  ``$vocabulary``, ``$comment`` (meta-data the model does not need; ``$id`` would
  also move the base of the references already inlined), and ``$defs`` /
  ``definitions`` once inlined. Every other keyword is kept as it is: the API takes
  Draft 2020-12 and ignores what it does not use, and the model reads
  ``description``, ``enum``, ``default``, ``format``, ``minimum`` and the rest.
- The root must be ``"type": "object"`` and may not be a bare ``anyOf`` /
  ``oneOf`` / ``allOf``: a missing type becomes ``object``; root ``allOf`` parts
  are merged into the root; root ``anyOf`` / ``oneOf`` alternatives are merged
  into one object whose ``required`` is what every alternative requires, and the
  alternatives are named in the description (the merge accepts every argument
  set any alternative accepts). A root that cannot be an object is an error.

Strict tool use compiles a subset of JSON Schema: every object closed
(``additionalProperties: false``), no recursion, no numeric, length or pattern
constraints, ``minItems`` 0 or 1 only, a few string formats. The strict profile
closes objects that list their properties, turns ``oneOf`` into ``anyOf`` and moves
unsupported constraints into the description (each change accepts more, and the
model still reads the constraint). It gives up (``None``) where closing would
refuse correct arguments: an open map (``additionalProperties`` a schema or
``true``, or an object with no properties below the root), a value of any type,
tuples, and enums of non-scalar values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["input_schema", "strict_input_schema"]

_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
"""Keywords whose values map names (never keywords) to schemas."""
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "additionalItems",
        "unevaluatedItems",
        "contentSchema",
    }
)
_DROPPED = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "$defs",
        "definitions",
    }
)
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
)
"""``$ref`` siblings that only annotate: they may override the target's."""


def input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``input_schema`` Anthropic accepts for a tool's JSON Schema.

    Args:
        schema: the tool's model-facing JSON Schema (Draft 2020-12).

    Returns:
        A new schema: references inlined, an object at the root.

    Raises:
        ValueError: the root cannot be an object (a tool's input always is one).
    """
    inlined = _Inliner(schema).node(schema, ())
    return _object_root(inlined if isinstance(inlined, dict) else {})


_MAX_EXPANSIONS = 1_000
"""References inlined per schema at most. Definitions that each use the next twice
double the schema at every level; past this, the remaining references are left
unconstrained, so a hostile upstream schema cannot exhaust memory."""


class _Inliner:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.expansions = 0

    def node(self, node: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, Mapping):
            return node  # a boolean schema
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self.reference(ref, node, stack)
        if "$dynamicRef" in node:
            return _unconstrained(f"{node['$dynamicRef']} (a dynamic reference)")
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {name: self.node(sub, stack) for name, sub in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.node(sub, stack) for sub in value]
            elif key in _SCHEMA_ONE or (key == "items" and isinstance(value, Mapping | bool)):
                out[key] = self.node(value, stack)
            elif key == "items" and isinstance(value, list):
                out[key] = [self.node(sub, stack) for sub in value]  # the pre-2020 tuple form
            else:
                out[key] = value  # data (enum, const, default, ...) or an annotation
        return out

    def reference(self, ref: str, node: Mapping[str, Any], stack: tuple[str, ...]) -> Any:
        if ref in stack:
            target: Any = _unconstrained(f"{_shape_name(ref)} (recursive)")
        elif self.expansions >= _MAX_EXPANSIONS:
            target = _unconstrained(f"{_shape_name(ref)} (not inlined: the schema is too large)")
        else:
            self.expansions += 1
            found = _resolve(self.root, ref)
            if found is None:
                target = _unconstrained(f"{ref} (not resolvable here)")
            else:
                target = self.node(found, (*stack, ref))
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return target
        rest = self.node(siblings, stack)
        if set(rest) <= _ANNOTATIONS and isinstance(target, dict):
            return {**target, **rest}
        return {"allOf": [target], **rest}


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    """The target of a reference into ``root``, or ``None``."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    pointer = unquote(ref[1:])
    if not pointer:
        return node
    if not pointer.startswith("/"):
        return None  # a plain-name fragment ($anchor): not followed
    for token in pointer[1:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _shape_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1] or "the whole input"


def _unconstrained(what: str) -> dict[str, Any]:
    return {"description": f"Any value: the same shape as {what}."}


# -- the root --------------------------------------------------------------------


def _object_root(schema: dict[str, Any]) -> dict[str, Any]:
    root = dict(schema)
    for variant in root.pop("allOf", None) or ():
        if isinstance(variant, dict):
            root = _merge_all(root, _object_root(variant))
    for keyword in ("anyOf", "oneOf"):
        alternatives = [v for v in root.pop(keyword, None) or () if _may_be_object(v)]
        if alternatives:
            root = _merge_any(root, alternatives)
    kind = root.get("type", "object")
    if isinstance(kind, list) and "object" in kind:
        kind = "object"
    if kind != "object":
        raise ValueError(
            f"a tool's input schema must describe an object, not type {kind!r}: "
            "wrap the value in an object property"
        )
    root["type"] = "object"
    return root


def _may_be_object(schema: Any) -> bool:
    """Whether an alternative can accept an object (the only input a tool gets)."""
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type", "object")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _merge_all(root: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Both must hold: properties of both, everything either requires."""
    merged = {**part, **root}
    properties = dict(part.get("properties") or {})
    for name, sub in (root.get("properties") or {}).items():
        properties[name] = {"allOf": [properties[name], sub]} if name in properties else sub
    if properties:
        merged["properties"] = properties
    required = list(root.get("required") or [])
    required += [n for n in part.get("required") or [] if n not in required]
    if required:
        merged["required"] = required
    return merged


def _merge_any(root: dict[str, Any], alternatives: list[dict[str, Any]]) -> dict[str, Any]:
    """One object that accepts whatever any alternative accepts."""
    options = [_object_root(a) if isinstance(a, dict) else {"type": "object"} for a in alternatives]
    properties: dict[str, Any] = dict(root.get("properties") or {})
    shapes: dict[str, list[Any]] = {}
    for option in options:
        for name, sub in (option.get("properties") or {}).items():
            shapes.setdefault(name, []).append(sub)
    for name, subs in shapes.items():
        if name not in properties:
            properties[name] = subs[0] if len(subs) == 1 else {"anyOf": subs}
    common = [set(option.get("required") or ()) for option in options]
    required = list(root.get("required") or [])
    required += sorted(set.intersection(*common) - set(required)) if common else []
    forms = "; ".join(
        "(" + ", ".join(option.get("required") or ["nothing required"]) + ")" for option in options
    )
    note = f"Arguments take one of {len(options)} forms, by the fields they require: {forms}."
    merged = dict(root)
    merged["properties"] = properties
    if required:
        merged["required"] = required
    merged["description"] = f"{root['description']}\n\n{note}" if root.get("description") else note
    return merged


# -- strict ----------------------------------------------------------------------

_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_TO_DESCRIPTION = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "contains",
        "minContains",
        "maxContains",
        "propertyNames",
        "patternProperties",
        "dependentRequired",
        "dependentSchemas",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
"""Constraints strict mode does not compile: dropped from the schema (which then
accepts more), and written into the description for the model to follow."""


class _NotStrict(Exception):
    pass


def strict_input_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The strict-mode ``input_schema`` for a tool's JSON Schema, or ``None``.

    Args:
        schema: the tool's model-facing JSON Schema (Draft 2020-12).

    Returns:
        A schema in the subset strict tool use compiles that accepts every
        argument set the original accepts (except properties the original did
        not name), or ``None`` when there is none: send the tool without
        ``strict``.

    Raises:
        ValueError: the root cannot be an object.
    """
    root = input_schema(schema)
    root.setdefault("properties", {})
    try:
        return _strict(root)
    except _NotStrict:
        return None


def _strict(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise _NotStrict  # a boolean schema
    out: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties",) and isinstance(value, dict):
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_strict(sub) for sub in value]
        elif key == "allOf":
            out[key] = [_strict(sub) for sub in value]
        elif key == "items":
            if not isinstance(value, dict):
                raise _NotStrict  # a tuple
            out[key] = _strict(value)
        elif key in ("prefixItems", "additionalItems"):
            raise _NotStrict
        elif key == "additionalProperties":
            if value is not False:
                raise _NotStrict  # an open map: closing it would refuse its entries
        elif (key == "enum" and not all(_scalar(v) for v in value)) or (
            key == "const" and not _scalar(value)
        ):
            raise _NotStrict
        elif (
            key in _TO_DESCRIPTION
            or (key == "minItems" and value not in (0, 1))
            or (key == "format" and value not in _STRICT_FORMATS)
        ):
            moved[key] = value
        else:
            out[key] = value
    if not ({"type", "enum", "const", "anyOf", "allOf"} & set(out)):
        raise _NotStrict  # a value of any type
    kinds = out.get("type")
    if kinds == "object" or (isinstance(kinds, list) and "object" in kinds):
        if "properties" not in out:
            raise _NotStrict  # a free-form object
        out["additionalProperties"] = False
    if moved:
        constraints = ", ".join(f"{key}: {value!r}" for key, value in moved.items())
        text = out.get("description")
        out["description"] = f"{text} ({constraints})" if text else f"({constraints})"
    return out


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
