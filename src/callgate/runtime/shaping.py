"""Fit a payload into the model's budget: whole items first, text as a last resort.

Sizes are estimated in tokens as JSON characters / 4: close enough for English
and JSON, and needs no tokenizer. A large result is serialized once: the shape
stage measures, cuts and stores the same text (see ``stages/shape.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

CHARS_PER_TOKEN = 4


def dumps(value: Any) -> str:
    """``value`` as compact JSON text: non-ASCII kept as is, a value JSON has no
    type for as its ``str``.

    pydantic-core's encoder: on a megabyte of rows it is about eight times as
    fast as the ``json`` module. What it refuses (a lone surrogate, nesting
    deeper than it goes) is left to the ``json`` module, which may raise.
    """
    try:
        return to_json(value, fallback=str).decode()
    except PydanticSerializationError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_tokens(value: Any) -> int:
    return -(-len(dumps(value)) // CHARS_PER_TOKEN)


@dataclass(kw_only=True, frozen=True)
class Page:
    payload: Any
    shown: int
    total: int
    unit: str
    key: str | None
    next_offset: int | None
    """Where the next page starts; None when this page reaches the end."""


def _largest_key(payload: dict[str, Any], kind: type) -> str | None:
    """The key of the largest value of type ``kind`` (list or str), if any.

    Values are measured only when there is a choice: a result with one list
    (the usual ``{"rows": [...], "total": n}``) is not serialized again.
    """
    keys = [key for key, value in payload.items() if isinstance(value, kind)]
    if len(keys) <= 1:
        return keys[0] if keys else None
    return max(keys, key=lambda key: len(dumps(payload[key])))


def _take_items(items: list[Any], offset: int, budget: int) -> list[Any]:
    taken: list[Any] = []
    used = 2
    for item in items[offset:]:
        size = len(dumps(item)) + 1
        if used + size > budget and taken:
            break
        if used + size > budget:
            return []
        taken.append(item)
        used += size
    return taken


def page(
    payload: Any,
    *,
    offset: int,
    budget_chars: int,
    key: str | None,
    unit: str,
    text: str | None = None,
) -> Page:
    """The page of ``payload`` starting at ``offset`` that fits ``budget_chars``
    (``text``: the payload's :func:`dumps`, if the caller has it)."""
    if unit == "items":
        items = payload[key] if key is not None else payload
        rest_size = len(dumps({k: v for k, v in payload.items() if k != key})) if key else 0
        taken = _take_items(items, offset, max(budget_chars - rest_size, 0))
        if taken or offset >= len(items):
            shown_payload: Any = {**payload, key: taken} if key is not None else taken
            end = offset + len(taken)
            return Page(
                payload=shown_payload,
                shown=len(taken),
                total=len(items),
                unit="items",
                key=key,
                next_offset=end if end < len(items) else None,
            )
        # Not even one item fits: fall back to characters of the whole JSON text.
        unit, offset, key = "chars", 0, None
    if key is not None and isinstance(payload.get(key), str):
        # One long text field of an object: cut the text, keep the object's shape.
        field = payload[key]
        rest_size = len(dumps({k: v for k, v in payload.items() if k != key})) + 4
        chunk = field[offset : offset + max(budget_chars - rest_size, 1)]
        end = offset + len(chunk)
        return Page(
            payload={**payload, key: chunk},
            shown=len(chunk),
            total=len(field),
            unit="chars",
            key=key,
            next_offset=end if end < len(field) else None,
        )
    if text is None:
        text = dumps(payload)
    chunk = text[offset : offset + budget_chars]
    end = offset + len(chunk)
    return Page(
        payload=chunk,
        shown=len(chunk),
        total=len(text),
        unit="chars",
        key=None,
        next_offset=end if end < len(text) else None,
    )


def size_in_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` (without encoding it when it is ASCII)."""
    return len(text) if text.isascii() else len(text.encode(errors="replace"))


def first_page(payload: Any, budget_chars: int, *, text: str | None = None) -> Page | None:
    """None when the payload fits; else its first page. ``text``: the payload's
    :func:`dumps`, when the caller has it already (a large payload is serialized once)."""
    if text is None:
        text = dumps(payload)
    if len(text) <= budget_chars:
        return None
    if isinstance(payload, list):
        return page(payload, offset=0, budget_chars=budget_chars, key=None, unit="items")
    if isinstance(payload, dict):
        key = _largest_key(payload, list)
        if key is not None:
            return page(payload, offset=0, budget_chars=budget_chars, key=key, unit="items")
        key = _largest_key(payload, str)
        rest = {k: v for k, v in payload.items() if k != key}
        if key is not None and len(dumps(rest)) < budget_chars // 2:
            return page(payload, offset=0, budget_chars=budget_chars, key=key, unit="chars")
    return page(payload, offset=0, budget_chars=budget_chars, key=None, unit="chars", text=text)


def notice(pg: Page, cursor: str | None, reader: str) -> str:
    what = "items" if pg.unit == "items" else "characters"
    if pg.unit == "chars" and pg.key is None:
        what = "characters of the JSON text"
    where = f" of '{pg.key}'" if pg.key else ""
    text = f"truncated: showing {pg.shown:,} of {pg.total:,} {what}{where}"
    if cursor:
        text += f"; call {reader} with cursor {cursor!r} to read more"
    return text + "."
