"""Approvals answered through the protocol: an elicitation that shows the exact inputs.

When a ``tools/call`` is parked for approval (``pending_approval``) and the
approval may be decided by the requester themself (a rule with
``approved_by="requester"``), the human at the client is asked, in form mode,
whether this exact call may run:

- 2026-07-28: the call answers ``input_required`` with that elicitation and a
  ``requestState`` carrying the approval id (sealed by the SDK, bound to the
  method, tool, arguments and principal, accepted once). The client retries with
  the answer; the decision is recorded, and the call goes through the governed
  chain again, so it is authorized again before it runs.
- 2025-11-25: the elicitation is a request on the call's own stream, when the
  client declared the capability; the call waits for the answer (bounded), then
  goes through the chain again the same way.

Accepting with ``approve`` ticked approves (once, for exactly these inputs);
declining, or accepting without ticking it, denies; cancelling leaves the
approval pending. Anything else (an approval that needs another person, a
client that cannot be asked) answers ``pending_approval`` with the approval id,
for a human to decide in the CLI or the console while the model checks back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError
from pydantic import ValidationError

from callgate import access
from callgate.contract import Principal
from callgate.mcp import _wire
from callgate.mcp._input import ClientInputSink
from callgate.runtime.approvals import ApprovalError, effective_state
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.gate import Gate
from callgate.store import ApprovalRecord

__all__ = ["APPROVAL_KEY", "MAX_WAIT", "Confirmation", "approval_request"]

APPROVAL_KEY = "callgate_approval"
"""The ``inputRequests`` key (and carried state key) of an approval question."""

MAX_WAIT = 600.0
"""How long (seconds) a 2025-11-25 call waits for the human's answer at most."""

_VIA = "in the MCP client"

logger = logging.getLogger(__name__)

Answer = Literal["approved", "denied", "dismissed"]


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def approval_request(record: ApprovalRecord, *, title: str | None = None) -> types.ElicitRequest:
    """The form-mode elicitation asking the requester to approve ``record``.

    The message shows everything the approver of the CLI or console sees: the
    tool, why it needs approval, the exact inputs the tool will receive
    (trusted fields included), the impact of a previewed change, and expiry.
    """
    lines = [
        f"Approve this call of {record.tool}" + (f" ({title})" if title else "") + "?",
        f"Why a human must approve it: {record.reason}.",
        "Exactly what the tool will receive:",
        _pretty(record.arguments),
    ]
    if record.impact is not None:
        lines += ["What it will change:", _pretty(record.impact)]
    lines.append(
        f"Approval {record.id}, requested by {record.user}, expires "
        f"{record.expires_at.astimezone(UTC).isoformat(timespec='seconds')}. "
        "Tick 'approve' and accept to run it once, exactly as shown; decline to refuse it."
    )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Approve this exact call",
                "description": "Run it once, with exactly the inputs shown.",
                "default": False,
            },
            "note": {
                "type": "string",
                "title": "Note (optional)",
                "description": "Kept with your decision in the audit trail.",
                "maxLength": 500,
            },
        },
        "required": ["approve"],
    }
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="\n".join(lines), requested_schema=schema)
    )


@dataclass(kw_only=True)
class Confirmation:
    """The approval step of one ``tools/call``, on top of its :class:`ClientInputSink`."""

    gate: Gate
    principal: Principal
    sink: ClientInputSink

    async def confirmable(self, envelope: Envelope, tool: str) -> ApprovalRecord | None:
        """The pending approval of ``envelope`` if this client's user may decide it."""
        if envelope.status is not Status.PENDING_APPROVAL or envelope.approval is None:
            return None
        record = await (await self.gate.approvals()).get(envelope.approval.approval_id)
        if record is None or not self._ours(record, tool):
            return None
        if (
            record.approved_by != "requester"
            or effective_state(record, self.gate.clock.now()) != "pending"
        ):
            return None
        if not self.sink.can_ask("elicitation"):
            return None
        return record

    def _ours(self, record: ApprovalRecord | None, tool: str) -> bool:
        return record is not None and record.tool == tool and access.owns(self.principal, record)

    def answered(self) -> tuple[str, types.ElicitResult] | None:
        """At 2026-07-28: the approval this round answers, and the answer, if any.

        The approval id comes from the sealed state of the previous round (never
        from the client), the answer from this round's ``inputResponses``.
        """
        approval_id = self.sink.carried.get(APPROVAL_KEY)
        answer = self.sink.responses.get(APPROVAL_KEY)
        if not isinstance(approval_id, str) or answer is None:
            return None
        wire = (
            answer
            if isinstance(answer, dict)
            else answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        try:
            return approval_id, types.ElicitResult.model_validate(wire)
        except ValidationError as exc:
            raise _wire.invalid_params(
                f"inputResponses.{APPROVAL_KEY} is not an elicitation result"
            ) from exc

    def _question(self, record: ApprovalRecord) -> types.ElicitRequest:
        spec = self.gate.tool(record.tool)
        return approval_request(record, title=spec.title if spec else None)

    async def ask_now(self, record: ApprovalRecord) -> types.ElicitResult | None:
        """At 2025-11-25: ask on the call's stream; None if no answer came."""
        request = self._question(record)
        left = (record.expires_at - self.gate.clock.now()).total_seconds()
        try:
            return await self.sink.ask_now(request, timeout=max(1.0, min(MAX_WAIT, left)))
        except (TimeoutError, MCPError, ValidationError) as exc:
            logger.info("approval %s not answered in the client: %s", record.id, exc)
            return None

    def ask(self, round_: _wire.Round, record: ApprovalRecord) -> _wire.Round:
        """At 2026-07-28: ``round_`` asking the client about ``record`` first (its
        state carries the approval id to the next round)."""
        round_.asking = {APPROVAL_KEY: self._question(record)}
        round_.request_state = lambda: self.sink.request_state(carry={APPROVAL_KEY: record.id})
        return round_

    async def decide(self, approval_id: str, tool: str, answer: types.ElicitResult) -> Answer:
        """Record the human's answer as the approval's decision (audited)."""
        approvals = await self.gate.approvals()
        record = await approvals.get(approval_id)
        if not self._ours(record, tool):
            # The state is sealed to this call, so this is a bug or a forgery: refuse.
            raise _wire.invalid_state()
        content = answer.content or {}
        note = content.get("note")
        note_text = note.strip() if isinstance(note, str) and note.strip() else None
        try:
            if answer.action == "accept" and content.get("approve") is True:
                await approvals.approve(
                    approval_id, by=self.principal, note=note_text or f"confirmed {_VIA}"
                )
                return "approved"
            if answer.action == "cancel":
                return "dismissed"
            await approvals.deny(
                approval_id, by=self.principal, reason=note_text or f"declined {_VIA}"
            )
            return "denied"
        except ApprovalError as exc:
            # Decided meanwhile (in the console, say) or expired: the chain reports it.
            logger.info("approval %s: %s", approval_id, exc)
            return "dismissed"
