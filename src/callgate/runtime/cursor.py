"""Opaque cursors into results kept in the store."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from callgate.errors import UserError


class BadCursor(UserError, ValueError):
    """The cursor is not one callgate issued."""


@dataclass(kw_only=True, frozen=True)
class Cursor:
    ref: str
    offset: int
    unit: str
    """``items`` or ``chars``."""
    key: str | None = None
    """For a dict payload, the key of the list being paged."""

    def encode(self) -> str:
        data = {"r": self.ref, "o": self.offset, "u": self.unit}
        if self.key is not None:
            data["k"] = self.key
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """Raises BadCursor for anything callgate did not issue."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            data = json.loads(raw)
            cursor = cls(
                ref=str(data["r"]),
                offset=int(data["o"]),
                unit=str(data["u"]),
                key=data.get("k"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BadCursor("not a valid cursor") from exc
        if cursor.offset < 0 or cursor.unit not in ("items", "chars"):
            raise BadCursor("not a valid cursor")
        return cursor
