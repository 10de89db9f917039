"""Tidy generated JSON Schemas for a model's eyes, and compile schemas without
fetching anything they name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema_rs

_NAME_MAPS = ("properties", "patternProperties", "$defs")
"""Keywords whose values map *names* to schemas: their keys are never keywords."""


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the ``title`` entries pydantic derives from Python names.

    They repeat the property name and cost tokens on every request. Property
    *names* called ``title`` are kept (only schema keywords are removed).
    """
    return _without_keyword(schema, "title", str)  # type: ignore[no-any-return]


def closed_objects(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with every object that lists its ``properties`` closed
    (``additionalProperties: false``), at any depth, ``$defs`` included.

    An input schema is as strict inside as at its top: a nested model would
    otherwise accept ``{"sku": "a", "qty": 1, "extra": 1}`` and its pydantic
    model drop ``extra`` without a word. An object that states
    ``additionalProperties`` (a model with ``extra="allow"``, a ``dict[str, X]``)
    keeps what it states.
    """
    return _closed(schema)  # type: ignore[no-any-return]


def _closed(node: Any, *, names: bool = False) -> Any:
    if isinstance(node, Mapping):
        out = {
            key: _closed(value, names=not names and key in _NAME_MAPS)
            for key, value in node.items()
        }
        if not names and "properties" in node and "additionalProperties" not in node:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(item) for item in node]
    return node


def without_required(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with every ``required`` list removed (nested ones included)."""
    return _without_keyword(schema, "required", list)  # type: ignore[no-any-return]


def _without_keyword(node: Any, keyword: str, kind: type, *, names: bool = False) -> Any:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not names and key == keyword and isinstance(value, kind):
                continue
            is_map = not names and key in _NAME_MAPS
            out[key] = _without_keyword(value, keyword, kind, names=is_map)
        return out
    if isinstance(node, list):
        return [_without_keyword(item, keyword, kind) for item in node]
    return node


def no_remote_refs(uri: str) -> Any:
    """The validators' retriever: a ``$ref`` to another document is never fetched.

    An upstream's schema is untrusted input: fetching what it names would let it
    make the gateway send requests (and block while they run). References inside
    the schema (``#/$defs/...``) need no retrieval and work.

    Raises:
        ValueError: always.
    """
    raise ValueError(f"callgate does not fetch schemas named by $ref ({uri})")


def compile_schema(schema: Mapping[str, Any]) -> Any:
    """A Draft 2020-12 validator of ``schema`` that fetches nothing.

    Raises:
        jsonschema_rs.ValidationError: the schema is invalid or refers to another document.
    """
    return jsonschema_rs.Draft202012Validator(dict(schema), retriever=no_remote_refs)
