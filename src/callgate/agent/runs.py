"""The records of an agent run: its limits, usage, outcome, events and saved state.

:mod:`callgate.agent.loop` runs the loop; these are what it counts, reports and
keeps in the store between a pause and a resume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from callgate.agent.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    arguments_text,
    message_from_json,
    message_to_json,
)
from callgate.agent.providers import keepable_url
from callgate.contract import Principal
from callgate.store.base import RunRecord, RunStatus

__all__ = [
    "REFUSED_ARGUMENTS_KEPT",
    "CallOutcome",
    "EventKind",
    "RunEvent",
    "RunLimits",
    "RunResult",
    "RunState",
    "RunUsage",
    "add_count",
    "call_from_json",
    "call_json",
    "cut_refused",
    "granted",
]


@dataclass(kw_only=True, frozen=True)
class RunLimits:
    """When a run stops. ``None`` means no limit for tokens and wall time.

    Args:
        max_turns: model requests per run.
        max_tool_calls: tool calls per run (a turn that would pass it is not run).
        max_tokens: model tokens (input + output) per run.
        wall_time: seconds of activity per run (time spent waiting for an
            approval does not count).
        concurrent_reads: run a turn's consecutive read-only calls concurrently.
        max_tokens_per_request: the output budget sent with each request.
    """

    max_turns: int = 20
    max_tool_calls: int = 100
    max_tokens: int | None = None
    wall_time: float | None = 600.0
    concurrent_reads: bool = True
    max_tokens_per_request: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tool_calls", "max_tokens_per_request"):
            if getattr(self, name) < 1:
                raise ValueError(f"RunLimits.{name} must be at least 1")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("RunLimits.max_tokens must be at least 1 (or None)")
        if self.wall_time is not None and not self.wall_time > 0:
            raise ValueError("RunLimits.wall_time must be positive (or None)")


@dataclass(kw_only=True)
class RunUsage:
    """What a run spent. The model tokens are the provider's counts;
    ``tool_definition_tokens`` is estimated from the definitions sent (their JSON,
    4 characters a token), at most each request's input count. Servers render
    definitions their own way: llama-cpp-python's chatml-function-calling drops
    the descriptions and counted 1,665 tokens for the demo's 11 tools where this
    estimates 3,155 (docs/agent.md)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_definition_tokens: int = 0
    tool_calls: int = 0
    calls_by_risk: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    approvals: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunUsage:
        return cls(**dict(data))


@dataclass(kw_only=True, frozen=True)
class CallOutcome:
    """One tool call of the run and how it ended."""

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    status: str
    payload: Any = None
    error_kind: str | None = None


@dataclass(kw_only=True, frozen=True)
class RunResult:
    """How a run ended (or where it waits).

    ``output`` is the model's last text; ``reason`` says why the run stopped or
    what it waits for; ``pending_approvals`` are the approval ids to decide.
    """

    run_id: str
    status: RunStatus
    reason: str
    output: str
    messages: tuple[Message, ...]
    usage: RunUsage
    calls: tuple[CallOutcome, ...] = ()
    pending_approvals: tuple[str, ...] = ()


EventKind = Literal["start", "text", "call", "result", "waiting", "done", "stopped", "failed"]
"""``start`` comes first (its text the model's name, ``data["resumed"]`` whether the
run goes on from a pause); ``done``, ``waiting``, ``stopped`` or ``failed`` last."""


@dataclass(kw_only=True, frozen=True)
class RunEvent:
    """Something that happened in a run, for whoever watches it (the CLI streams these)."""

    kind: EventKind
    run_id: str
    text: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


def call_json(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
    if call.raw_arguments is not None:
        data["raw_arguments"] = call.raw_arguments
    if call.provider_data is not None:
        data["provider_data"] = dict(call.provider_data)
    return data


def call_from_json(data: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        id=str(data["id"]),
        name=str(data["name"]),
        arguments=dict(data.get("arguments") or {}),
        raw_arguments=data.get("raw_arguments"),
        provider_data=data.get("provider_data"),
    )


@dataclass
class RunState:
    """The mutable state of one run between two saves."""

    id: str
    created_at: datetime
    messages: list[Message]
    usage: RunUsage
    turn: int = 0
    # The turn in progress: its results so far (by call id), and the calls still to make.
    results: dict[str, ToolResult] = field(default_factory=dict)
    remaining: list[ToolCall] = field(default_factory=list)
    turn_calls: list[str] = field(default_factory=list)
    calls: list[CallOutcome] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)
    """Ids of the calls counted while they waited for an approval: made again on a
    resume, they are not counted again."""
    trace: list[dict[str, Any]] = field(default_factory=list)

    def state(
        self,
        model: str,
        *,
        base_url: str | None = None,
        temperature: float | None = None,
        forced_tool: str | None = None,
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        """What the store keeps: the run, and how it was started (for a resume from
        the shell, and a replay as the same principal: its scopes, roles and
        attributes); ``base_url`` only if it holds no secret (see
        :func:`~callgate.agent.providers.keepable_url`)."""
        return {
            "model": model,
            "principal": granted(principal) if principal is not None else None,
            "base_url": keepable_url(base_url),
            "temperature": temperature,
            "forced_tool": forced_tool,
            "turn": self.turn,
            "messages": [message_to_json(m) for m in self.messages],
            "usage": self.usage.to_json(),
            "results": {
                k: {"content": r.content, "is_error": r.is_error, "name": r.name}
                for k, r in self.results.items()
            },
            "remaining": [call_json(c) for c in self.remaining],
            "turn_calls": list(self.turn_calls),
            "calls": [dict(c.__dict__) for c in self.calls],
            "pending": list(self.pending),
            "parked": list(self.parked),
        }

    @classmethod
    def load(cls, record: RunRecord) -> RunState:
        state = record.state
        return cls(
            id=record.id,
            created_at=record.created_at,
            messages=[message_from_json(m) for m in state["messages"]],
            usage=RunUsage.from_json(state["usage"]),
            turn=int(state["turn"]),
            results={
                k: ToolResult(
                    call_id=k, name=v["name"], content=v["content"], is_error=v["is_error"]
                )
                for k, v in state["results"].items()
            },
            remaining=[call_from_json(c) for c in state["remaining"]],
            turn_calls=list(state["turn_calls"]),
            calls=[CallOutcome(**c) for c in state["calls"]],
            pending=list(state["pending"]),
            parked=list(state.get("parked", ())),
            trace=list(record.trace),
        )


def granted(principal: Principal) -> dict[str, Any]:
    """What ``principal`` was granted, as a run's state keeps it (its user and
    tenant are the run record's own)."""
    return {
        "scopes": sorted(principal.scopes),
        "roles": sorted(principal.roles),
        # Attributes come from config or token claims: kept as JSON, whatever they hold.
        "attributes": json.loads(json.dumps(dict(principal.attributes), default=str)),
    }


REFUSED_ARGUMENTS_KEPT = 1000
"""Characters of a refused call's arguments the conversation keeps. A small model
may write arguments until its server's context is full (llama-cpp-python ignores
the output limit there): repeated in every later request, they left no room for
the next turn. The call was refused for its arguments (a construction error)
and its error says what was wrong; the trace keeps the arguments whole."""


def cut_refused(run: RunState, call: ToolCall) -> None:
    """Shorten ``call``'s arguments in the turn's assistant message (the last
    message while the turn's calls are made) if they are longer than
    :data:`REFUSED_ARGUMENTS_KEPT`: it was refused for its arguments."""
    text = arguments_text(call)
    if len(text) <= REFUSED_ARGUMENTS_KEPT:
        return
    kept = text[:REFUSED_ARGUMENTS_KEPT]
    cut = replace(
        call,
        arguments={},
        raw_arguments=f"{kept}… ({len(text) - len(kept):,} more characters, not repeated)",
    )
    message = run.messages[-1]
    assert isinstance(message, AssistantMessage)
    parts = tuple(
        cut if isinstance(part, ToolCall) and part.id == call.id else part for part in message.parts
    )
    run.messages[-1] = replace(message, parts=parts)


def add_count(counts: dict[str, int], key: str, n: int) -> None:
    """Add ``n`` to ``counts[key]``; a count that reaches 0 is removed."""
    counts[key] = counts.get(key, 0) + n
    if not counts[key]:
        del counts[key]
