"""Tool names: what the MCP specification allows, namespaced by toolbox."""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_PART = re.compile(r"[A-Za-z0-9_-]{1,64}")

MAX_NAME_LENGTH = 128


class InvalidToolName(ValueError):
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
