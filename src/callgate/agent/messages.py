"""The one internal representation of a conversation with a model, whatever its API.

Every provider adapter converts to and from these types; the agent loop only
ever sees them. Tool names here are callgate's own (``ops.deploy_status``):
adapters map them to what their provider accepts and back (:mod:`callgate.agent.names`).

- :class:`ToolDef`: a tool as the model is shown it (model-facing schema only).
- Messages: :class:`UserMessage`, :class:`AssistantMessage` (text and
  :class:`ToolCall` parts), :class:`ToolResults` (every result of one turn, in
  one message, each paired with its call's id).
- :class:`ModelRequest` / :class:`ModelResponse` with :class:`Usage`.

All of them are frozen dataclasses and convert to JSON (:func:`message_to_json`,
:func:`message_from_json`) so a paused run can be kept in the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

__all__ = [
    "AssistantMessage",
    "ForcedTool",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "StopReason",
    "Text",
    "ToolCall",
    "ToolChoice",
    "ToolDef",
    "ToolResult",
    "ToolResults",
    "Usage",
    "UserMessage",
    "arguments_text",
    "call_ids",
    "message_from_json",
    "message_to_json",
    "unique_call_ids",
]


@dataclass(kw_only=True, frozen=True)
class ToolDef:
    """A tool as a model sees it.

    Args:
        name: callgate's name (``toolbox.tool``); adapters map it to a name their
            provider accepts.
        description: what the tool does and when to use it.
        input_schema: the model-facing JSON Schema (trusted fields absent).
        strict: ask the provider to constrain the arguments to the schema (where
            it can: OpenAI ``strict``, Anthropic ``strict``).
        input_examples: example arguments (Anthropic ``input_examples``; others
            may fold them into the description or ignore them).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    strict: bool = False
    input_examples: tuple[Mapping[str, Any], ...] = ()


@dataclass(kw_only=True, frozen=True)
class Text:
    """Text the model wrote."""

    text: str


@dataclass(kw_only=True, frozen=True)
class ToolCall:
    """A call the model proposes: never executed by the adapter.

    Args:
        id: the provider's id for the call (Anthropic ``tool_use.id``, OpenAI
            ``tool_call.id`` / Responses ``call_id``); adapters invent a stable
            one where the provider has none (Gemini).
        name: callgate's tool name (mapped back from the provider's).
        arguments: the arguments as a JSON object.
        raw_arguments: the provider's argument text when it was not a JSON
            object (then ``arguments`` is empty and the loop answers with a
            construction error the model can fix).
        provider_data: JSON the provider needs back with this call in later
            requests, by adapter (Gemini's thought signature); kept with the run,
            so it survives a pause and a restart. Never shown to the gate.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    provider_data: Mapping[str, Any] | None = None


Part: TypeAlias = Text | ToolCall


@dataclass(kw_only=True, frozen=True)
class ToolResult:
    """The answer to one :class:`ToolCall`, paired by ``call_id``.

    ``content`` is what the model reads: the payload as JSON text, or the
    Envelope's message and next step when ``is_error``.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(kw_only=True, frozen=True)
class UserMessage:
    content: str


@dataclass(kw_only=True, frozen=True)
class AssistantMessage:
    parts: tuple[Part, ...]

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(part for part in self.parts if isinstance(part, ToolCall))

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts if isinstance(part, Text))


@dataclass(kw_only=True, frozen=True)
class ToolResults:
    """Every result of one model turn, in the order of its calls."""

    results: tuple[ToolResult, ...]


Message: TypeAlias = UserMessage | AssistantMessage | ToolResults


@dataclass(frozen=True)
class ForcedTool:
    """``tool_choice`` that forces one tool (e.g. for structured extraction):
    ``ForcedTool("invoices.record")`` or ``ForcedTool(name=...)`` (one field, so
    positional too, as the docs write it)."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "any", "none"] | ForcedTool
"""``auto``: the model decides; ``any``: it must call some tool; ``none``: no tool;
a :class:`ForcedTool`: exactly that one."""

StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


@dataclass(kw_only=True, frozen=True)
class Usage:
    """Tokens the provider counted for one request (or summed over a run)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


@dataclass(kw_only=True, frozen=True)
class ModelRequest:
    """One request to a model: everything an adapter needs to build its API call."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDef, ...] = ()
    system: str | None = None
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_tokens: int = 4096
    temperature: float | None = None
    """Sampling temperature; None leaves it to the provider (or server) default."""


@dataclass(kw_only=True, frozen=True)
class ModelResponse:
    """What the model answered, in callgate's terms.

    ``raw`` is the provider's response as JSON (for the run's trace).
    """

    parts: tuple[Part, ...]
    stop_reason: StopReason
    usage: Usage = Usage()
    model: str | None = None
    raw: Mapping[str, Any] | None = None

    @property
    def message(self) -> AssistantMessage:
        return AssistantMessage(parts=self.parts)


def unique_call_ids(message: AssistantMessage, taken: set[str]) -> AssistantMessage:
    """``message`` with an id for every call that no other call of the run has.

    Results are paired with calls by id, and a write's idempotency key is made of
    it: a provider that sends no id, or the same id twice (some OpenAI-compatible
    servers do), would otherwise get one call's result for two calls. A call
    whose id is missing or already in ``taken`` (the ids of the run so far,
    updated here) gets a generated one (``call_cg<n>``); the provider's ids are
    kept wherever they are unique, so its reply names what it sent. The next
    request carries the generated ids in the assistant message and in the
    results, so the pairing holds on the wire too (by position for servers that
    read no ids).
    """
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, ToolCall):
            call_id = part.id if isinstance(part.id, str) else ""
            if not call_id or call_id in taken:
                number = len(taken) + 1
                while f"call_cg{number}" in taken:
                    number += 1
                call_id = f"call_cg{number}"
            taken.add(call_id)
            if call_id != part.id:
                part = replace(part, id=call_id)
        parts.append(part)
    return AssistantMessage(parts=tuple(parts))


def arguments_text(call: ToolCall) -> str:
    """``call``'s arguments as a JSON string (the model's own text when it was not
    JSON, so the model sees what it wrote)."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(dict(call.arguments), ensure_ascii=False)


def call_ids(messages: Sequence[Message]) -> set[str]:
    """The ids of every call in ``messages``."""
    return {
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }


# -- JSON -----------------------------------------------------------------------


def _part_to_json(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    data: dict[str, Any] = {
        "type": "tool_call",
        "id": part.id,
        "name": part.name,
        "arguments": dict(part.arguments),
    }
    if part.raw_arguments is not None:
        data["raw_arguments"] = part.raw_arguments
    if part.provider_data is not None:
        data["provider_data"] = dict(part.provider_data)
    return data


def _part_from_json(data: Mapping[str, Any]) -> Part:
    if data["type"] == "text":
        return Text(text=str(data["text"]))
    if data["type"] == "tool_call":
        return ToolCall(
            id=str(data["id"]),
            name=str(data["name"]),
            arguments=dict(data.get("arguments") or {}),
            raw_arguments=data.get("raw_arguments"),
            provider_data=data.get("provider_data"),
        )
    raise ValueError(f"unknown part type {data['type']!r}")


def message_to_json(message: Message) -> dict[str, Any]:
    """A message as JSON (for the store)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, AssistantMessage):
        return {"role": "assistant", "parts": [_part_to_json(p) for p in message.parts]}
    return {
        "role": "tool_results",
        "results": [
            {"call_id": r.call_id, "name": r.name, "content": r.content, "is_error": r.is_error}
            for r in message.results
        ],
    }


def message_from_json(data: Mapping[str, Any]) -> Message:
    """The message :func:`message_to_json` made.

    Raises:
        ValueError: not a message of this format.
    """
    role = data.get("role")
    if role == "user":
        return UserMessage(content=str(data["content"]))
    if role == "assistant":
        parts: Sequence[Mapping[str, Any]] = data["parts"]
        return AssistantMessage(parts=tuple(_part_from_json(p) for p in parts))
    if role == "tool_results":
        return ToolResults(
            results=tuple(
                ToolResult(
                    call_id=str(r["call_id"]),
                    name=str(r["name"]),
                    content=str(r["content"]),
                    is_error=bool(r.get("is_error", False)),
                )
                for r in data["results"]
            )
        )
    raise ValueError(f"unknown message role {role!r}")
