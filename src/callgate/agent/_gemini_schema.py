"""JSON Schema -> the schema subset Gemini accepts in function declarations.

Which path: ``FunctionDeclaration.parameters`` (Gemini's own ``Schema``, a
subset of OpenAPI 3.0), not ``parameters_json_schema``. Every Gemini model and
both backends (Gemini API and Vertex) accept ``parameters``;
``parameters_json_schema`` is newer, depends on the model, and is passed through
by the SDK unchecked, so a schema it cannot take shows up as a 400 in
production. ``parameters`` is a typed pydantic model that forbids unknown
fields, so every conversion below is checked locally (the tests build one for
every BFCL and tau2 schema).

What the subset forces, and what this module does about it:

- no ``$ref`` / ``$defs``: references are inlined; a reference to a schema
  being expanded (recursion), or past 1,000 inlined references, becomes a loose
  object whose description says so;
- no ``null`` type: ``type: [x, "null"]``, ``anyOf`` with a null branch and
  ``null`` in an enum become ``nullable``; ``oneOf`` is read as ``anyOf``
  (looser, so no correct call is refused); ``allOf`` is merged;
- one type per schema: ``type: [a, b]`` becomes ``anyOf`` of one schema per type;
- ``enum`` only on strings: a non-string enum (``[1, 2, 4]``) is dropped and its
  values are written into the description, the type stays (turning them into
  strings would make the model send ``"1"`` where the tool takes ``1``);
  ``const`` is an enum of one;
- ``format`` only ``date-time``/``enum`` on strings, ``int32``/``int64`` on
  integers, ``float``/``double`` on numbers: other formats go to the description;
- ``properties`` only on objects, ``items`` required on arrays, a type on every
  schema, ``required`` only naming listed properties: a schema without a type
  (any value) becomes ``anyOf`` of every type; ``prefixItems`` becomes ``items``
  (the union of the positions); an object without properties (a free-form map)
  is kept as an object without ``properties`` (an empty map is refused) and its
  description says keys are free; a tool with no parameters sends none;
- dropped without replacement: ``additionalProperties`` (refused by the Gemini
  API), ``patternProperties``, ``not``, ``if``/``then``/``else``,
  ``uniqueItems``, ``$schema``/``$id``/``$comment``, and ``title`` (the property
  name already says it, and every token of a tool definition is paid on every
  request).

Every rewrite accepts at least what the original accepted, so a call that is
valid for the tool is valid for the declaration Gemini sees; callgate still
validates every call against the tool's real schema.

The output is a plain dict with the API's field names (``anyOf``, ``minItems``),
ready for ``google.genai.types.Schema.model_validate``; this module does not
import the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["to_gemini_parameters", "to_gemini_schema"]

_TYPES = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
_FORMATS = {
    "STRING": frozenset({"date-time", "enum"}),
    "INTEGER": frozenset({"int32", "int64"}),
    "NUMBER": frozenset({"float", "double"}),
}
_KEEP = {
    "STRING": ("minLength", "maxLength", "pattern"),
    "NUMBER": ("minimum", "maximum"),
    "INTEGER": ("minimum", "maximum"),
    "ARRAY": ("minItems", "maxItems"),
    "OBJECT": ("minProperties", "maxProperties"),
    "BOOLEAN": (),
}
_STRUCTURAL = frozenset(
    {
        "type",
        "$ref",
        "properties",
        "items",
        "prefixItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
    }
)
_SCALARS = ("STRING", "NUMBER", "BOOLEAN", "OBJECT")
_MAX_INLINED = 1000
"""References inlined per schema at most: definitions that each use the next one
twice would otherwise double the output at every level; the rest stay loose."""
_MAX_DEPTH = 32
"""Deeper than this, a schema becomes a loose object: real tool schemas are far
shallower, and the limit bounds the inlining of long non-recursive ref chains."""


def to_gemini_parameters(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool's input schema as a function declaration's ``parameters``.

    Args:
        schema: the tool's JSON Schema (an object schema).

    Returns:
        The Gemini schema (an ``OBJECT`` with properties), or None when the tool
        takes no parameters (Gemini refuses an object with empty properties).
    """
    converted = to_gemini_schema(schema)
    if converted.get("type") != "OBJECT" and "anyOf" in converted:
        # Parameters must be one object: take every branch's properties, and
        # require only what every branch requires (looser than the union).
        converted = _merge_branches(converted)
    if converted.get("type") != "OBJECT" or not converted.get("properties"):
        return None
    converted.pop("nullable", None)
    return converted


def to_gemini_schema(schema: Mapping[str, Any] | bool) -> dict[str, Any]:
    """Any JSON Schema as a Gemini schema (see the module docstring for the rules)."""
    root = schema if isinstance(schema, Mapping) else {}
    return _Converter(root).convert(schema, 0)


def _merge_branches(schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: set[str] | None = None
    for branch in schema["anyOf"]:
        if branch.get("type") != "OBJECT":
            continue
        for name, sub in (branch.get("properties") or {}).items():
            properties.setdefault(name, sub)
        branch_required = set(branch.get("required") or ())
        required = branch_required if required is None else required & branch_required
    merged: dict[str, Any] = {"type": "OBJECT"}
    if "description" in schema:
        merged["description"] = schema["description"]
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = [name for name in properties if name in required]
    return merged


def _with_notes(description: Any, notes: Sequence[str]) -> str | None:
    text = description if isinstance(description, str) else ""
    parts = [text.strip()] if text.strip() else []
    parts += notes
    return " ".join(parts) or None


def _values(values: Sequence[Any]) -> str:
    return ", ".join(json.dumps(v) for v in values)


def _structural(node: Any) -> bool:
    """Whether a branch of anyOf/oneOf says what a value is, rather than only
    adding constraints to the enclosing schema (``{"required": ["a"]}``)."""
    return isinstance(node, Mapping) and bool(set(node) & _STRUCTURAL)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _matches(value: Any, gemini_type: str) -> bool:
    kind = _json_type(value)
    return _TYPES.get(kind) == gemini_type or (gemini_type == "NUMBER" and kind == "integer")


class _Converter:
    """One conversion: the root (for references) and the references being expanded."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root
        self._expanding: list[str] = []
        self._inlined = 0

    def convert(self, node: Any, depth: int) -> dict[str, Any]:
        if not isinstance(node, Mapping) or not node:
            return self._anything(None, depth)  # true, {} (or false: not expressible)
        if depth > _MAX_DEPTH:
            return self._loose(node, "nested too deeply to describe")
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._follow(ref, node, depth)
        if isinstance(node.get("allOf"), list):
            return self._all_of(node, depth)
        values = self._enum_values(node)
        types, nullable = self._types(node, values)
        union = [
            branch
            for keyword in ("anyOf", "oneOf")
            if isinstance(node.get(keyword), list)
            for branch in node[keyword]
        ]
        if union and "type" not in node and any(_structural(b) for b in union):
            out = self._union(node, union, depth)
        elif not types and nullable:
            out = {"type": "STRING"}  # only null is allowed: no Gemini type says that
        elif not types:
            out = self._anything(node.get("description"), depth)
        elif len(types) == 1:
            out = self._typed(node, types[0], values, depth)
        else:
            out = {"anyOf": [self._typed(node, t, values, depth, nested=True) for t in types]}
            description = _with_notes(node.get("description"), [])
            if description:
                out["description"] = description
        if nullable:
            out["nullable"] = True
        return out

    # -- references and combinators -----------------------------------------

    def _lookup(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # a remote reference: nothing to inline
        target: Any = self._root
        for token in ref[1:].split("/")[1:] if ref != "#" else ():
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None
        return target

    def _follow(self, ref: str, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        name = ref.rsplit("/", 1)[-1]
        if ref in self._expanding:
            return self._loose(node, f"has the same shape as its enclosing {name}")
        if self._inlined >= _MAX_INLINED:
            return self._loose(node, f"is a {name}")
        self._inlined += 1
        target = self._lookup(ref)
        if not isinstance(target, Mapping):
            return self._loose(node, f"is described by {ref}")
        # Keywords beside $ref (a description, a default) are about this use:
        # they win over the definition's own.
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        self._expanding.append(ref)
        try:
            return self.convert(merged, depth + 1)
        finally:
            self._expanding.pop()

    def _all_of(self, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        rest = {k: v for k, v in node.items() if k != "allOf"}
        parts = [self.convert(sub, depth + 1) for sub in node["allOf"]]
        if rest:
            parts.insert(0, self.convert(rest, depth + 1))
        merged: dict[str, Any] = {}
        for part in parts:
            for key, value in part.items():
                if key == "properties":
                    merged.setdefault("properties", {}).update(
                        {k: v for k, v in value.items() if k not in merged.get("properties", {})}
                    )
                elif key == "required":
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                else:
                    merged.setdefault(key, value)
        return merged

    def _union(
        self, node: Mapping[str, Any], branches: Sequence[Any], depth: int
    ) -> dict[str, Any]:
        converted: list[dict[str, Any]] = []
        nullable = False
        for branch in branches:
            resolved = self._resolve_shallow(branch)
            if self._is_null(resolved):
                nullable = True
                continue
            sub = self.convert(branch, depth + 1)
            nullable = nullable or bool(sub.pop("nullable", False))
            converted.append(sub)
        out: dict[str, Any]
        if not converted:
            out = {"type": "STRING"}  # only null is allowed: no Gemini type says that
        elif len(converted) == 1:
            out = converted[0]
        else:
            out = {"anyOf": converted}
        description = _with_notes(node.get("description"), [])
        if description and out.get("description") not in (None, description):
            out["description"] = f"{description} {out['description']}"  # keep the branch's notes
        elif description:
            out["description"] = description
        if "default" in node and node["default"] is not None:
            out["default"] = node["default"]
        if nullable:
            out["nullable"] = True
        return out

    def _resolve_shallow(self, node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                return node
            seen.add(ref)
            target = self._lookup(ref)
            if not isinstance(target, Mapping):
                return node
            node = target
        return node

    @staticmethod
    def _is_null(node: Any) -> bool:
        if not isinstance(node, Mapping):
            return False
        kind = node.get("type")
        if kind == "null" or kind == ["null"]:
            return True
        return "type" not in node and (node.get("enum") == [None] or node.get("const", 0) is None)

    # -- types ---------------------------------------------------------------

    @staticmethod
    def _enum_values(node: Mapping[str, Any]) -> list[Any] | None:
        if "const" in node:
            return [node["const"]]
        enum = node.get("enum")
        return list(enum) if isinstance(enum, list) else None

    @staticmethod
    def _types(node: Mapping[str, Any], values: list[Any] | None) -> tuple[list[str], bool]:
        declared = node.get("type")
        if isinstance(declared, str):
            names = [declared]
        elif isinstance(declared, list):
            names = [t for t in declared if isinstance(t, str)]
        else:  # no type: infer it from the keywords that imply one
            names = []
            if values is not None:
                names = list(dict.fromkeys(_json_type(v) for v in values))
            elif "properties" in node or "required" in node or "additionalProperties" in node:
                names = ["object"]
            elif "items" in node or "prefixItems" in node:
                names = ["array"]
            elif "minLength" in node or "maxLength" in node or "pattern" in node:
                names = ["string"]
            elif "minimum" in node or "maximum" in node:
                names = ["number"]
        nullable = "null" in names or (values is not None and None in values)
        known = [_TYPES[n] for n in names if n in _TYPES]
        if "INTEGER" in known and "NUMBER" in known:
            known.remove("INTEGER")  # every integer is a number
        return list(dict.fromkeys(known)), nullable

    def _typed(
        self,
        node: Mapping[str, Any],
        gemini_type: str,
        values: list[Any] | None,
        depth: int,
        *,
        nested: bool = False,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": gemini_type}
        notes: list[str] = []
        if values is not None:
            allowed = [v for v in values if _matches(v, gemini_type)]
            if gemini_type == "STRING" and allowed:
                out["enum"] = allowed
            elif allowed:
                notes.append(f"One of: {_values(allowed)}.")
        fmt = node.get("format")
        if isinstance(fmt, str):
            if fmt in _FORMATS.get(gemini_type, ()):
                out["format"] = fmt
            elif gemini_type in _FORMATS:
                notes.append(f"Format: {fmt}.")
        for key in _KEEP[gemini_type]:
            value = node.get(key)
            if isinstance(value, str) if key == "pattern" else _is_number(value):
                out[key] = value
        if gemini_type in ("NUMBER", "INTEGER"):
            for exclusive, inclusive in (
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ):
                bound = node.get(exclusive)
                if _is_number(bound):
                    out.setdefault(inclusive, bound)  # inclusive: looser by one point
        if gemini_type == "ARRAY":
            out["items"] = self._items(node, depth)
        elif gemini_type == "OBJECT":
            notes += self._object(node, out, depth)
        if not nested:
            description = _with_notes(node.get("description"), notes)
            if description:
                out["description"] = description
            if "default" in node and node["default"] is not None:
                out["default"] = node["default"]
            examples = node.get("examples")
            if isinstance(examples, list) and examples:
                out["example"] = examples[0]
            elif "example" in node:
                out["example"] = node["example"]
        elif notes:
            out["description"] = " ".join(notes)
        return out

    def _items(self, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        items = node.get("items")
        prefix = node.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            branches = [self.convert(sub, depth + 1) for sub in prefix]
            if isinstance(items, Mapping) and items:
                branches.append(self.convert(items, depth + 1))
            elif items is not False and items is not None and not isinstance(items, Mapping):
                return self._anything(None, depth + 1)
            unique = list({json.dumps(b, sort_keys=True): b for b in branches}.values())
            return unique[0] if len(unique) == 1 else {"anyOf": unique}
        if isinstance(items, Mapping) and items:
            return self.convert(items, depth + 1)
        return self._anything(None, depth + 1, in_array=True)

    def _object(self, node: Mapping[str, Any], out: dict[str, Any], depth: int) -> list[str]:
        properties = node.get("properties")
        if isinstance(properties, Mapping) and properties:
            out["properties"] = {
                str(name): self.convert(sub, depth + 1) for name, sub in properties.items()
            }
            required = node.get("required")
            if isinstance(required, list):
                listed = [r for r in required if r in out["properties"]]
                if listed:
                    out["required"] = list(dict.fromkeys(listed))
            return []
        values = node.get("additionalProperties")
        if isinstance(values, Mapping) and values.get("type") in _TYPES:
            return [f"Any keys; values are of type {values['type']}."]
        return ["Any keys."]

    # -- what cannot be said exactly -----------------------------------------

    def _anything(self, description: Any, depth: int, *, in_array: bool = False) -> dict[str, Any]:
        """Any JSON value: one branch per type (an array of arrays is left out:
        Gemini needs ``items`` on every array, so the nesting has to stop)."""
        branches: list[dict[str, Any]] = [{"type": t} for t in _SCALARS]
        if not in_array and depth < _MAX_DEPTH:
            branches.append({"type": "ARRAY", "items": {"anyOf": [{"type": t} for t in _SCALARS]}})
        out: dict[str, Any] = {"anyOf": branches, "nullable": True}
        text = _with_notes(description, [])
        if text:
            out["description"] = text
        return out

    @staticmethod
    def _loose(node: Mapping[str, Any], why: str) -> dict[str, Any]:
        description = node.get("description")
        note = f"An object that {why}."
        return {"type": "OBJECT", "description": _with_notes(description, [note]) or note}
