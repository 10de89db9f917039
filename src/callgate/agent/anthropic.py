"""The Anthropic Messages API as a :class:`~callgate.agent.model.Model`.

Needs the ``anthropic`` extra (``pip install 'callgate[anthropic]'``); importing
:mod:`callgate.agent` does not import this module.

Example:
    model = AnthropicModel("claude-sonnet-4-6")  # the key from ANTHROPIC_API_KEY
    response = await model.request(ModelRequest(messages=(UserMessage(content="Hi"),)))

How callgate's representation maps to the API:

- tools -> ``tools`` (names made provider-safe by a :class:`NameMap` built from
  the request's tools and the calls in its history, and mapped back on the way
  in); schemas converted by :mod:`callgate.agent._anthropic_schema`. ``strict`` is
  sent only where the schema has a strict form (else the tool goes without it,
  logged): a schema the grammar cannot compile would fail the whole request.
- :class:`ToolResults` -> one user message with a ``tool_result`` block per result,
  in order; consecutive messages of one role are joined into one turn.
- ``tool_choice`` -> ``{"type": "auto" | "any" | "none" | "tool"}``;
  ``parallel_tool_calls=False`` -> ``disable_parallel_tool_use``.
- Usage: input tokens include the prompt-cache reads and writes (the API counts
  those apart from ``input_tokens``), so a run's input is what it really sent.
- Only ``text`` and ``tool_use`` blocks become parts; others (thinking, server
  tools) stay in ``raw``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from typing import Any

from callgate.agent._anthropic_schema import input_schema, strict_input_schema
from callgate.agent._failures import Api, Failure, model_error, retry_after
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    StopReason,
    Text,
    ToolCall,
    ToolDef,
    ToolResults,
    Usage,
    UserMessage,
)
from callgate.agent.model import ModelError
from callgate.agent.names import ANTHROPIC_NAMES, NameMap

try:
    import anthropic
    from anthropic.types import (
        ContentBlockParam,
        MessageParam,
        ToolChoiceParam,
        ToolParam,
    )
    from anthropic.types import (
        Message as AnthropicMessage,
    )
except ImportError as error:
    raise ImportError(
        "callgate.agent.anthropic needs the Anthropic SDK: pip install 'callgate[anthropic]'"
    ) from error

__all__ = ["AnthropicModel"]

log = logging.getLogger(__name__)

API_KEY_ENV = "ANTHROPIC_API_KEY"
ANTHROPIC_API = Api(name="Anthropic API", key_variable=API_KEY_ENV)

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}
"""Everything else (``pause_turn``, ``model_context_window_exceeded``, new ones)
is ``other``: the loop stops and says so rather than guess."""


class AnthropicModel:
    """A :class:`~callgate.agent.model.Model` over the official SDK's ``messages.create``.

    Args:
        model: the Anthropic model id.
        client: a configured ``anthropic.AsyncAnthropic`` (used as it is: its own
            key, base URL and retries); without one, a client is made from the
            arguments below.
        api_key: the API key; default: the ``ANTHROPIC_API_KEY`` environment variable.
        base_url: another endpoint speaking the Messages API (a proxy, a gateway).
        max_retries: the SDK's own retries of rate limits, overload and
            connection errors, with its backoff, before a :class:`ModelError`.

    Raises:
        ValueError: no client, no ``api_key`` and ``ANTHROPIC_API_KEY`` unset.
    """

    name_rule = ANTHROPIC_NAMES
    """The tool names the provider accepts (the loop names tools in texts its way)."""

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.name = f"anthropic:{model}"
        if client is None:
            api_key = api_key or os.environ.get(API_KEY_ENV)
            if not api_key:
                raise ValueError(
                    f"no Anthropic API key: set the {API_KEY_ENV} environment variable "
                    "(or pass api_key=)"
                )
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries
            )
        self._client = client

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request to the Messages API.

        Raises:
            ModelError: the API refused the request or could not be reached;
                ``retryable`` for rate limits, overload, 5xx, timeouts and
                connection errors (:mod:`callgate.agent._failures`).
        """
        names = _name_map(request)
        tools = [_tool_param(tool, names) for tool in request.tools]
        options: dict[str, Any] = {}
        if request.system:
            options["system"] = request.system
        if request.temperature is not None:
            # The SDK has no such argument, and the API version it sends (2026-10-21)
            # refuses sampling parameters with a 400, even at their defaults.
            raise ModelError(
                "the Anthropic API takes no temperature (its API version 2026-10-21 "
                "refuses sampling parameters): run without one"
            )
        if tools:
            options["tools"] = tools
            options["tool_choice"] = _tool_choice(request, names)
        try:
            response = await self._client.messages.create(
                model=self.model,
                max_tokens=request.max_tokens,
                messages=messages_param(request.messages, names),
                **options,
            )
        except anthropic.APIError as error:
            # Not chained: the SDK's exception carries the request, headers and all.
            raise model_error(
                ANTHROPIC_API,
                _failure(error),
                secrets=(self._client.api_key, self._client.auth_token),
                max_tokens=request.max_tokens,
            ) from None
        return response_from(response, names)


def _name_map(request: ModelRequest) -> NameMap:
    names = [tool.name for tool in request.tools]
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            names += [call.name for call in message.tool_calls]
    if isinstance(request.tool_choice, ForcedTool):
        names.append(request.tool_choice.name)
    return NameMap(names, ANTHROPIC_NAMES)


def _tool_param(tool: ToolDef, names: NameMap) -> ToolParam:
    param: ToolParam = {
        "name": names.to_provider(tool.name),
        "description": tool.description,
        "input_schema": input_schema(tool.input_schema),
    }
    if tool.strict:
        strict = strict_input_schema(tool.input_schema)
        if strict is None:
            log.info("tool %s has no strict schema form: sent without strict", tool.name)
        else:
            param["input_schema"] = strict
            param["strict"] = True
    if tool.input_examples:
        param["input_examples"] = [dict(example) for example in tool.input_examples]
    return param


def _tool_choice(request: ModelRequest, names: NameMap) -> ToolChoiceParam:
    choice = request.tool_choice
    if choice == "none":
        return {"type": "none"}
    param: ToolChoiceParam
    if isinstance(choice, ForcedTool):
        param = {"type": "tool", "name": names.to_provider(choice.name)}
    elif choice == "any":
        param = {"type": "any"}
    else:
        param = {"type": "auto"}
    if not request.parallel_tool_calls:
        param["disable_parallel_tool_use"] = True
    return param


def messages_param(messages: Iterable[Message], names: NameMap) -> list[MessageParam]:
    """callgate's messages as the API's.

    Consecutive turns of one role are joined into one (a tool's results and the
    user's next words, say): the API would join them anyway, and this way the
    request says what the model reads.
    """
    out: list[MessageParam] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, names)
            if not blocks:
                continue  # the API refuses an empty assistant turn
            if out and out[-1]["role"] == "assistant":
                out[-1]["content"] = [*_blocks(out[-1]["content"]), *blocks]
            else:
                out.append({"role": "assistant", "content": blocks})
        elif out and out[-1]["role"] == "user":
            out[-1]["content"] = [*_blocks(out[-1]["content"]), *_user_blocks(message)]
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        else:
            out.append({"role": "user", "content": _user_blocks(message)})
    return out


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _user_blocks(message: UserMessage | ToolResults) -> list[ContentBlockParam]:
    if isinstance(message, UserMessage):
        return [{"type": "text", "text": message.content}]
    return [
        {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content,
            "is_error": result.is_error,
        }
        for result in message.results
    ]


def _assistant_blocks(message: AssistantMessage, names: NameMap) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    for part in message.parts:
        if isinstance(part, Text):
            if part.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.id,
                    "name": names.to_provider(part.name),
                    "input": dict(part.arguments),
                }
            )
    return blocks


def response_from(response: AnthropicMessage, names: NameMap) -> ModelResponse:
    """The API's response in callgate's terms, tool names mapped back."""
    parts: list[Part] = []
    for block in response.content:
        if block.type == "text":
            parts.append(Text(text=block.text))
        elif block.type == "tool_use":
            arguments = block.input
            if isinstance(arguments, dict):
                parts.append(
                    ToolCall(id=block.id, name=names.from_provider(block.name), arguments=arguments)
                )
            else:  # not an object: the loop answers with an error the model can fix
                parts.append(
                    ToolCall(
                        id=block.id,
                        name=names.from_provider(block.name),
                        raw_arguments=json.dumps(arguments),
                    )
                )
    usage = response.usage
    input_tokens = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=_STOP_REASONS.get(response.stop_reason or "", "other"),
        usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens),
        model=response.model,
        raw=response.model_dump(mode="json", exclude_unset=True),
    )


def _failure(error: anthropic.APIError) -> Failure:
    if isinstance(error, anthropic.APIStatusError):
        kind, detail = _error_body(error.body)
        return Failure(
            kind="status",
            status=error.status_code,
            code=kind,
            detail=detail or error.message,
            retry_after=retry_after(error.response.headers),
        )
    if isinstance(error, anthropic.APITimeoutError):  # a kind of connection error: first
        return Failure(kind="timeout")
    if isinstance(error, anthropic.APIConnectionError):
        return Failure(kind="connection")
    return Failure(kind="unreadable", detail=error.message)


def _error_body(body: object) -> tuple[str | None, str | None]:
    """``(type, message)`` from the documented ``{"type": "error", "error": {...}}``."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            kind, detail = inner.get("type"), inner.get("message")
            return (
                kind if isinstance(kind, str) else None,
                detail if isinstance(detail, str) else None,
            )
    return None, None
