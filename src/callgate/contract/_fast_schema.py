"""JSON Schemas for the common parameter types, written without pydantic.

Building a pydantic model and asking it for its JSON Schema costs about half a
millisecond a tool; a gateway registers thousands of tools and registers them
again whenever an upstream's list changes. For the types most tools take
(``int``, ``float``, ``str``, ``bool``, ``None``, ``Any``, ``Literal``, unions,
``list``/``set``/``frozenset``/``dict[str, X]``, constraints given with
``Annotated[..., Field(...)]`` or ``annotated_types``, and pydantic models) this
module writes the schema pydantic would write, byte for byte after
``clean_schema`` (``tests/contract/test_fast_schema.py`` compares the two over
every form it accepts). Anything else is :class:`Unsupported`: the caller then
asks pydantic, which also raises for types it cannot describe, so a type
pydantic refuses is still refused when the tool is registered.

A model's own schema is made once per class (and mode) and copied into each
tool that takes it.
"""

from __future__ import annotations

import math
import re
import types
import typing
import weakref
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

import annotated_types
import pydantic
from pydantic.fields import FieldInfo
from pydantic.types import Strict
from pydantic_core import PydanticUndefined

from callgate.contract.schema import clean_schema, closed_objects

Mode = Literal["validation", "serialization"]

_PRIMITIVES: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    type(None): "null",
    None: "null",
}
_NUMERIC = {
    annotated_types.Ge: ("ge", "minimum"),
    annotated_types.Gt: ("gt", "exclusiveMinimum"),
    annotated_types.Le: ("le", "maximum"),
    annotated_types.Lt: ("lt", "exclusiveMaximum"),
    annotated_types.MultipleOf: ("multiple_of", "multipleOf"),
}
_LENGTHS = {annotated_types.MinLen: "min_length", annotated_types.MaxLen: "max_length"}
_LENGTH_KEYWORDS = {
    "string": {"min_length": "minLength", "max_length": "maxLength"},
    "array": {"min_length": "minItems", "max_length": "maxItems"},
}
_DEF_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT_TYPES = (type(None), bool, int, float, str)

_model_schemas: weakref.WeakKeyDictionary[type, dict[Mode, tuple[dict[str, Any], dict[str, Any]]]]
_model_schemas = weakref.WeakKeyDictionary()


class Unsupported(Exception):
    """The type is outside this module's forms: ask pydantic."""


def input_schema(
    fields: Mapping[str, tuple[Any, Any, str | None]],
) -> dict[str, Any]:
    """The closed, title-free input schema of fields ``name: (annotation, default,
    description)`` (``PydanticUndefined`` for no default), in declaration order.

    Raises:
        Unsupported: a name, type or default needs pydantic.
    """
    builder = _Builder("validation")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, (annotation, default, description) in fields.items():
        if name.startswith(("_", "model_")) or hasattr(pydantic.BaseModel, name):
            raise Unsupported(name)  # pydantic refuses or warns about these names
        schema = builder.schema(annotation)
        if default is PydanticUndefined:
            required.append(name)
        else:
            schema["default"] = _default(default)
        if description is not None:
            schema["description"] = description
        properties[name] = _sorted(schema)
    out: dict[str, Any] = {}
    if builder.defs:
        out["$defs"] = {key: builder.defs[key] for key in sorted(builder.defs)}
    out["additionalProperties"] = False
    out["properties"] = properties
    if required:
        out["required"] = required
    out["type"] = "object"
    return out


def output_schema(annotation: Any) -> dict[str, Any]:
    """The title-free serialization schema of a return annotation.

    Raises:
        Unsupported: the type needs pydantic.
    """
    if _is_model(annotation):
        body, defs = _model_schema(annotation, "serialization")
        out: dict[str, Any] = _copy(body)
        if defs:
            out["$defs"] = _copy(defs)
            return _sorted(out)
        return out
    builder = _Builder("serialization")
    schema = builder.schema(annotation)
    if builder.defs:
        schema["$defs"] = {key: builder.defs[key] for key in sorted(builder.defs)}
    return _sorted(schema)


class _Builder:
    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.defs: dict[str, Any] = {}
        self._models: dict[str, type] = {}

    def schema(self, annotation: Any) -> dict[str, Any]:
        if annotation is Any:
            return {}
        origin = typing.get_origin(annotation)
        if origin is None:
            return self._plain(annotation)
        args = typing.get_args(annotation)
        if origin is Annotated:
            return self._annotated(args[0], args[1:])
        if origin is Literal:
            return _literal(args)
        if origin is Union or origin is types.UnionType:
            if Any in args:
                raise Unsupported(annotation)
            return {"anyOf": [_sorted(self.schema(arg)) for arg in args]}
        if origin in (list, set, frozenset) and len(args) == 1:
            out: dict[str, Any] = {"items": _sorted(self.schema(args[0])), "type": "array"}
            if origin is not list:
                out["uniqueItems"] = True
            return out
        if origin is dict and len(args) == 2 and args[0] is str:
            value = True if args[1] is Any else _sorted(self.schema(args[1]))
            return {"additionalProperties": value, "type": "object"}
        raise Unsupported(annotation)

    def _plain(self, annotation: Any) -> dict[str, Any]:
        if (annotation is None or isinstance(annotation, type)) and annotation in _PRIMITIVES:
            return {"type": _PRIMITIVES[annotation]}
        if annotation is list:
            return {"items": {}, "type": "array"}
        if annotation is dict:
            return {"additionalProperties": True, "type": "object"}
        if _is_model(annotation):
            return {"$ref": f"#/$defs/{self._add_model(annotation)}"}
        raise Unsupported(annotation)

    def _add_model(self, model: type[pydantic.BaseModel]) -> str:
        name = model.__name__
        known = self._models.setdefault(name, model)
        if known is not model:
            raise Unsupported(model)  # pydantic would name the two apart
        body, defs = _model_schema(model, self.mode)
        for key, value in ((name, body), *defs.items()):
            if key in self.defs:
                if self.defs[key] != value:
                    raise Unsupported(model)
                continue
            self.defs[key] = _copy(value)
        return name

    def _annotated(self, base: Any, metadata: tuple[Any, ...]) -> dict[str, Any]:
        out = self.schema(base)
        description: str | None = None
        constraints: list[Any] = []
        for meta in metadata:
            if isinstance(meta, FieldInfo):
                if not meta._attributes_set.keys() <= {"description"}:
                    raise Unsupported(meta)
                if meta.description is not None:
                    description = meta.description
                constraints.extend(meta.metadata)
            else:
                constraints.append(meta)
        kind = _constrained_kind(base)
        for constraint in constraints:
            _constrain(out, constraint, kind)
        if description is not None:
            out["description"] = description
        return out


def _constrained_kind(base: Any) -> str | None:
    """What kind of constraints ``base`` takes: ``number``, ``string``, ``array``."""
    if base is int or base is float:
        return "number"
    if base is str:
        return "string"
    if base is list or typing.get_origin(base) is list:
        return "array"
    return None


def _constrain(schema: dict[str, Any], constraint: Any, kind: str | None) -> None:
    if isinstance(constraint, Strict):
        return  # validation only: nothing in the schema
    numeric = _NUMERIC.get(type(constraint))
    if numeric is not None and kind == "number":
        value = getattr(constraint, numeric[0])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unsupported(constraint)
        schema[numeric[1]] = value
        return
    length = _LENGTHS.get(type(constraint))
    keywords = _LENGTH_KEYWORDS.get(kind or "")
    if length is not None and keywords is not None:
        schema[keywords[length]] = getattr(constraint, length)
        return
    if type(constraint).__name__ == "_PydanticGeneralMetadata" and kind == "string":
        values = dict(vars(constraint))
        pattern = values.pop("pattern", None)
        if not values and isinstance(pattern, str):
            schema["pattern"] = pattern
            return
    raise Unsupported(constraint)


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {type(value) for value in values}
    if not kinds <= {str, int, bool}:
        raise Unsupported(values)
    out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    if len(kinds) == 1:
        out["type"] = _PRIMITIVES[kinds.pop()]
    return out


def _default(value: Any) -> Any:
    if type(value) not in _DEFAULT_TYPES or (isinstance(value, float) and not math.isfinite(value)):
        raise Unsupported(value)
    return value


def _is_model(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, pydantic.BaseModel)
        and not issubclass(annotation, pydantic.RootModel)
        and annotation.__pydantic_complete__
        and not annotation.__pydantic_generic_metadata__["parameters"]
        and annotation.__pydantic_generic_metadata__["origin"] is None
        and _DEF_NAME.fullmatch(annotation.__name__) is not None
    )


def _model_schema(
    model: type[pydantic.BaseModel], mode: Mode
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A model's own schema (titles dropped; closed for input) and its ``$defs``."""
    per_mode = _model_schemas.setdefault(model, {})
    cached = per_mode.get(mode)
    if cached is None:
        schema = clean_schema(model.model_json_schema(mode=mode))
        if mode == "validation":
            schema = closed_objects(schema)
        defs = schema.pop("$defs", {})
        if "$ref" in schema or not isinstance(defs, dict):
            raise Unsupported(model)  # a self-referencing model: pydantic lays it out
        cached = per_mode[mode] = (schema, defs)
    return cached


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its keys in pydantic's order (sorted; the nodes under it are
    sorted already, and ``properties`` keep their declaration order)."""
    return {key: node[key] for key in sorted(node)}


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value: schemas of one model are shared by no two tools."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
