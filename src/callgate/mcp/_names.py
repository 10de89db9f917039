"""Tool names on the wire: host-safe, namespaced, mapped back exactly.

callgate names a tool ``toolbox.tool``. The MCP specification allows the dot,
but several hosts refuse any tool name outside ``^[a-zA-Z0-9_-]{1,64}$`` (and
the OpenAI and Anthropic APIs, which hosts hand the names to, accept nothing
else), so by default a server shows ``toolbox__tool``. The separator is a
setting (``callgate serve --tool-separator``); ``.`` serves the dotted names.
A toolbox served unprefixed shows its tools' bare names.

The mapping is a table built from the tools, never a parse of a name: a wire
name is the tool it was made from, or no tool at all. Two tools that would
show the same name (``a_b`` + ``c`` and ``a`` + ``b_c`` with ``_``) are refused
when the server is built, as are names over 64 characters, each with the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from callgate.contract.naming import rename_in_schema, rename_in_text

if TYPE_CHECKING:
    from callgate.contract import Toolbox, ToolSpec
    from callgate.runtime.gate import Gate

__all__ = ["DEFAULT_SEPARATOR", "MAX_WIRE_NAME", "WireNames"]

DEFAULT_SEPARATOR = "__"
"""Between toolbox and tool on the wire: host-safe, and with callgate's names
(letters, digits, ``_``, ``-``) it takes a name with ``__`` in it to collide."""

MAX_WIRE_NAME = 64
"""The longest tool name hosts and model APIs accept."""

_SEPARATOR = re.compile(r"[._-]{1,4}")
_HOST_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_DOTTED = re.compile(r"[A-Za-z0-9_.-]+")


def _clash(first: str, second: str, name: str) -> ValueError:
    return ValueError(
        f"tools {first!r} and {second!r} would both be served as {name!r}; "
        "choose another tool separator (--tool-separator) or rename one of them"
    )


class WireNames:
    """The names one server shows for the gate's tools, and the way back.

    Implements :class:`callgate.contract.ToolNames`, so the chain's texts name
    tools as the client sees them. Kept in step when a toolbox changes: the
    names of the tools it gained are checked and added, those it lost dropped.

    Args:
        gate: whose tools are named.
        separator: between toolbox and tool (``__``, ``_``, ``-``, ``.`` ...).
        unprefixed: toolboxes whose tools show their bare names.

    Raises:
        ValueError: an unusable separator, an unknown toolbox to serve
            unprefixed, a name over 64 characters, or two tools with one name.
    """

    def __init__(
        self, gate: Gate, *, separator: str = DEFAULT_SEPARATOR, unprefixed: Iterable[str] = ()
    ) -> None:
        if not _SEPARATOR.fullmatch(separator):
            raise ValueError(
                f"tool separator {separator!r} must be 1-4 of the characters '_', '-' and '.' "
                f"(default {DEFAULT_SEPARATOR!r}; '.' serves the dotted names)"
            )
        self._gate = gate
        self.separator = separator
        self._unprefixed = frozenset(unprefixed)
        unknown = self._unprefixed - {box.name for box in gate.toolboxes}
        if unknown:
            raise ValueError(f"no toolbox named {sorted(unknown)} to serve unprefixed")
        self._wire: dict[str, str] = {}
        self._full: dict[str, str] = {}
        self._boxes: dict[str, dict[str, str]] = {}
        """Per toolbox: its tools' full names and wire names."""
        self._refresh()
        for box in gate.toolboxes:
            box.on_change(self._box_changed)

    def _name(self, spec: ToolSpec) -> str:
        if spec.toolbox in self._unprefixed:
            name = spec.local_name
        else:
            name = f"{spec.toolbox}{self.separator}{spec.local_name}"
        if len(name) > MAX_WIRE_NAME:
            raise ValueError(
                f"tool {spec.name!r} would be served as {name!r}, {len(name)} characters; "
                f"hosts accept at most {MAX_WIRE_NAME}: shorten the toolbox or tool name, "
                "or serve its toolbox unprefixed"
            )
        allowed = _DOTTED if "." in self.separator else _HOST_SAFE
        if not allowed.fullmatch(name):  # pragma: no cover - the contract's rules forbid it
            raise ValueError(f"tool {spec.name!r} cannot be served as {name!r}")
        return name

    def _refresh(self) -> None:
        wire: dict[str, str] = {}
        full: dict[str, str] = {}
        boxes: dict[str, dict[str, str]] = {}
        for spec in self._gate.tools():
            name = self._name(spec)
            other = full.get(name)
            if other is not None:
                raise _clash(other, spec.name, name)
            wire[spec.name] = name
            full[name] = spec.name
            boxes.setdefault(spec.toolbox, {})[spec.name] = name
        self._wire, self._full, self._boxes = wire, full, boxes

    def _box_changed(self, box: Toolbox) -> None:
        """Name the tools ``box`` gained and forget those it lost, checking only
        the new names: a toolbox filled one tool at a time costs one name a tool.

        Raises:
            ValueError: a new tool's name is too long or taken (nothing changes).
        """
        specs = box.by_name
        mine = self._boxes.setdefault(box.name, {})
        last = next(reversed(specs), None)
        if len(specs) == len(mine) + 1 and last is not None and last not in mine:
            # One tool was added (the newest key), the usual change: no diff.
            gone: set[str] = set()
            new = {last}
        else:
            gone = mine.keys() - specs.keys()
            new = specs.keys() - mine.keys()
        added: dict[str, str] = {}
        for full in sorted(new):
            name = self._name(specs[full])
            other = added.get(name) or self._full.get(name)
            if other is not None and other not in gone:
                first, second = sorted((other, full))
                raise _clash(first, second, name)
            added[name] = full
        for full in gone:
            name = mine.pop(full)
            del self._wire[full]
            if self._full.get(name) == full:
                del self._full[name]
        for name, full in added.items():
            mine[full] = self._wire[full] = name
            self._full[name] = full

    def shown(self, name: str) -> str:
        """The wire name of the full tool name ``name`` (unchanged if it is no tool)."""
        return self._wire.get(name, name)

    def full(self, name: str) -> str | None:
        """The full tool name of the wire name ``name``; None if no tool has it."""
        return self._full.get(name)

    def describe(self, text: str | None) -> str | None:
        """A description with the tools it mentions named as on the wire."""
        if text is None:
            return None
        return rename_in_text(text, self._wire, self)

    def schema(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        """An input schema whose ``description`` texts name tools as on the wire."""
        renamed: dict[str, Any] = rename_in_schema(schema, self._wire, self)
        return renamed
