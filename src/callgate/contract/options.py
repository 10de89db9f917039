"""The keyword options of a tool, declared once for every way of declaring one.

``@tool(...)``, ``Toolbox.tool(...)``, ``Toolbox.add(fn, ...)`` and
:func:`~callgate.contract.function.spec_from_function` take the keywords of
:class:`ToolOptions`; ``Toolbox.change(...)`` takes those of
:class:`ChangeOptions`. They are typed with ``Unpack``, so a type checker checks
each keyword where it is written; :func:`check_options` refuses an unknown one at
run time, when the decorator or method is called rather than later when the tool
is built. The defaults are applied in one place per kind: ``spec_from_function``
for a tool, ``ChangeBuilder`` for a change.

A new option goes into :class:`SharedOptions` when a change's tools can take it
too, else into :class:`ToolOptions`; ``tests/contract/test_options.py`` fails
until every way of declaring a tool passes it on.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from callgate.contract.annotations import RiskTier
from callgate.contract.spec import ConciseView
from callgate.errors import InvalidDefinition

__all__ = [
    "CHANGE_OPTIONS",
    "TOOL_OPTIONS",
    "ChangeOptions",
    "SharedOptions",
    "ToolOptions",
    "check_options",
]


class SharedOptions(TypedDict, total=False):
    """Options a plain tool and each tool of a previewed change take alike."""

    title: str | None
    """A human-readable title (default: none). A change's tools read
    ``Preview: <title>``, ``<title>`` and ``Status: <title>``."""
    scopes: Iterable[str]
    """Scopes the caller needs, all of them (default: none)."""
    risk: RiskTier | str | None
    """The risk tier, instead of the one derived from the annotations (default:
    derived; a change's apply tool is ``write_high_risk``)."""
    timeout: float | None
    """Seconds the tool may run, within the gate's maximum (default: the gate's)."""
    version: str
    """The contract's version, recorded with every call (default: ``"1"``)."""
    input_examples: Sequence[Mapping[str, Any]]
    """Example arguments shown to the model, each checked against the input
    schema (default: none). A change shows them on its preview tool."""
    private_data: bool
    """The tool returns the user's private data, for the lethal-trifecta guard
    (default: False). For a change, its preview does."""
    tags: Iterable[str]
    """Labels for routing and listing (default: none)."""


class ToolOptions(SharedOptions, total=False):
    """The keyword options of ``@tool``, ``Toolbox.tool`` and ``Toolbox.add``.

    The four hints are MCP tool annotations; None (the default) means "not
    said", which is read conservatively (see ``ToolAnnotations.effective``).
    """

    name: str | None
    """The local name (default: the function's); the full name is ``<toolbox>.<name>``."""
    description: str | None
    """What the model reads (default: the docstring's text, without its sections)."""
    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None
    concise: ConciseView | Sequence[str] | None
    """A concise view of the result: a function, or the field names to keep. The
    tool then takes ``response_format`` (``concise``, the default, or
    ``detailed``). Default: none, every call gets the whole result."""


class ChangeOptions(SharedOptions, total=False):
    """The keyword options of ``Toolbox.change``.

    A change is a write, so ``read_only`` and ``idempotent`` are the builder's to
    set per tool (its preview reads, its apply is idempotent by preview id); the
    names and descriptions come from the functions.
    """

    ttl: float
    """Seconds a preview id stays valid (default: 600)."""
    destructive: bool
    """The apply tool's destructive hint (default: True)."""
    open_world: bool
    """The apply tool's open-world hint (default: False)."""


TOOL_OPTIONS = frozenset(ToolOptions.__optional_keys__)
CHANGE_OPTIONS = frozenset(ChangeOptions.__optional_keys__)


def check_options(options: Mapping[str, object], allowed: frozenset[str], where: str) -> None:
    """Refuse an option ``where`` does not take, naming the close ones.

    Raises:
        InvalidDefinition: an unknown keyword (a ``TypeError``, as Python's own
            for an unexpected keyword argument).
    """
    unknown = sorted(set(options) - allowed)
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise InvalidDefinition(
        f"{where}: unknown option {key!r}{hint} The options are {', '.join(sorted(allowed))}."
    )
