"""``callgate lint``: tool design rules, checked.

Tools fail most often not in the model but in their design: vague descriptions,
look-alike names, parameters the model cannot fill, results that flood the
context, errors that do not say what to do, writes nobody guards. The linter
checks a catalogue (a config's tools, an upstream's ``tools/list``, a corpus of
function schemas) against the rules of :mod:`callgate.lint.rules`; each finding
names the rule, the tool, why it matters and how to fix it. docs/lint.md lists
the rules and what they found in public tool corpora.
"""

from __future__ import annotations

from callgate.lint.facts import ToolFacts, facts_from_schema, facts_from_spec
from callgate.lint.report import Finding, LintReport, lint
from callgate.lint.rules import RULES, Rule, Severity
from callgate.lint.settings import LintSettings, parse_lint

__all__ = [
    "RULES",
    "Finding",
    "LintReport",
    "LintSettings",
    "Rule",
    "Severity",
    "ToolFacts",
    "facts_from_schema",
    "facts_from_spec",
    "lint",
    "parse_lint",
]
