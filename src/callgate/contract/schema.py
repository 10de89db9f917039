"""Tidy generated JSON Schemas for a model's eyes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_NAME_MAPS = ("properties", "patternProperties", "$defs")
"""Keywords whose values map *names* to schemas: their keys are never keywords."""


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the ``title`` entries pydantic derives from Python names.

    They repeat the property name and cost tokens on every request. Property
    *names* called ``title`` are kept (only schema keywords are removed).
    """
    return _without_keyword(schema, "title", str)  # type: ignore[no-any-return]


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
