"""OpenAI Chat Completions, and any OpenAI-compatible server, as a
:class:`~callgate.agent.model.Model`.

Needs the ``openai`` extra (``pip install 'callgate[openai]'``); importing
:mod:`callgate.agent` does not import this module.

Example:
    model = OpenAIChatModel("gpt-5-mini")  # the key from OPENAI_API_KEY
    local = OpenAIChatModel("qwen3:8b", base_url="http://127.0.0.1:11434/v1")  # no key

How callgate's representation maps to the API:

- tools -> ``tools`` of type ``function`` (names made provider-safe by a
  :class:`~callgate.agent.names.NameMap` from the request's tools and the calls
  in its history, and mapped back); ``strict`` (the model's setting or the
  tool's) rewrites the schema as strict mode requires
  (:mod:`callgate.agent._openai_schema`) and the arguments back.
- system -> a ``system`` message first; :class:`AssistantMessage` -> an
  ``assistant`` message with ``content`` and ``tool_calls`` (arguments as JSON
  text); :class:`ToolResults` -> one ``tool`` message per result, in order,
  with ``tool_call_id``; an error result's text starts with ``ERROR: ``
  (``role: tool`` has no error flag).
- ``tool_choice`` -> ``auto`` / ``required`` (for ``any``) / ``none`` /
  ``{"type": "function", "function": {"name": ...}}``; ``parallel_tool_calls``
  only with tools (the API refuses it without).
- ``max_tokens`` -> ``max_completion_tokens`` for OpenAI (reasoning models refuse
  ``max_tokens``), ``max_tokens`` for compatible servers (which all read it, not
  all read the newer name).
- ``finish_reason``: ``stop`` -> ``end_turn`` (``tool_use`` if the message holds
  tool calls: some servers say ``stop`` then), ``tool_calls`` -> ``tool_use``,
  ``length`` -> ``max_tokens``, ``content_filter`` -> ``refusal``; a refusal
  text becomes a text part with stop reason ``refusal``.
"""

from __future__ import annotations

from typing import Any

from callgate.agent._openai_common import (
    OpenAIModelBase,
    OpenAITool,
    Tools,
    arguments_text,
    model_error,
    result_text,
)
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    ModelRequest,
    ModelResponse,
    Part,
    StopReason,
    Text,
    ToolResults,
    Usage,
    UserMessage,
)

try:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
    )
except ImportError as error:
    raise ImportError(
        "callgate.agent.openai_chat needs the OpenAI SDK: pip install 'callgate[openai]'"
    ) from error

__all__ = ["OpenAIChatModel"]

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIChatModel(OpenAIModelBase):
    """A :class:`~callgate.agent.model.Model` over ``chat.completions.create``.

    Args:
        model: the model id (OpenAI's, or what the compatible server serves).
        client: a configured ``openai.AsyncOpenAI``, used as it is (its key, base
            URL and retries); without one, a client is made from the arguments below.
        api_key: the API key; default: ``OPENAI_API_KEY`` for OpenAI, a
            placeholder for a server at ``base_url`` (``OPENAI_API_KEY`` is not
            sent to another host: pass the server's key here if it needs one).
        base_url: an OpenAI-compatible server (vLLM, llama.cpp server, Ollama),
            e.g. ``http://127.0.0.1:11434/v1``; the name is then
            ``openai-compatible:<model>``.
        strict: send every tool with ``strict: true`` (a tool's own ``strict``
            asks for it too).
        max_retries: the SDK's own retries of rate limits, overload and
            connection errors, with its backoff, before a :class:`ModelError`.

    Raises:
        ValueError: no client, no base URL, no ``api_key`` and ``OPENAI_API_KEY`` unset.
    """

    names = ("openai", "openai-compatible")

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` to Chat Completions.

        Raises:
            ModelError: the API refused the request or could not be reached.
        """
        tools = Tools(request, strict=self.strict)
        options: dict[str, Any] = {}
        if tools.tools:
            options["tools"] = [_tool(tool) for tool in tools.tools]
            options["tool_choice"] = _tool_choice(request, tools)
            options["parallel_tool_calls"] = request.parallel_tool_calls
        limit = "max_tokens" if self.compatible else "max_completion_tokens"
        options[limit] = request.max_tokens
        try:
            completion = await self.client.chat.completions.create(
                model=self.model, messages=_messages(request, tools), **options
            )
        except openai.APIError as error:
            raise model_error(
                error, api_key=self.client.api_key, compatible=self.compatible
            ) from None
        return _response(completion, tools)


def _tool(tool: OpenAITool) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.tool.description,
            "parameters": tool.parameters,
            "strict": tool.strict is not None,
        },
    }


def _tool_choice(request: ModelRequest, tools: Tools) -> ChatCompletionToolChoiceOptionParam:
    choice = request.tool_choice
    if isinstance(choice, ForcedTool):
        return {"type": "function", "function": {"name": tools.names.to_provider(choice.name)}}
    return "required" if choice == "any" else choice


def _messages(request: ModelRequest, tools: Tools) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if isinstance(message, UserMessage):
            messages.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            assistant: ChatCompletionAssistantMessageParam = {
                "role": "assistant",
                "content": message.text or None,
            }
            if message.tool_calls:
                assistant["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": tools.names.to_provider(call.name),
                            "arguments": arguments_text(call),
                        },
                    }
                    for call in message.tool_calls
                ]
            messages.append(assistant)
        elif isinstance(message, ToolResults):
            messages += [
                {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result)}
                for result in message.results
            ]
    return messages


def _response(completion: ChatCompletion, tools: Tools) -> ModelResponse:
    raw = completion.to_dict()
    if not completion.choices:
        return ModelResponse(parts=(), stop_reason="other", model=completion.model, raw=raw)
    choice = completion.choices[0]
    message = choice.message
    parts: list[Part] = []
    if message.content:
        parts.append(Text(text=message.content))
    if message.refusal:
        parts.append(Text(text=message.refusal))
    for call in message.tool_calls or ():
        if call.type == "function":  # custom (free-text) tools are not callgate's
            parts.append(
                tools.call(id=call.id, name=call.function.name, arguments=call.function.arguments)
            )
    stop = _STOP_REASONS.get(choice.finish_reason or "", "other")
    if message.refusal:
        stop = "refusal"
    elif stop == "end_turn" and any(not isinstance(p, Text) for p in parts):
        stop = "tool_use"
    usage = completion.usage
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        usage=Usage(
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
        ),
        model=completion.model,
        raw=raw,
    )
