"""What a replay found: per call, how the chain takes it now against how it took it then.

Kinds of difference, each with one line saying what changed:

- ``tool_missing``: the gate serves no such tool now;
- ``fails_validation``: the arguments the model sent break the tool's contract now
  (the line is the validation message the model would read);
- ``decision_changed``: the call is taken otherwise: another policy decision
  (allow -> require_approval, -> deny), or refused by another stage (authorize,
  inject), or no longer refused;
- ``contract_changed``: the tool's contract hash is not the one the call ran against;
- ``result_changed``: (live replays only) the tool answered otherwise: the status,
  or a structural summary of the payload's differences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CallReplay", "Difference", "DifferenceKind", "ReplayReport", "structural_diff"]

DifferenceKind = Literal[
    "tool_missing", "fails_validation", "decision_changed", "contract_changed", "result_changed"
]
KINDS: tuple[DifferenceKind, ...] = (
    "tool_missing",
    "fails_validation",
    "decision_changed",
    "contract_changed",
    "result_changed",
)

MAX_PATHS = 10
"""Paths a structural diff names before it says how many more differ."""


@dataclass(kw_only=True, frozen=True)
class Difference:
    kind: DifferenceKind
    text: str


@dataclass(kw_only=True, frozen=True)
class CallReplay:
    """One recorded call, replayed: the recorded outcome, today's, and what differs.

    ``then`` and ``now`` are outcomes as the audit writes decisions (``allow``,
    ``require_approval``, ``refused:validate``, ...; ``missing`` for no tool now);
    ``answered`` says where the model's answer came from this time: ``recording``,
    ``live`` or ``none`` (the run ended before the call was made).
    """

    number: int
    turn: int
    call_id: str
    tool: str
    arguments: Any
    then: str | None
    now: str
    answered: Literal["recording", "live", "none"]
    differences: tuple[Difference, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.differences)

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "turn": self.turn,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "then": self.then,
            "now": self.now,
            "answered": self.answered,
            "differences": [{"kind": d.kind, "text": d.text} for d in self.differences],
        }


@dataclass(kw_only=True, frozen=True)
class ReplayReport:
    """Every call of a replayed run, in the order the model proposed them."""

    run_id: str
    live: bool
    turns: int
    calls: tuple[CallReplay, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> tuple[CallReplay, ...]:
        return tuple(c for c in self.calls if c.changed)

    def counts(self) -> dict[str, int]:
        """Calls with each kind of difference (a call may count under several)."""
        found = Counter(d.kind for c in self.calls for d in c.differences)
        return {kind: found[kind] for kind in KINDS if found[kind]}

    def summary(self) -> str:
        """One line: calls replayed, unchanged, changed by kind."""
        changed = len(self.changed)
        text = (
            f"{len(self.calls)} call{'s' if len(self.calls) != 1 else ''} replayed over "
            f"{self.turns} turn{'s' if self.turns != 1 else ''}: "
            f"{len(self.calls) - changed} unchanged, {changed} changed"
        )
        counts = self.counts()
        if counts:
            text += " (" + ", ".join(f"{kind} {n}" for kind, n in counts.items()) + ")"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "live": self.live,
            "turns": self.turns,
            "replayed": len(self.calls),
            "unchanged": len(self.calls) - len(self.changed),
            "changed": len(self.changed),
            "by_kind": self.counts(),
            "calls": [c.to_json() for c in self.calls],
        }


def _short(value: Any, limit: int = 60) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _walk(old: Any, new: Any, path: str, out: list[str]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                out.append(f"{where} removed")
            elif key not in old:
                out.append(f"{where} added ({_short(new[key])})")
            else:
                _walk(old[key], new[key], where, out)
        return
    if isinstance(old, list) and isinstance(new, list):
        for index in range(min(len(old), len(new))):
            _walk(old[index], new[index], f"{path}[{index}]", out)
        if len(old) != len(new):
            out.append(f"{path or 'the result'}: {len(old)} items -> {len(new)}")
        return
    if old != new:
        out.append(f"{path or 'the result'}: {_short(old)} -> {_short(new)}")


def structural_diff(old: Any, new: Any) -> list[str]:
    """The differences between two JSON values, one line per path (keys added or
    removed, values changed, list lengths), at most :data:`MAX_PATHS` of them."""
    found: list[str] = []
    _walk(old, new, "", found)
    if len(found) > MAX_PATHS:
        return [*found[:MAX_PATHS], f"and {len(found) - MAX_PATHS} more"]
    return found
