"""How the console shows values: numbers, times, JSON, and a preview's impact as
a before/after diff. Pure functions over stored records (per-tool figures come
aggregated from the store: ``ConsoleRecords.tool_figures``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ImpactRow",
    "impact_rows",
    "number",
    "origin",
    "pretty",
    "when",
]


def number(value: Any) -> str:
    """``10000`` -> ``10,000``; ``0.5`` -> ``0.5``; anything else as text."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.6g}" if abs(value) >= 1000 else f"{value:.6g}"
    if value is None:
        return "—"
    return str(value)


def when(value: datetime | str | None) -> str:
    """A UTC time to the second, as people read it: ``2026-12-05 13:04:11 UTC``."""
    if value is None:
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def origin(session_id: str | None) -> tuple[str, str | None]:
    """Where a call came from, by its session id: a label, and the run's id when
    an agent run made it (``agent:<run id>``)."""
    if not session_id:
        return "a direct call (no session)", None
    if session_id.startswith("agent:"):
        return "an agent run", session_id.removeprefix("agent:")
    if session_id.startswith(("mcp-", "stdio-")):
        return "an MCP client session", None
    return "a session", None


def pretty(value: Any) -> str:
    """JSON, indented, as stored (keys in their order)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ImpactRow:
    """One line of a preview's diff: ``daily budget  1,200 -> 2,160  +960 (+80%)``."""

    label: str
    before: str
    after: str
    change: str
    changed: bool


def _delta(before: Any, after: Any) -> str:
    numeric = (int, float)
    if isinstance(before, bool) or isinstance(after, bool):
        return "changed" if before != after else ""
    if isinstance(before, numeric) and isinstance(after, numeric):
        diff = after - before
        text = ("+" if diff > 0 else "") + number(diff) if diff else "no change"
        if before and diff:
            pct = diff / abs(before) * 100
            text += f" ({'+' if pct > 0 else ''}{pct:.3g}%)"
        return text
    return "changed" if before != after else "no change"


def impact_rows(impact: Any) -> tuple[list[ImpactRow], list[tuple[str, str]]]:
    """A preview's impact as diff rows and the remaining facts.

    Pairs are ``X_before``/``X_after`` keys, or the keys of ``before`` and
    ``after`` objects; every other key is a fact (``name``, ``owner``, ...).
    Anything that is not an object is one fact, ``impact``.
    """
    if not isinstance(impact, Mapping):
        return [], ([] if impact is None else [("impact", _text(impact))])
    rows: list[ImpactRow] = []
    paired: set[str] = set()
    before_obj, after_obj = impact.get("before"), impact.get("after")
    if isinstance(before_obj, Mapping) and isinstance(after_obj, Mapping):
        paired |= {"before", "after"}
        for key in dict.fromkeys([*before_obj, *after_obj]):
            b, a = before_obj.get(key), after_obj.get(key)
            rows.append(_row(str(key), b, a))
    for key in impact:
        if isinstance(key, str) and key.endswith("_before") and f"{key[:-7]}_after" in impact:
            stem = key[:-7]
            rows.append(_row(stem, impact[key], impact[f"{stem}_after"]))
            paired |= {key, f"{stem}_after"}
    facts = [(str(k), _text(v)) for k, v in impact.items() if k not in paired]
    return rows, facts


def _row(label: str, before: Any, after: Any) -> ImpactRow:
    return ImpactRow(
        label=label.replace("_", " "),
        before=_text(before),
        after=_text(after),
        change=_delta(before, after),
        changed=before != after,
    )


def _text(value: Any) -> str:
    if isinstance(value, (Mapping, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return number(value)
