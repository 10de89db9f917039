"""Argument validation with a compiled Draft 2020-12 validator (jsonschema-rs).

jsonschema-rs compiles a schema once and validates in Rust; on the BFCL corpus
it is 7-12x faster than the pure-Python ``jsonschema`` package one call among
other work, as in a gate, and 29-47x back to back (see docs/benchmarks.md). Its errors carry a structured ``kind``, which lets the
messages below name the field, the problem and what is allowed.

Messages are bounded whatever the model sent: at most ``MAX_MESSAGES`` problems
(then "and N more problems"), ``MAX_UNKNOWN_NAMES`` unknown argument names per
object (then "and N more unknown arguments"), and a value quoted in a message cut short.
100,000 unknown arguments make a few hundred characters, not megabytes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from callgate.contract.schema import compile_schema
from callgate.runtime.suggest import did_you_mean

_JSON_TYPES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}
MAX_MESSAGES = 5
MAX_UNKNOWN_NAMES = 10
_TAIL_CHARS = 160
"""Characters kept of a long message's end: what the value broke."""
MAX_MESSAGE_CHARS = 300
_COUNTED_ERRORS = 1000
"""Problems counted at most for "and N more" (counting stops there: "over N")."""


def json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def field_path(path: Sequence[str | int]) -> str:
    """``items[2].sku`` from ``['items', 2, 'sku']``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class ArgumentValidator:
    """A compiled validator for one tool's model-facing input schema."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = dict(schema)
        self._validator = compile_schema(self.schema)

    def errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """Messages for the model, empty when the arguments are valid."""
        if self._validator.is_valid(arguments):
            return []
        found = self._validator.iter_errors(arguments)
        errors = list(itertools.islice(found, _COUNTED_ERRORS))
        more = next(found, None) is not None
        # An unknown argument first: it usually explains the "missing" one next to it.
        errors.sort(key=lambda e: type(e.kind).__name__ != "AdditionalProperties")
        messages = [self._describe(_within(err)) for err in errors[:MAX_MESSAGES]]
        left = len(errors) - MAX_MESSAGES
        if left > 0:
            messages.append(f"... and {'over ' if more else ''}{left:,} more problems.")
        return messages

    def _subschema(self, schema_path: Sequence[str | int]) -> Mapping[str, Any]:
        """The schema node that holds the failing keyword (for allowed values)."""
        node: Any = self.schema
        for part in list(schema_path)[:-1]:
            if isinstance(node, Mapping) and "$ref" in node and part not in node:
                node = self._resolve(node["$ref"])
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return {}
        return node if isinstance(node, Mapping) else {}

    def _resolve(self, ref: str) -> Any:
        node: Any = self.schema
        for part in ref.removeprefix("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, Mapping) else {}
        return node

    def _properties_at(self, schema_path: Sequence[str | int]) -> Mapping[str, Any]:
        """``properties`` of the object schema whose keyword is at ``schema_path``."""
        path = schema_path
        node = self._subschema(path)
        if "$ref" in node:
            node = self._resolve(node["$ref"])
        props = node.get("properties", {})
        return props if isinstance(props, Mapping) else {}

    def _describe(self, err: Any) -> str:
        kind = type(err.kind).__name__
        path = field_path(err.instance_path)
        where = f"Argument {path!r}" if path else "The arguments"
        if kind == "Required":
            missing = err.kind.property
            props = self._properties_at(err.schema_path)
            desc = props.get(missing, {}).get("description") if props else None
            extra = f" ({desc})" if desc else ""
            prefix = f"{path}." if path else ""
            return f"Missing required argument '{prefix}{missing}'{extra}."
        if kind == "AdditionalProperties":
            props = self._properties_at(err.schema_path)
            allowed = sorted(props)
            unexpected = list(err.kind.unexpected)
            parts = [
                f"Unknown argument {_name(name)}." + did_you_mean(name[:100], allowed)
                for name in unexpected[:MAX_UNKNOWN_NAMES]
            ]
            if len(unexpected) > MAX_UNKNOWN_NAMES:
                parts.append(
                    f"... and {len(unexpected) - MAX_UNKNOWN_NAMES:,} more unknown arguments."
                )
            allowed_text = ", ".join(allowed) if allowed else "none"
            scope = f" of {path!r}" if path else ""
            return " ".join(parts) + f" Allowed arguments{scope}: {allowed_text}."
        if kind == "Enum":
            options = list(err.kind.options)
            shown = ", ".join(json.dumps(o) for o in options[:20])
            hint = ""
            if isinstance(err.instance, str):
                hint = did_you_mean(err.instance[:100], [o for o in options if isinstance(o, str)])
            return (
                f"{where}: {_short(err.instance)[1:-1]} is not allowed. Allowed values: {shown}."
                + hint
            )
        if kind == "Type":
            expected = self._subschema(err.schema_path).get("type", "the declared type")
            if isinstance(expected, list):
                expected = " or ".join(expected)
            return (
                f"{where}: expected {expected}, got {json_type(err.instance)} "
                f"{_short(err.instance)}."
            )
        if kind in ("Pattern", "Format"):
            described = self._described_at(err.schema_path)
            expected = f" Expected: {described}" if described else ""
            return f"{where}: {_short(err.instance)[1:-1]} is not in the expected format.{expected}"
        # The validator's own text may quote the whole value: cut it.
        return _bounded(f"{where}: {err.message}.")

    def _described_at(self, schema_path: Sequence[str | int]) -> str | None:
        """The nearest description at or above the failing keyword (items inherit
        their array's)."""
        path = list(schema_path)[:-1]
        while True:
            node = self._subschema([*path, "_"])
            if "$ref" in node:
                node = self._resolve(node["$ref"])
            desc = node.get("description")
            if isinstance(desc, str):
                return desc.rstrip(".") + "."
            if not path:
                return None
            path.pop()


def _within(err: Any) -> Any:
    """For "none of anyOf/oneOf matched": the one branch the value was meant for.

    ``Optional[Model]`` is ``anyOf: [Model, null]``; an object with a bad field
    fails both branches, and "not valid under any of the schemas" says nothing.
    When every branch but one fails on the value's type itself, that one branch's
    first error is the real problem.
    """
    while type(err.kind).__name__ in ("AnyOf", "OneOfNotValid"):
        meant = [
            branch
            for branch in err.kind.context
            if branch
            and not any(
                type(e.kind).__name__ == "Type" and list(e.instance_path) == list(err.instance_path)
                for e in branch
            )
        ]
        if len(meant) != 1:
            break
        err = meant[0][0]
    return err


def _bounded(message: str) -> str:
    """A message cut to about ``MAX_MESSAGE_CHARS`` (a value it quotes may be huge).

    The cut is in the middle: the validator quotes the value first and says what is
    wrong with it last ("'999...' is longer than 8 characters"), and the model
    needs both ends.
    """
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    tail = min(_TAIL_CHARS, MAX_MESSAGE_CHARS // 2)
    head = MAX_MESSAGE_CHARS - tail - 40
    cut = f" ... ({len(message) - head - tail:,} characters cut) ... "
    return message[:head].rstrip() + cut + message[-tail:].lstrip()


def _name(name: str) -> str:
    """A name the model sent, quoted, its first 100 characters at most."""
    return repr(name) if len(name) <= 100 else f"{name[:100]!r}... ({len(name):,} characters)"


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return f"({text[:60]}...)" if len(text) > 60 else f"({text})"


def pydantic_messages(exc: pydantic.ValidationError) -> list[str]:
    """Model-facing messages for what the tool's own validators rejected."""
    items = exc.errors(include_url=False)
    out = []
    for item in items[:MAX_MESSAGES]:
        path = field_path([p for p in item["loc"] if isinstance(p, (str, int))])
        where = f"Argument {path!r}" if path else "The arguments"
        out.append(_bounded(f"{where}: {item['msg']}."))
    if len(items) > MAX_MESSAGES:
        out.append(f"... and {len(items) - MAX_MESSAGES:,} more problems.")
    return out
