"""Tool names a provider accepts, mapped reversibly from callgate's.

callgate names tools ``toolbox.tool`` and BFCL has hundreds of names with dots;
Anthropic and OpenAI accept only ``[A-Za-z0-9_-]{1,64}``, Gemini a little more.
A :class:`NameMap` is built per request from every name the request carries
(its tools and the calls in its history): each name gets a provider name that
is as readable as possible (``ops.deploy_status`` -> ``ops__deploy_status``), and
names that would collide or are too long get a short hash suffix. The mapping is
deterministic (the same names always map the same way), so a model's call in one
turn maps back in the next.

The texts the model reads name tools the same way: the agent loop hands the gate
a :class:`ProviderNames` built with the model's ``name_rule`` from the tools it
offers, which maps every offered tool exactly as the adapter's per-request map
does (the two could differ only for names that collide, which get hash suffixes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = [
    "ANTHROPIC_NAMES",
    "GEMINI_NAMES",
    "OPENAI_NAMES",
    "NameMap",
    "NameRule",
    "ProviderNames",
]


class NameRule:
    """What a provider accepts as a tool name.

    Args:
        pattern: the full-match pattern of an accepted name.
        max_length: the longest accepted name.
        invalid: characters to replace (a regex character class).
        first: a pattern the first character must match (None: any accepted one).
    """

    def __init__(
        self, *, pattern: str, max_length: int, invalid: str, first: str | None = None
    ) -> None:
        self.pattern = re.compile(pattern)
        self.max_length = max_length
        self.invalid = re.compile(invalid)
        self.first = re.compile(first) if first else None

    def accepts(self, name: str) -> bool:
        return bool(self.pattern.fullmatch(name)) and len(name) <= self.max_length


ANTHROPIC_NAMES = NameRule(pattern=r"[A-Za-z0-9_-]{1,64}", max_length=64, invalid=r"[^A-Za-z0-9_-]")
OPENAI_NAMES = NameRule(pattern=r"[A-Za-z0-9_-]{1,64}", max_length=64, invalid=r"[^A-Za-z0-9_-]")
GEMINI_NAMES = NameRule(
    pattern=r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}",
    max_length=64,
    invalid=r"[^A-Za-z0-9_.:-]",
    first=r"[A-Za-z_]",
)


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:6]


class NameMap:
    """callgate names <-> one provider's names, for one request."""

    def __init__(self, names: Iterable[str], rule: NameRule) -> None:
        self._rule = rule
        self._out: dict[str, str] = {}
        self._back: dict[str, str] = {}
        for name in sorted(set(names)):
            self._add(name)

    def _readable(self, name: str) -> str:
        safe = name.replace(".", "__") if not self._rule.accepts(name) else name
        safe = self._rule.invalid.sub("_", safe)
        if self._rule.first is not None and not self._rule.first.match(safe[:1] or "_"):
            safe = "_" + safe
        return safe or "_"

    def _add(self, name: str) -> str:
        safe = self._readable(name)
        if len(safe) > self._rule.max_length or (safe in self._back and self._back[safe] != name):
            suffix = "_" + _digest(name)
            safe = safe[: self._rule.max_length - len(suffix)] + suffix
        while safe in self._back and self._back[safe] != name:  # a hash collision: vanishingly rare
            suffix = "_" + _digest(safe + name)
            safe = safe[: self._rule.max_length - len(suffix)] + suffix
        self._out[name] = safe
        self._back[safe] = name
        return safe

    def to_provider(self, name: str) -> str:
        """The provider's name for callgate's ``name`` (added if not seen yet)."""
        return self._out.get(name) or self._add(name)

    def from_provider(self, name: str) -> str:
        """callgate's name for a provider's ``name``; an unknown one (a model's
        invention) comes back as it is, for the gate to refuse with close matches."""
        return self._back.get(name, name)


class ProviderNames:
    """A provider's names of callgate's tools, as :class:`~callgate.contract.ToolNames`
    for the agent loop's calls: what the model reads names a tool as the model
    calls it (``ops__deploy_status``).

    The loop passes the gate callgate's own names (the adapter already mapped
    the model's call back); :meth:`full` maps a provider's name back too, for
    names the model writes into arguments (``callgate.call_tool``'s ``name``),
    and leaves callgate's own names as they are.

    Args:
        names: the tools the model is offered.
        rule: the model's naming rule; None: the model sees callgate's names.
        only: the model may call only ``names``: any other name is unknown to
            it, as to a host that was not offered it.
    """

    def __init__(self, names: Iterable[str], rule: NameRule | None, *, only: bool = False) -> None:
        names = list(names)
        self._map = NameMap(names, rule) if rule is not None else None
        self._only = frozenset(names) if only else None

    def shown(self, name: str) -> str:
        return self._map.to_provider(name) if self._map is not None else name

    def full(self, name: str) -> str | None:
        full = self._map.from_provider(name) if self._map is not None else name
        return full if self._only is None or full in self._only else None
