"""The comparison of two JSON Schemas of one tool: its input's or its result's.

Each difference is a finding ``(rule, path, what)``: the rule id (see
:data:`callgate.contract.diff.RULES`), where it is (``budget.amount``,
``items[]``; "" for the whole schema) and what changed. An input is judged as
a caller sees it (fewer accepted values break), a result as its consumer does
(more possible values break): the output's rules are the input's with an
``output-`` prefix, and the opposite severity. How ``$ref``, optionals and
composition are read is said in :mod:`callgate.contract.diff`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["Finding", "schema_changes"]

Finding = tuple[str, str, str]
"""(rule id, path, what changed)."""


def schema_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], *, output: bool
) -> list[Finding]:
    """The differences between two schemas, in schema order."""
    return _SchemaDiff(old, new, output=output).run()


_OPAQUE = ("anyOf", "oneOf", "allOf", "not", "prefixItems", "$ref")
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


_FIELD_RULES = {
    # event: (the input's rule, the output's rule)
    "added": ("param-added", "output-field-added"),
    "added-required": ("param-required-added", "output-field-added"),
    "removed": ("param-removed", "output-field-removed"),
    "removed-open": ("param-removed-open", "output-field-removed"),
    "made-optional": ("param-made-optional", "output-field-made-optional"),
    "made-required": ("param-made-required", "output-field-made-required"),
}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _types(node: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types a schema allows; None: any."""
    kind = node.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(str(k) for k in kind)
    return None


def _covers(wide: frozenset[str] | None, narrow: frozenset[str] | None) -> bool:
    """Whether every value of the types ``narrow`` is one of the types ``wide``."""
    if wide is None:
        return True
    if narrow is None:
        return False
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _show(types: frozenset[str] | None) -> str:
    return "|".join(sorted(types)) if types is not None else "any"


class _SchemaDiff:
    """One comparison of an old and a new schema: its changes, in schema order."""

    def __init__(self, old: Mapping[str, Any], new: Mapping[str, Any], *, output: bool) -> None:
        self.roots = (old, new)
        self.output = output
        self.changes: list[Finding] = []

    def run(self) -> list[Finding]:
        self.compare(self.roots[0], self.roots[1], "", (frozenset(), frozenset()))
        return self.changes

    def add(self, kind: str, path: str, what: str) -> None:
        self.changes.append((f"output-{kind}" if self.output else kind, path, what))

    def field(self, event: str, path: str, what: str) -> None:
        """A property added, removed, made required or optional."""
        self.changes.append((_FIELD_RULES[event][self.output], path, what))

    def resolve(self, node: Any, side: int, seen: frozenset[str]) -> tuple[Any, frozenset[str]]:
        """``node`` with its local ``$ref`` inlined (None: a ref already on the path)."""
        if isinstance(node, bool):
            return ({} if node else {"not": {}}), seen
        if not isinstance(node, Mapping):
            return {}, seen
        ref = node.get("$ref")
        while isinstance(ref, str) and ref.startswith("#"):
            if ref in seen:
                return None, seen
            target = _pointer(self.roots[side], ref)
            if target is None:
                break  # compared as an opaque $ref
            seen = seen | {ref}
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            ref = node.get("$ref")
        return self.optional(node, side, seen)

    def optional(
        self, node: Mapping[str, Any], side: int, seen: frozenset[str]
    ) -> tuple[Any, frozenset[str]]:
        """``anyOf [X, {"type": "null"}]`` (pydantic's optional) as X that may be null."""
        branches = node.get("anyOf")
        if not isinstance(branches, list):
            return node, seen
        others = [b for b in branches if b != {"type": "null"}]
        if len(others) != 1 or len(branches) == 1:
            return node, seen
        inner, inner_seen = self.resolve(others[0], side, seen)
        if inner is None or "anyOf" in inner:
            return node, seen
        merged = {**inner, **{k: v for k, v in node.items() if k != "anyOf"}}
        types = _types(inner)
        if types is None:
            merged.pop("type", None)
        else:
            merged["type"] = sorted(types | {"null"})
        return merged, inner_seen

    def expanded(self, value: Any, side: int, seen: frozenset[str]) -> Any:
        """``value`` with its local ``$ref``s inlined, to compare what is not compared
        in detail by what it means, not by how it is spelled."""
        if isinstance(value, list):
            return [self.expanded(v, side, seen) for v in value]
        if not isinstance(value, Mapping):
            return value
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and ref not in seen:
            target = _pointer(self.roots[side], ref)
            if target is not None:
                rest = {k: v for k, v in value.items() if k != "$ref"}
                return self.expanded({**target, **rest}, side, seen | {ref})
        return {k: self.expanded(v, side, seen) for k, v in value.items()}

    def compare(self, old: Any, new: Any, path: str, seen: tuple[frozenset[str], ...]) -> None:
        o, seen_o = self.resolve(old, 0, seen[0])
        n, seen_n = self.resolve(new, 1, seen[1])
        if o is None or n is None:
            return  # a recursive ref met again: compared where it first appeared
        tuples = isinstance(o.get("items"), list) or isinstance(n.get("items"), list)
        for keyword in (*_OPAQUE, "items") if tuples else _OPAQUE:
            was = self.expanded(o.get(keyword), 0, seen_o)
            if _canon(was) != _canon(self.expanded(n.get(keyword), 1, seen_n)):
                self.add("composition-changed", path, f"{keyword} changed")
        if not self.types(o, n, path):
            return  # other types: their keywords no longer compare
        self.values(o, n, path)
        self.bounds(o, n, path)
        if not self.output:
            self.notes(o, n, path)
        self.objects(o, n, path, (seen_o, seen_n))
        if ("items" in o or "items" in n) and not tuples:
            self.compare(o.get("items", {}), n.get("items", {}), f"{path}[]", (seen_o, seen_n))

    def types(self, o: Mapping[str, Any], n: Mapping[str, Any], path: str) -> bool:
        """Report a change of type; False when the types no longer overlap in kind."""
        was, now = _types(o), _types(n)
        if was == now:
            return True
        what = f"type {_show(was)} -> {_show(now)}"
        if _covers(now, was):
            self.add("type-widened", path, what)
        elif _covers(was, now):
            self.add("type-narrowed", path, what)
        else:
            self.add("type-changed", path, what)
            return False
        return True

    def values(self, o: Mapping[str, Any], n: Mapping[str, Any], path: str) -> None:
        """``enum`` and ``const``."""
        if "enum" in o or "enum" in n:
            was = {_canon(v) for v in o["enum"]} if isinstance(o.get("enum"), list) else None
            now = {_canon(v) for v in n["enum"]} if isinstance(n.get("enum"), list) else None
            if was is None and now is not None:
                self.add("enum-narrowed", path, f"now limited to {', '.join(sorted(now))}")
            elif was is not None and now is None:
                self.add("enum-widened", path, "no longer limited to a list of values")
            elif was is not None and now is not None:
                if lost := sorted(was - now):
                    self.add("enum-narrowed", path, f"enum no longer has {', '.join(lost)}")
                if gained := sorted(now - was):
                    self.add("enum-widened", path, f"enum now also has {', '.join(gained)}")
        if _canon(o.get("const")) != _canon(n.get("const")):
            was_c, now_c = o.get("const"), n.get("const")
            if "const" not in o:
                self.add("const-added", path, f"now always {_canon(now_c)}")
            elif "const" not in n:
                self.add("const-removed", path, f"no longer always {_canon(was_c)}")
            else:
                self.add("const-changed", path, f"const {_canon(was_c)} -> {_canon(now_c)}")

    def bounds(self, o: Mapping[str, Any], n: Mapping[str, Any], path: str) -> None:
        """Limits, ``multipleOf``, ``uniqueItems`` and ``pattern``."""
        for keyword in (*_LOWER, *_UPPER, "multipleOf"):
            was, now = o.get(keyword), n.get(keyword)
            if was == now:
                continue
            if not isinstance(was, int | float) or not isinstance(now, int | float):
                tighter = now is not None
            elif keyword == "multipleOf":
                tighter = was % now != 0  # looser when every old multiple is a new one
            else:
                tighter = now > was if keyword in _LOWER else now < was
            kind = "bound-tightened" if tighter else "bound-loosened"
            self.add(kind, path, f"{keyword} {_canon(was)} -> {_canon(now)}")
        if bool(o.get("uniqueItems")) != bool(n.get("uniqueItems")):
            kind = "bound-tightened" if n.get("uniqueItems") else "bound-loosened"
            self.add(
                kind,
                path,
                f"uniqueItems {bool(o.get('uniqueItems'))} -> {bool(n.get('uniqueItems'))}",
            )
        was_p, now_p = o.get("pattern"), n.get("pattern")
        if was_p != now_p:
            kind = (
                "pattern-added"
                if was_p is None
                else "pattern-removed"
                if now_p is None
                else "pattern-changed"
            )
            self.add(kind, path, f"pattern {_canon(was_p)} -> {_canon(now_p)}")

    def notes(self, o: Mapping[str, Any], n: Mapping[str, Any], path: str) -> None:
        """``default``, ``format`` and a parameter's ``description``."""
        if _canon(o.get("default")) != _canon(n.get("default")) and (
            "default" in o or "default" in n
        ):
            self.add(
                "default-changed",
                path,
                f"default {_canon(o.get('default'))} -> {_canon(n.get('default'))}",
            )
        if o.get("format") != n.get("format"):
            self.add(
                "format-changed",
                path,
                f"format {_canon(o.get('format'))} -> {_canon(n.get('format'))}",
            )
        if path and o.get("description") != n.get("description"):
            self.add("description-changed", path, "description changed")

    def objects(
        self,
        o: Mapping[str, Any],
        n: Mapping[str, Any],
        path: str,
        seen: tuple[frozenset[str], ...],
    ) -> None:
        """Properties added, removed, made required or optional; then each one compared."""
        props_o, props_n = _mapping(o.get("properties")), _mapping(n.get("properties"))
        req_o, req_n = _names(o.get("required")), _names(n.get("required"))
        closed_o, closed_n = _closed(o), _closed(n)
        names = [*props_o, *(k for k in props_n if k not in props_o)]
        for name in names:
            where = _join(path, name)
            if name not in props_o:
                required = name in req_n
                what = (
                    "added" if self.output else f"added, {'required' if required else 'optional'}"
                )
                self.field("added-required" if required else "added", where, what)
            elif name not in props_n:
                self.field("removed" if closed_n else "removed-open", where, "removed")
            else:
                if name in req_o and name not in req_n:
                    self.field("made-optional", where, "no longer required")
                elif name in req_n and name not in req_o:
                    self.field("made-required", where, "now required")
                self.compare(props_o[name], props_n[name], where, seen)
        if not self.output and closed_o != closed_n:
            self.add(
                "object-closed" if closed_n else "object-opened",
                path,
                "additional properties " + ("refused" if closed_n else "accepted"),
            )
        extra_o, extra_n = o.get("additionalProperties"), n.get("additionalProperties")
        if isinstance(extra_o, Mapping) and isinstance(extra_n, Mapping):
            self.compare(extra_o, extra_n, _join(path, "*"), seen)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _names(value: Any) -> frozenset[str]:
    return (
        frozenset(v for v in value if isinstance(v, str))
        if isinstance(value, list)
        else frozenset()
    )


def _closed(node: Mapping[str, Any]) -> bool:
    return node.get("additionalProperties") is False or node.get("unevaluatedProperties") is False


def _pointer(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    """The schema a local ``$ref`` (``#/$defs/Name``) points to in ``root``, if any."""
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None
