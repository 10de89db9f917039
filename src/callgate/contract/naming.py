"""Tool names: what the MCP specification allows, namespaced by toolbox, and how a
caller sees them (:class:`ToolNames`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from callgate.errors import UserError

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_PART = re.compile(r"[A-Za-z0-9_-]{1,64}")

MAX_NAME_LENGTH = 128


class InvalidToolName(UserError, ValueError):
    """A tool or toolbox name breaks the naming rules."""


def check_toolbox_name(name: str) -> str:
    """Return ``name`` if it can prefix tool names, else raise.

    Raises:
        InvalidToolName: the name is empty, too long or has characters other
            than letters, digits, ``_`` and ``-``.
    """
    if not _PART.fullmatch(name):
        raise InvalidToolName(
            f"toolbox name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
        )
    return name


def check_tool_name(name: str) -> str:
    """Return a full tool name (``toolbox.tool``) if valid, else raise.

    Raises:
        InvalidToolName: the name is not 1-128 characters of ``[A-Za-z0-9_.-]``.
    """
    if not _NAME.fullmatch(name):
        raise InvalidToolName(
            f"tool name {name!r} must be 1-{MAX_NAME_LENGTH} characters of "
            "letters, digits, '_', '-' or '.'"
        )
    return name


def qualify(toolbox: str, tool: str) -> str:
    """``toolbox.tool``, validated.

    Raises:
        InvalidToolName: the local or the full name is invalid.
    """
    if not _PART.fullmatch(tool):
        raise InvalidToolName(
            f"tool name {tool!r} must be 1-64 characters of letters, digits, '_' or '-' "
            "(the toolbox adds its own prefix)"
        )
    return check_tool_name(f"{toolbox}.{tool}")


@runtime_checkable
class ToolNames(Protocol):
    """How one caller names the tools: callgate's full names are internal.

    An MCP host may see ``ops__deploy_status`` (or, served unprefixed,
    ``deploy_status``) and a provider's model ``ops__deploy_status`` where the
    gate knows ``ops.deploy_status``. Every text written for that caller (a
    did-you-mean, a next step, a preview's apply hint, a truncation notice)
    names a tool with :meth:`shown`, or it would name a tool the caller cannot
    call.
    """

    def shown(self, name: str) -> str:
        """The caller's name for the full tool name ``name``."""
        ...

    def full(self, name: str) -> str | None:
        """The full tool name for the caller's ``name``; None when the caller
        has no tool of that name."""
        ...


class FullNames:
    """The caller sees the full names (``toolbox.tool``): the Python API, the CLI."""

    def shown(self, name: str) -> str:
        return name

    def full(self, name: str) -> str | None:
        return name


FULL_NAMES: ToolNames = FullNames()
"""The naming of callers that use the full names."""


def rename_in_text(text: str, known: Iterable[str], names: ToolNames) -> str:
    """``text`` with every mention of a tool of ``known`` (full names) in the
    caller's names.

    For texts written before any caller existed, such as tool descriptions
    ("pass the id to ops.budget_change_preview"). Only whole names are
    replaced: ``ops.deploy_status`` inside ``ops.deploy_status_v2`` is not.
    """
    pattern = _mentions(tuple(sorted(known, key=len, reverse=True)))
    if pattern is None or "." not in text:
        return text
    return pattern.sub(lambda match: names.shown(match.group(0)), text)


def rename_in_schema(schema: Mapping[str, Any], known: Iterable[str], names: ToolNames) -> Any:
    """A copy of a JSON Schema whose ``description`` texts name the tools of
    ``known`` in the caller's names (see :func:`rename_in_text`)."""
    pool = tuple(known)

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                key: rename_in_text(item, pool, names)
                if key == "description" and isinstance(item, str)
                else walk(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(schema)


@functools.lru_cache(maxsize=32)
def _mentions(known: tuple[str, ...]) -> re.Pattern[str] | None:
    # Longest first, so that a name is never matched by its own prefix.
    if not known:
        return None
    alternatives = "|".join(re.escape(name) for name in known)
    return re.compile(rf"(?<![A-Za-z0-9_.-])(?:{alternatives})(?![A-Za-z0-9_-])")
