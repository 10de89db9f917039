"""What a recorded agent run holds, read back for a replay.

The agent loop keeps every run in the store (:class:`~callgate.store.base.RunRecord`):
its state (the conversation, the usage) and its trace, which has each model
response as the model sent it (``model_response``: the message, the stop reason,
the usage) and each tool call with its Envelope (``tool_call``). A replay needs
nothing more: the responses are fed back to the loop, the Envelopes answer the
calls. A call parked for an approval and made again on a resume has two
Envelopes in the trace (``pending_approval``, then the final one); both are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.agent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolCall,
    Usage,
    message_from_json,
)
from callgate.agent.runs import call_from_json
from callgate.contract import Principal
from callgate.runtime.envelope import Envelope
from callgate.store.base import RunRecord

__all__ = ["RecordedCall", "RecordedTurn", "Recording", "recording_of"]


@dataclass(kw_only=True, frozen=True)
class RecordedCall:
    """One tool call the model proposed, and the Envelopes the chain answered it with
    (oldest first; none if the run ended before the call was made)."""

    turn: int
    call: ToolCall
    envelopes: tuple[Envelope, ...] = ()

    @property
    def first(self) -> Envelope | None:
        """The Envelope of the call's first pass through the chain (its decision)."""
        return self.envelopes[0] if self.envelopes else None

    @property
    def final(self) -> Envelope | None:
        """The Envelope the model read for the call (after an approval, if one was needed)."""
        return self.envelopes[-1] if self.envelopes else None


@dataclass(kw_only=True, frozen=True)
class RecordedTurn:
    """One model response and the calls it proposed, in the model's order."""

    number: int
    response: ModelResponse
    calls: tuple[RecordedCall, ...]


@dataclass(kw_only=True, frozen=True)
class Recording:
    """A recorded run: who ran it, how it began and every turn of it."""

    run_id: str
    user: str
    tenant: str | None
    status: str
    model: str
    opening: tuple[Message, ...]
    """The messages before the model's first answer (the history and the prompt)."""
    turns: tuple[RecordedTurn, ...]
    principal: Principal | None = None
    """Who ran it, with the scopes, roles and attributes it had then; None for a
    run recorded before runs kept them."""

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        return tuple(call for turn in self.turns for call in turn.calls)


def _response(entry: Mapping[str, Any]) -> ModelResponse:
    message = message_from_json(entry["message"])
    assert isinstance(message, AssistantMessage)
    usage = entry.get("usage") or {}
    return ModelResponse(
        parts=message.parts,
        stop_reason=entry.get("stop_reason") or "end_turn",
        usage=Usage(
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
        ),
        raw=entry.get("raw"),
    )


def _pair(
    proposed: Sequence[ToolCall], made: Sequence[tuple[ToolCall, Envelope]]
) -> list[tuple[ToolCall, list[Envelope]]]:
    """The turn's calls with their Envelopes, by call id. The loop renames a call
    whose id the provider repeated; such a call is paired by its place instead."""
    by_id: dict[str, tuple[ToolCall, list[Envelope]]] = {}
    order: list[str] = []
    for call, envelope in made:
        if call.id not in by_id:
            by_id[call.id] = (call, [])
            order.append(call.id)
        by_id[call.id][1].append(envelope)
    paired: list[tuple[ToolCall, list[Envelope]]] = []
    unmatched = [cid for cid in order if cid not in {c.id for c in proposed}]
    for call in proposed:
        if call.id in by_id:
            paired.append(by_id[call.id])
        elif unmatched:
            paired.append(by_id[unmatched.pop(0)])
        else:
            paired.append((call, []))  # never made: the run ended first
    return paired


def recording_of(record: RunRecord) -> Recording:
    """The run ``record`` as turns of model responses and tool calls, from its trace."""
    responses: dict[int, ModelResponse] = {}
    made: dict[int, list[tuple[ToolCall, Envelope]]] = {}
    for entry in record.trace:
        kind = entry.get("type")
        if kind == "model_response":
            responses[int(entry["turn"])] = _response(entry)
        elif kind == "tool_call":
            envelope = Envelope.model_validate(entry["envelope"])
            made.setdefault(int(entry["turn"]), []).append(
                (call_from_json(entry["call"]), envelope)
            )
    turns = []
    for number in sorted(responses):
        response = responses[number]
        pairs = _pair(response.message.tool_calls, made.get(number, []))
        turns.append(
            RecordedTurn(
                number=number,
                response=response,
                calls=tuple(
                    RecordedCall(turn=number, call=call, envelopes=tuple(envelopes))
                    for call, envelopes in pairs
                ),
            )
        )
    messages = [message_from_json(m) for m in record.state.get("messages", ())]
    opening = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            break
        opening.append(message)
    return Recording(
        run_id=record.id,
        user=record.user,
        tenant=record.tenant,
        status=record.status,
        model=str(record.state.get("model", "")),
        opening=tuple(opening),
        turns=tuple(turns),
        principal=_principal(record),
    )


def _principal(record: RunRecord) -> Principal | None:
    granted = record.state.get("principal")
    if not isinstance(granted, Mapping):
        return None
    return Principal(
        record.user,
        tenant=record.tenant,
        scopes=granted.get("scopes", ()),
        roles=granted.get("roles", ()),
        attributes=granted.get("attributes") or {},
    )
