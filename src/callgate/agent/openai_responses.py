"""The OpenAI Responses API as a :class:`~callgate.agent.model.Model`.

Needs the ``openai`` extra (``pip install 'callgate[openai]'``); importing
:mod:`callgate.agent` does not import this module.

Example:
    model = OpenAIResponsesModel("gpt-5-mini")  # the key from OPENAI_API_KEY

How callgate's representation maps to the API (stateless: every request sends
the whole conversation as ``input``; nothing depends on ``previous_response_id``):

- system -> ``instructions``; :class:`UserMessage` -> a ``user`` message;
  :class:`AssistantMessage` -> an ``assistant`` message for its text and one
  ``function_call`` item per call (``call_id``, ``name``, ``arguments`` as JSON
  text; no item ``id``, which would ask for the reasoning item that produced
  it); :class:`ToolResults` -> one ``function_call_output`` item per result, in
  order. The API has no error flag on an output: an error result's text starts
  with ``ERROR: `` (as in Chat Completions).
- tools -> flat ``function`` tools (``name``, ``description``, ``parameters``,
  ``strict``), names and strict schemas as in :mod:`callgate.agent.openai_chat`.
  ``strict`` is always sent: the Responses API makes function tools strict
  unless told otherwise.
- ``tool_choice`` -> ``auto`` / ``required`` / ``none`` / ``{"type": "function",
  "name": ...}``; ``parallel_tool_calls`` with tools; ``max_tokens`` ->
  ``max_output_tokens``.
- Output: ``message`` items' ``output_text`` (and ``refusal``) -> text parts,
  ``function_call`` items -> :class:`ToolCall` (id: ``call_id``); other items
  (reasoning, hosted tools) stay in ``raw``. Status ``completed`` -> ``end_turn``
  or ``tool_use``; ``incomplete`` for ``max_output_tokens`` -> ``max_tokens``,
  for ``content_filter`` -> ``refusal``; ``failed`` -> :class:`ModelError`.
"""

from __future__ import annotations

from typing import Any

from callgate.agent._openai_common import (
    OpenAIModelBase,
    OpenAITool,
    Tools,
    model_error,
    result_text,
    unreadable,
)
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    ModelRequest,
    ModelResponse,
    Part,
    StopReason,
    Text,
    ToolCall,
    ToolResults,
    Usage,
    UserMessage,
    arguments_text,
)
from callgate.agent.model import ModelError

try:
    import openai
    from openai.types.responses import (
        FunctionToolParam,
        Response,
        ResponseInputItemParam,
    )
    from openai.types.responses.response_create_params import ToolChoice
except ImportError as error:
    raise ImportError(
        "callgate.agent.openai_responses needs the OpenAI SDK: pip install 'callgate[openai]'"
    ) from error

__all__ = ["OpenAIResponsesModel"]

_INCOMPLETE: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
_RETRYABLE_FAILURES = {"server_error", "rate_limit_exceeded"}


class OpenAIResponsesModel(OpenAIModelBase):
    """A :class:`~callgate.agent.model.Model` over ``responses.create``.

    Args:
        model: the model id.
        client: a configured ``openai.AsyncOpenAI``, used as it is; without one,
            a client is made from the arguments below.
        api_key: the API key; default: ``OPENAI_API_KEY`` for OpenAI, a
            placeholder for a server at ``base_url``.
        base_url: another server speaking the Responses API (vLLM, for one); the
            name is then ``openai-compatible-responses:<model>``.
        strict: send every tool with ``strict: true`` (a tool's own ``strict``
            asks for it too).
        max_retries: the SDK's own retries of rate limits, overload and
            connection errors, with its backoff, before a :class:`ModelError`.
        compatible: whether the server is another one than OpenAI's API;
            default: any base URL whose host is not OpenAI's API is.

    Raises:
        ValueError: no client, no base URL, no ``api_key`` and ``OPENAI_API_KEY`` unset.
    """

    names = ("openai-responses", "openai-compatible-responses")

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` to the Responses API.

        Raises:
            ModelError: the API refused the request, could not be reached, or
                failed to answer.
        """
        tools = Tools(request, strict=self.strict, compatible=self.compatible)
        options: dict[str, Any] = {}
        if tools.tools:
            options["tools"] = [_tool(tool) for tool in tools.tools]
            options["tool_choice"] = _tool_choice(request, tools)
            options["parallel_tool_calls"] = request.parallel_tool_calls
        if request.system:
            options["instructions"] = request.system
        if request.temperature is not None:
            options["temperature"] = request.temperature
        try:
            response = await self.client.responses.create(
                model=self.model,
                input=_input(request, tools),
                max_output_tokens=request.max_tokens,
                **options,
            )
        except openai.APIError as error:
            raise model_error(
                error,
                api_key=self.client.api_key,
                compatible=self.compatible,
                max_tokens=request.max_tokens,
            ) from None
        try:
            return _response(response, tools)
        except (AttributeError, TypeError, ValueError, KeyError) as error:
            raise unreadable(error, compatible=self.compatible) from None


def _tool(tool: OpenAITool) -> FunctionToolParam:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict is not None,
    }


def _tool_choice(request: ModelRequest, tools: Tools) -> ToolChoice:
    choice = request.tool_choice
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": tools.names.to_provider(choice.name)}
    return "required" if choice == "any" else choice


def _input(request: ModelRequest, tools: Tools) -> list[ResponseInputItemParam]:
    items: list[ResponseInputItemParam] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            items.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            items += [
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": tools.names.to_provider(call.name),
                    "arguments": arguments_text(call),
                }
                for call in message.tool_calls
            ]
        elif isinstance(message, ToolResults):
            items += [
                {
                    "type": "function_call_output",
                    "call_id": result.call_id,
                    "output": result_text(result),
                }
                for result in message.results
            ]
    return items


def _response(response: Response, tools: Tools) -> ModelResponse:
    if response.status == "failed":
        code = response.error.code if response.error else None
        detail = response.error.message if response.error else "no detail"
        raise ModelError(
            f"OpenAI response failed ({code or 'unknown'}): {detail}",
            retryable=code in _RETRYABLE_FAILURES,
        )
    parts: list[Part] = []
    refused = False
    for item in response.output:
        if item.type == "message":
            for content in item.content:
                if content.type == "output_text":
                    parts.append(Text(text=content.text))
                else:
                    parts.append(Text(text=content.refusal))
                    refused = True
        elif item.type == "function_call":
            parts.append(tools.call(id=item.call_id, name=item.name, arguments=item.arguments))
    reason = response.incomplete_details.reason if response.incomplete_details else None
    stop: StopReason
    if refused:
        stop = "refusal"
    elif response.status == "incomplete":
        stop = _INCOMPLETE.get(reason or "", "other")
    elif any(isinstance(part, ToolCall) for part in parts):
        stop = "tool_use"
    elif response.status in ("completed", None):
        stop = "end_turn"
    else:
        stop = "other"
    usage = response.usage
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        usage=Usage(
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        ),
        model=response.model,
        raw=response.to_dict(),
    )
