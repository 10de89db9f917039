"""The audit trail as the CLI shows it: raw records, or one summary per call.

A side-effecting call writes an ``intent`` record before its tool runs and a
``final`` record once it has an outcome. An intent with no final means nobody
knows what happened (the process died, or the call is still running): that is
shown, never hidden.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from callgate.store import AuditRecord

UNKNOWN_OUTCOME = "unknown (no outcome recorded)"


@dataclass(kw_only=True, frozen=True)
class CallSummary:
    """What one call decided and what happened, from its audit records."""

    call_id: str
    at: datetime
    """When the call's first record was written."""
    user: str | None
    tenant: str | None
    tool: str
    decision: str | None
    decision_reason: str | None
    outcome: str
    """``ok``, ``pending_approval``, an error kind, or :data:`UNKNOWN_OUTCOME`."""
    outcome_unknown: bool
    duration_ms: float | None
    attempts: int
    dropped_fields: tuple[str, ...]

    @property
    def who(self) -> str:
        """``user (tenant)``; users are often e-mail addresses, so no ``user@tenant``."""
        return f"{self.user or '?'} ({self.tenant})" if self.tenant else (self.user or "?")


def dropped_fields(records: Iterable[AuditRecord]) -> tuple[str, ...]:
    """The trusted fields the model tried to set, over ``records``, in first-seen order."""
    return tuple(dict.fromkeys(f for r in records for f in r.dropped_fields))


def unknown_outcome_calls(records: Iterable[AuditRecord]) -> set[str]:
    """Call ids with an ``intent`` record and no ``final`` one."""
    intents: set[str] = set()
    finals: set[str] = set()
    for record in records:
        if record.phase != "late":  # how stray work ended is not the call's outcome
            (intents if record.phase == "intent" else finals).add(record.call_id)
    return intents - finals


def summarize(records: Sequence[AuditRecord]) -> list[CallSummary]:
    """One summary per call, ordered by each call's last record (newest last).

    Args:
        records: oldest first, as the store returns them.
    """
    by_call: dict[str, list[AuditRecord]] = {}
    last_index: dict[str, int] = {}
    for index, record in enumerate(records):
        by_call.setdefault(record.call_id, []).append(record)
        last_index[record.call_id] = index
    ordered = sorted(by_call, key=last_index.__getitem__)
    return [_summary(by_call[call_id]) for call_id in ordered]


def _summary(group: list[AuditRecord]) -> CallSummary:
    finals = [r for r in group if r.phase not in ("intent", "late")]
    last = finals[-1] if finals else group[-1]
    return CallSummary(
        call_id=last.call_id,
        at=group[0].at,
        user=last.user,
        tenant=last.tenant,
        tool=last.tool,
        decision=last.decision,
        decision_reason=last.decision_reason,
        outcome=(last.outcome or last.status or "?") if finals else UNKNOWN_OUTCOME,
        outcome_unknown=not finals,
        duration_ms=last.duration_ms,
        attempts=last.attempts,
        dropped_fields=dropped_fields(group),
    )


def records_json(records: Sequence[AuditRecord]) -> list[dict[str, Any]]:
    """Raw records as JSON-able dicts, oldest first, each with ``outcome_unknown``.

    ``outcome_unknown`` is true on an ``intent`` record whose call has no
    ``final`` record among ``records``.
    """
    unknown = unknown_outcome_calls(records)
    out = []
    for record in records:
        row = dataclasses.asdict(record)
        row["at"] = record.at.isoformat()
        row["dropped_fields"] = list(record.dropped_fields)
        row["outcome_unknown"] = record.phase == "intent" and record.call_id in unknown
        out.append(row)
    return out
