"""A lint run: every rule over a catalogue, waivers applied, counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.lint.catalog import check_catalog
from callgate.lint.checks import check_tool
from callgate.lint.facts import ToolFacts
from callgate.lint.rules import RULES, Severity
from callgate.lint.settings import LintSettings

__all__ = ["Finding", "LintReport", "lint"]

_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(kw_only=True, frozen=True)
class Finding:
    rule: str
    severity: Severity
    tool: str
    message: str
    """What exactly was found in this tool."""
    why: str
    fix: str
    waived: str | None = None
    """Why it is waived (from the settings), or None."""

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "tool": self.tool,
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "waived": self.waived,
        }


@dataclass(kw_only=True, frozen=True)
class LintReport:
    tools: int
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def active(self) -> list[Finding]:
        """The findings not waived."""
        return [f for f in self.findings if f.waived is None]

    def counts(self) -> dict[str, int]:
        """Active findings per severity (every severity present, 0 included)."""
        counted: Counter[str] = Counter(f.severity for f in self.active)
        return {severity: counted[severity] for severity in _ORDER}

    def by_rule(self) -> dict[str, int]:
        """Active findings per rule, in the rules' order (rules without any left out)."""
        counted = Counter(f.rule for f in self.active)
        return {rule: counted[rule] for rule in RULES if counted[rule]}

    def failed(self, *, fail_on: Severity = "error") -> bool:
        """Whether an active finding is at least as severe as ``fail_on``."""
        limit = _ORDER[fail_on]
        return any(_ORDER[f.severity] <= limit for f in self.active)

    def as_json(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "counts": self.counts(),
            "by_rule": self.by_rule(),
            "waived": sum(1 for f in self.findings if f.waived is not None),
            "findings": [f.as_json() for f in self.findings],
        }


def lint(tools: Sequence[ToolFacts], settings: LintSettings | None = None) -> LintReport:
    """Run every rule (but the disabled ones) over ``tools``, one catalogue:
    findings ordered by severity, then tool, then rule."""
    settings = settings or LintSettings()
    found: list[Finding] = []

    seen: set[tuple[str, str, str]] = set()

    def add(tool: ToolFacts, hits: Iterable[tuple[str, str]]) -> None:
        for rule_id, message in hits:
            if rule_id in settings.disable or (tool.name, rule_id, message) in seen:
                continue
            seen.add((tool.name, rule_id, message))
            rule = RULES[rule_id]
            found.append(
                Finding(
                    rule=rule_id,
                    severity=rule.severity,
                    tool=tool.name,
                    message=message,
                    why=rule.why,
                    fix=rule.fix,
                    waived=settings.waiver(tool.name, rule_id),
                )
            )

    for tool in tools:
        add(tool, check_tool(tool))
    for tool, rule_id, message in check_catalog(tools):
        add(tool, [(rule_id, message)])
    order = list(RULES)
    found.sort(key=lambda f: (_ORDER[f.severity], f.tool, order.index(f.rule), f.message))
    return LintReport(tools=len(tools), findings=tuple(found))
