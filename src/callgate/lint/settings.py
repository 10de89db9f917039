"""Which rules a lint run leaves out: the ``[lint]`` table of a config file.

```toml
[lint]
disable = ["name-namespace"]            # for every tool

[lint.waive."ops.notes_*"]              # glob of tool names
result-paging = "notes are few; a page would be empty"
```

A waived finding is still reported (as waived, with its reason) but does not
fail the run.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.errors import InvalidArgument
from callgate.lint.rules import RULES

__all__ = ["LintSettings", "parse_lint"]


@dataclass(kw_only=True, frozen=True)
class LintSettings:
    disable: frozenset[str] = frozenset()
    """Rules not run at all."""
    waivers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Tool-name glob -> rule id -> why it is waived."""

    def waiver(self, tool: str, rule: str) -> str | None:
        """Why ``rule`` is waived for ``tool``, or None."""
        for pattern, rules in self.waivers.items():
            if rule in rules and fnmatch.fnmatchcase(tool, pattern):
                return rules[rule]
        return None

    def merged(self, other: LintSettings) -> LintSettings:
        """These settings with ``other``'s added (the command line's to a config's)."""
        waivers = {k: dict(v) for k, v in self.waivers.items()}
        for pattern, rules in other.waivers.items():
            waivers.setdefault(pattern, {}).update(rules)
        return LintSettings(disable=self.disable | other.disable, waivers=waivers)


def parse_lint(raw: Mapping[str, Any], label: str) -> LintSettings:
    """The ``[lint]`` table.

    Raises:
        InvalidArgument: an unknown key or rule id, or a waiver without a reason.
    """
    unknown = set(raw) - {"disable", "waive"}
    if unknown:
        raise InvalidArgument(f"{label}: lint: unknown key {sorted(unknown)[0]!r} (disable, waive)")
    disable = raw.get("disable", [])
    if not isinstance(disable, list) or not all(isinstance(r, str) for r in disable):
        raise InvalidArgument(f"{label}: lint.disable must be a list of rule ids")
    for rule in disable:
        _known(rule, f"{label}: lint.disable")
    waive = raw.get("waive", {})
    if not isinstance(waive, Mapping):
        raise InvalidArgument(f"{label}: lint.waive must be a table of tool names")
    waivers: dict[str, dict[str, str]] = {}
    for pattern, rules in waive.items():
        if not isinstance(rules, Mapping):
            raise InvalidArgument(
                f"{label}: lint.waive.{pattern!r} must map rule ids to the reason they are waived"
            )
        for rule, why in rules.items():
            _known(rule, f"{label}: lint.waive.{pattern!r}")
            if not isinstance(why, str) or not why.strip():
                raise InvalidArgument(
                    f"{label}: lint.waive.{pattern!r}.{rule}: say why it is waived (a non-empty string)"
                )
        waivers[pattern] = dict(rules)
    return LintSettings(disable=frozenset(disable), waivers=waivers)


def _known(rule: str, where: str) -> None:
    if rule not in RULES:
        import difflib

        close = difflib.get_close_matches(rule, RULES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InvalidArgument(f"{where}: no rule {rule!r}{hint} (callgate lint --rules lists them)")
