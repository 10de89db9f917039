"""The rules: what each one checks, why it matters to a model, how to fix it.

Every rule has a stable id (``area-what``), a severity and a one-line why.
Severities: ``error`` (the model will fail or the gate cannot protect the call),
``warning`` (the model will often get it wrong), ``info`` (worth a look).
The checks themselves are in :mod:`callgate.lint.checks` (one tool at a time)
and :mod:`callgate.lint.catalog` (tools against each other).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

__all__ = ["RULES", "Rule", "Severity"]

Severity = Literal["error", "warning", "info"]


@dataclass(kw_only=True, frozen=True)
class Rule:
    id: str
    severity: Severity
    area: str
    why: str
    """Why it matters, in one line."""
    fix: str
    """How to fix it, in one line."""


_ALL = (
    # names
    Rule(
        id="name-namespace",
        severity="info",
        area="names",
        why="in a catalogue of many servers, a bare name collides and hides where a tool belongs",
        fix="prefix the name with its domain or service (orders.find, github__create_issue)",
    ),
    Rule(
        id="name-verb",
        severity="info",
        area="names",
        why="a name that says what it does (verb and object) is picked by models more reliably",
        fix="name it verb_object or object_verb (find_orders, orders_find), one way per catalogue",
    ),
    Rule(
        id="name-case",
        severity="warning",
        area="names",
        why="mixed naming styles in one catalogue make models misspell the names",
        fix="use the style most of the catalogue uses",
    ),
    Rule(
        id="name-lookalike",
        severity="warning",
        area="names",
        why="names a character or two apart are confused by models, which then call the wrong tool",
        fix="rename one so the difference is a word, or merge the two tools",
    ),
    # descriptions
    Rule(
        id="description-missing",
        severity="error",
        area="descriptions",
        why="the description is all a model reads to decide whether and how to call a tool",
        fix="say what it does, when to use it, and what it returns",
    ),
    Rule(
        id="description-short",
        severity="warning",
        area="descriptions",
        why="a few words do not tell the model when this tool is the right one",
        fix="add when to use it (and when not), its key parameters and what it returns",
    ),
    Rule(
        id="description-long",
        severity="warning",
        area="descriptions",
        why="every tool's description is sent on every turn: a long one costs context on each",
        fix="keep it under about 2,000 characters (500 tokens); move details into parameter descriptions",
    ),
    Rule(
        id="description-when",
        severity="info",
        area="descriptions",
        why="models choose between similar tools by when each applies",
        fix="add a sentence such as 'Use it to ...; to ..., use X instead.'",
    ),
    Rule(
        id="description-params",
        severity="info",
        area="descriptions",
        why="a description that names the required parameters helps the model fill them",
        fix="mention the required parameters and what they take",
    ),
    Rule(
        id="description-lookalike",
        severity="warning",
        area="descriptions",
        why="two tools described nearly alike leave the model guessing which one to call",
        fix="say in each what sets it apart (input, scope, when to use the other)",
    ),
    # parameters
    Rule(
        id="param-description",
        severity="warning",
        area="parameters",
        why="an undescribed parameter is filled from its name alone",
        fix="describe it: what it holds, its format, an example",
    ),
    Rule(
        id="param-format",
        severity="info",
        area="parameters",
        why="dates, times, emails and URLs are written many ways; the model guesses one",
        fix="give a format (date, date-time, email, uri) or a pattern, and an example",
    ),
    Rule(
        id="param-example",
        severity="info",
        area="parameters",
        why="one example value shows the model the shape an id or a code takes better than a sentence",
        fix="add an example to the description ('e.g. \"C-1042\"') or to the schema's examples",
    ),
    Rule(
        id="param-enum",
        severity="warning",
        area="parameters",
        why="a free string whose description lists its values invites values outside the list",
        fix="make it an enum of those values",
    ),
    Rule(
        id="param-identifier",
        severity="warning",
        area="parameters",
        why="'user' may be a name, an email or an id; 'user_id' says which the tool wants",
        fix="name identifiers for what they identify: user_id, order_id",
    ),
    Rule(
        id="param-trusted",
        severity="warning",
        area="parameters",
        why="if only the server may set it (the tenant, a credential, the caller), a model that sets it can act as someone else",
        fix="declare it Trusted[...] so callgate fills it from the principal and the model never sees it",
    ),
    # schema
    Rule(
        id="schema-required-default",
        severity="warning",
        area="schema",
        why="a required parameter with a default makes the model fill what it could omit",
        fix="make it optional, or drop the default",
    ),
    Rule(
        id="schema-nesting",
        severity="warning",
        area="schema",
        why="objects nested more than three deep are filled wrongly far more often",
        fix="flatten the parameters, or split the tool",
    ),
    Rule(
        id="schema-free-object",
        severity="warning",
        area="schema",
        why="an object without properties tells the model nothing about what to put in it",
        fix="declare its properties (and additionalProperties: false)",
    ),
    Rule(
        id="schema-unbounded-array",
        severity="info",
        area="schema",
        why="an array without maxItems lets one call carry any amount of work",
        fix="set maxItems",
    ),
    Rule(
        id="schema-unbounded-string",
        severity="info",
        area="schema",
        why="a free string without maxLength, enum, format or pattern takes anything the model writes",
        fix="bound it: maxLength, a pattern, a format or an enum",
    ),
    Rule(
        id="schema-boolean-mode",
        severity="info",
        area="schema",
        why="a boolean that picks a mode or an order hides the choices and cannot grow a third",
        fix="use an enum of the modes (order: asc | desc; detail: concise | detailed)",
    ),
    # results and errors
    Rule(
        id="result-paging",
        severity="warning",
        area="results",
        why="a read that can return everything floods the model's context",
        fix="take a limit and a cursor (or page), and bound the list in the output schema",
    ),
    Rule(
        id="result-concise",
        severity="info",
        area="results",
        why="a model that needs one field should not pay for every field of every row",
        fix="offer response_format concise/detailed (callgate: concise=[...])",
    ),
    Rule(
        id="error-next-step",
        severity="info",
        area="results",
        why="an error that says only what failed leaves the model retrying the same call",
        fix="say what to do next in the message (use X, ask the user for Y, call Z first)",
    ),
    # risk
    Rule(
        id="risk-unguarded-write",
        severity="warning",
        area="risk",
        why="a write that is neither idempotent nor previewed nor approved runs twice on a retry and unseen by anyone",
        fix="mark it idempotent (and make it so), declare it as a previewed change, or add an approval rule",
    ),
    Rule(
        id="risk-destructive-unmarked",
        severity="warning",
        area="risk",
        why="a tool that deletes or cancels without destructive=True is classed like a harmless write",
        fix="declare destructive=True (and consider an approval rule)",
    ),
    Rule(
        id="risk-hints-missing",
        severity="info",
        area="risk",
        why="without hints a tool is treated as a destructive, open-world write: every policy for writes applies",
        fix="declare read_only, destructive, idempotent and open_world",
    ),
    Rule(
        id="risk-trifecta",
        severity="error",
        area="risk",
        why="private data, untrusted content and a way out in one catalogue let injected text send data away",
        fix="split the catalogue, or require approval for the tools that send data out",
    ),
)

RULES: Final[Mapping[str, Rule]] = MappingProxyType({rule.id: rule for rule in _ALL})
"""Every rule by id, in the order they are documented."""
