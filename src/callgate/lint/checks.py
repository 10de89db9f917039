"""The checks of one tool at a time (see :mod:`callgate.lint.rules` for what each rule is)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from callgate.contract.annotations import RiskTier
from callgate.lint import _words as w
from callgate.lint.facts import ToolFacts

__all__ = ["check_tool"]

Hit = tuple[str, str]
"""A rule id and what exactly was found."""

SHORT_CHARS, LONG_CHARS, MAX_DEPTH = 40, 2000, 3


def check_tool(tool: ToolFacts) -> Iterator[Hit]:
    """Every finding of ``tool`` alone."""
    yield from _names(tool)
    yield from _description(tool)
    yield from _parameters(tool)
    yield from _schema(tool)
    yield from _results(tool)
    yield from _risk(tool)


def _names(tool: ToolFacts) -> Iterator[Hit]:
    if tool.namespace is None:
        yield "name-namespace", f"{tool.name!r} has no namespace prefix"
    parts = w.words(tool.local_name)
    if parts and not set(parts) & w.VERBS and "to" not in parts[1:-1]:
        yield "name-verb", f"{tool.local_name!r} names no action (no verb in it)"


def _description(tool: ToolFacts) -> Iterator[Hit]:
    text = tool.description.strip()
    if not text:
        yield "description-missing", "no description"
        return
    if len(text) < SHORT_CHARS or len(text.split()) < 6:
        yield "description-short", f"{len(text)} characters: {text!r}"
    if len(text) > LONG_CHARS:
        yield "description-long", f"{len(text):,} characters (at most {LONG_CHARS:,} advised)"
    if not w.WHEN.search(text):
        yield "description-when", "does not say when to use it (or when not to)"
    required = sorted(tool.required & set(tool.parameters))
    lowered = text.lower()
    if required and not any(
        name.lower() in lowered or " ".join(w.words(name)) in lowered for name in required
    ):
        yield "description-params", f"mentions none of the required {', '.join(required)}"


def _parameters(tool: ToolFacts) -> Iterator[Hit]:
    for name, schema in tool.parameters.items():
        if not isinstance(schema, Mapping):
            continue
        key = name.lower()
        described = str(schema.get("description") or schema.get("title") or "").strip()
        if not described:
            yield "param-description", f"{name!r} has no description"
        types = _types(schema)
        if key in w.TRUSTED or "_".join(w.words(name)) in w.TRUSTED:
            yield (
                "param-trusted",
                f"{name!r} looks like a value the server should set, not the model",
            )
        if "string" in types and not _constrained(schema):
            snake = "_".join(w.words(name))
            for fmt, pattern in w.FORMATS:
                if pattern.search(snake):
                    yield "param-format", f"{name!r} looks like a {fmt} but gives no format"
                    break
            if (
                described
                and "examples" not in schema
                and "default" not in schema
                and not w.EXAMPLE_GIVEN.search(described)
            ):
                yield "param-example", f"{name!r} gives no example value"
            if w.LISTED_VALUES.search(described) and not w.EXAMPLES.search(described):
                yield "param-enum", f"{name!r} lists its values in prose: {described[:80]!r}"
        if key in w.IDENTIFIED and (
            "integer" in types or any(t in described.lower() for t in (" id", "identifier"))
        ):
            yield "param-identifier", f"{name!r} holds an identifier: call it {key}_id"


def _schema(tool: ToolFacts) -> Iterator[Hit]:
    for name in sorted(tool.required):
        schema = tool.parameters.get(name)
        if isinstance(schema, Mapping) and "default" in schema:
            yield (
                "schema-required-default",
                f"{name!r} is required yet defaults to {schema['default']!r}",
            )
    depth = _depth(tool.input_schema)
    if depth > MAX_DEPTH:
        yield "schema-nesting", f"objects nested {depth} deep"
    for path, schema in _walk(tool.input_schema, ""):
        types = _types(schema)
        if (
            "object" in types
            and path
            and not schema.get("properties")
            and schema.get("additionalProperties") is not False
        ):
            yield "schema-free-object", f"{path!r} is an object with no declared properties"
        if "array" in types and "maxItems" not in schema:
            yield "schema-unbounded-array", f"{path!r} has no maxItems"
    for name, schema in tool.parameters.items():
        if not isinstance(schema, Mapping):
            continue
        types = _types(schema)
        if types == {"string"} and not _constrained(schema) and "maxLength" not in schema:
            yield "schema-unbounded-string", f"{name!r} takes any string"
        if types == {"boolean"} and w.MODE_FLAG.search("_".join(w.words(name))):
            yield "schema-boolean-mode", f"{name!r} is a boolean choosing a mode or an order"


def _results(tool: ToolFacts) -> Iterator[Hit]:
    params = {"_".join(w.words(n)) for n in tool.parameters} | {n.lower() for n in tool.parameters}
    reads = tool.risk is RiskTier.READ or tool.annotations.read_only is True
    parts = w.words(tool.local_name)
    plural = any(
        p.endswith("s") and not p.endswith("ss") and len(p) > 3 and p not in w.NOT_PLURAL
        for p in parts
    )
    listing = (
        bool(set(parts) & w.LISTING)
        or (bool(set(parts) & w.LOOKUP) and plural)
        or _returns_list(tool)
    )
    if (reads or tool.risk is None) and listing:
        if not params & w.PAGING:
            yield "result-paging", "lists results with no limit, page or cursor parameter"
        if not tool.concise and not params & w.CONCISE:
            yield "result-concise", "no concise/detailed choice for a list of results"
    vague = [m for m in tool.error_messages if not w.NEXT_STEP.search(m)]
    if vague:
        more = f" (and {len(vague) - 1} more)" if len(vague) > 1 else ""
        yield "error-next-step", f"no next step in {vague[0][:80]!r}{more}"


def _risk(tool: ToolFacts) -> Iterator[Hit]:
    hints = tool.annotations
    parts = set(w.words(tool.local_name))
    if parts & w.DESTRUCTIVE and hints.destructive is not True and hints.read_only is not True:
        yield (
            "risk-destructive-unmarked",
            f"{tool.local_name!r} sounds destructive: destructive is not set",
        )
    said = (hints.read_only, hints.destructive, hints.idempotent, hints.open_world)
    if tool.trusted_source and all(h is None for h in said):
        yield "risk-hints-missing", "no behaviour hints declared"
    if (
        tool.governed
        and tool.risk is not RiskTier.READ
        and hints.idempotent is not True
        and not tool.has_preview
        and not tool.approval_rule
    ):
        yield (
            "risk-unguarded-write",
            f"a {tool.risk} tool, not idempotent, not previewed, no approval rule",
        )


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            if isinstance(option, Mapping):
                found |= _types(option)
    return found - {"null"} if found else set()


def _constrained(schema: Mapping[str, Any]) -> bool:
    return any(k in schema for k in ("enum", "const", "format", "pattern"))


def _walk(
    schema: Mapping[str, Any], path: str, root: Mapping[str, Any] | None = None, depth: int = 0
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every subschema with its path (``a.b``, ``items[]``), local references (``$ref``)
    followed (to a bounded depth: a recursive schema is walked a few levels)."""
    root = schema if root is None else root
    if depth > 12:
        return
    schema = _resolved(schema, root)
    yield path, schema
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            if isinstance(sub, Mapping):
                yield from _walk(sub, f"{path}.{name}" if path else name, root, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _walk(items, f"{path}[]", root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key) or ():
            if isinstance(option, Mapping) and _types(_resolved(option, root)) - {"null"}:
                yield from _walk(option, path, root, depth + 1)


def _resolved(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, Mapping) else None
    return target if isinstance(target, Mapping) else schema


def _depth(schema: Mapping[str, Any]) -> int:
    """Objects nested inside the input (the input itself is depth 0)."""
    deepest = 0
    for path, sub in _walk(schema, ""):
        if path and "object" in _types(sub):
            deepest = max(deepest, path.replace("[]", "").count(".") + 1)
    return deepest


def _returns_list(tool: ToolFacts) -> bool:
    """Whether its output is a list of results: an array, or an object around one
    (``items``, ``results``, ...); a record with a list field (a note's tags) is not."""
    out = tool.output_schema
    if not out:
        return False
    if "array" in _types(out):
        return True
    props = out.get("properties")
    return isinstance(props, Mapping) and any(
        name.lower() in w.RESULT_LISTS and isinstance(s, Mapping) and "array" in _types(s)
        for name, s in props.items()
    )
