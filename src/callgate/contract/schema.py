"""Tidy generated JSON Schemas for a model's eyes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the ``title`` entries pydantic derives from Python names.

    They repeat the property name and cost tokens on every request. Property
    *names* called ``title`` are kept (only schema keywords are removed).
    """
    return _clean(schema)  # type: ignore[no-any-return]


def _clean(node: Any, *, in_properties: bool = False) -> Any:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not in_properties and key == "title" and isinstance(value, str):
                continue
            is_map = not in_properties and key in ("properties", "patternProperties", "$defs")
            out[key] = _clean(value, in_properties=is_map)
        return out
    if isinstance(node, list):
        return [_clean(item) for item in node]
    return node


def without_required(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with every ``required`` list removed (nested ones included)."""
    return _strip_required(schema)  # type: ignore[no-any-return]


def _strip_required(node: Any, *, in_properties: bool = False) -> Any:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not in_properties and key == "required" and isinstance(value, list):
                continue
            is_map = not in_properties and key in ("properties", "patternProperties", "$defs")
            out[key] = _strip_required(value, in_properties=is_map)
        return out
    if isinstance(node, list):
        return [_strip_required(item) for item in node]
    return node
