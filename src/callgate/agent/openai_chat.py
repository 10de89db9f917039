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
- system -> a ``system`` message first (for a compatible server, an empty one
  when there is no system prompt and tools are offered: llama-cpp-python's
  chatml-function-calling template lists the tools only inside a system
  message); :class:`AssistantMessage` -> an
  ``assistant`` message with ``content`` and ``tool_calls`` (arguments as JSON
  text); :class:`ToolResults` -> one ``tool`` message per result, in order,
  with ``tool_call_id``; an error result's text starts with ``ERROR: ``
  (``role: tool`` has no error flag). A turn of calls without text has
  ``"content": null`` for OpenAI (its documented form) and ``"content": ""``
  for a compatible server (llama.cpp's refuses null and fails without the key;
  vLLM and Ollama read ``""``). Call ids are the loop's (the provider's own
  where it sent unique ones; see :func:`~callgate.agent.messages.unique_call_ids`),
  so the assistant message and the results always pair.
- A server is "compatible" when its base URL (the client's) is not OpenAI's own
  API; ``compatible=`` says it outright (a gateway in front of OpenAI, say).
- ``tool_choice`` -> ``auto`` / ``required`` (for ``any``) / ``none`` /
  ``{"type": "function", "function": {"name": ...}}``; ``parallel_tool_calls``
  only with tools (the API refuses it without).
- ``max_tokens`` -> ``max_completion_tokens`` for OpenAI (reasoning models refuse
  ``max_tokens``), ``max_tokens`` for compatible servers (which all read it, not
  all read the newer name).
- The response is read from its JSON, whatever shape a server gives it:
  arguments sent as an object are taken as they are, any other shape (a list, a
  number, a call without a name) reaches the gate as text it refuses, so the
  model gets an error it can fix; an answer that cannot be read at all (a
  ``message`` that is not an object) is a :class:`ModelError`, never a traceback.
- ``finish_reason``: ``stop`` -> ``end_turn`` (``tool_use`` if the message holds
  tool calls: some servers say ``stop`` then; missing, with content, ->
  ``end_turn``), ``tool_calls`` -> ``tool_use`` (also when its only calls are of
  a type callgate does not offer, such as ``custom``: they are dropped),
  ``length`` -> ``max_tokens``, ``content_filter`` -> ``refusal``, anything else
  -> ``other``; a refusal text becomes a text part with stop reason ``refusal``.
  No choices at all -> no parts, ``other``. The loop decides what each means for
  the run (:mod:`callgate.agent.loop`: only a finished text answer completes it).
- Tool parameters for a compatible server leave out ``pattern`` and large
  bounds, on which llama-cpp-python's grammar crashed
  (:func:`~callgate.agent._openai_common.compatible_parameters`).
- A 400 that says the request does not fit the model's context
  (``context_length_exceeded``, or vLLM's "maximum context length") names the
  output budget to lower; one whose prompt is the whole window (the conversation
  is too long, or the model wrote until it was full) ran out of context
  (``ModelError.cut_off``), and says both.
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
        compatible: whether the server is an OpenAI-compatible one (``""``
            content beside tool calls, ``max_tokens``) rather than OpenAI's
            API; default: any base URL whose host is not OpenAI's API is one.

    Raises:
        ValueError: no client, no base URL, no ``api_key`` and ``OPENAI_API_KEY`` unset.
    """

    names = ("openai", "openai-compatible")

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` to Chat Completions.

        Raises:
            ModelError: the API refused the request or could not be reached.
        """
        tools = Tools(request, strict=self.strict, compatible=self.compatible)
        options: dict[str, Any] = {}
        if tools.tools:
            options["tools"] = [_tool(tool) for tool in tools.tools]
            options["tool_choice"] = _tool_choice(request, tools)
            options["parallel_tool_calls"] = request.parallel_tool_calls
        limit = "max_tokens" if self.compatible else "max_completion_tokens"
        options[limit] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        try:
            completion = await self.client.chat.completions.create(
                model=self.model,
                messages=_messages(request, tools, compatible=self.compatible),
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
            return _response(completion, tools)
        except (AttributeError, TypeError, ValueError, KeyError) as error:
            raise unreadable(error, compatible=self.compatible) from None


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


def _messages(
    request: ModelRequest, tools: Tools, *, compatible: bool
) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if request.system or (compatible and tools.tools):
        # Some servers' templates show the tools only inside a system message
        # (llama-cpp-python's chatml-function-calling): without one, the model
        # sees no tool at all. An empty one says nothing else.
        messages.append({"role": "system", "content": request.system or ""})
    for message in request.messages:
        if isinstance(message, UserMessage):
            messages.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            # OpenAI documents null content beside tool calls; llama.cpp's server
            # refuses null (500) and its templates fail without the key, while ""
            # is read by every compatible server (vLLM, Ollama, llama.cpp).
            text: str | None = message.text if compatible else message.text or None
            assistant: ChatCompletionAssistantMessageParam = {
                "role": "assistant",
                "content": text,
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
    # Read from the JSON as the server sent it: the SDK does not validate a
    # response, and compatible servers send shapes its types do not have.
    raw = completion.to_dict(warnings=False)
    choices = raw.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return ModelResponse(parts=(), stop_reason="other", model=completion.model, raw=raw)
    choice = choices[0]
    message = choice.get("message") or {}
    parts: list[Part] = []
    content, refusal = message.get("content"), message.get("refusal")
    if content and isinstance(content, str):
        parts.append(Text(text=content))
    if refusal and isinstance(refusal, str):
        parts.append(Text(text=refusal))
    unusable = False
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        # Custom (free-text) tools are not callgate's, and a call without a
        # function cannot be answered as one.
        if not isinstance(function, dict) or call.get("type", "function") != "function":
            unusable = True
            continue
        parts.append(
            tools.call(
                id=call.get("id"), name=function.get("name"), arguments=function.get("arguments")
            )
        )
    finish = choice.get("finish_reason")
    stop = _STOP_REASONS.get(finish if isinstance(finish, str) else "", "other")
    if finish is None and parts:
        stop = "end_turn"  # some servers leave it out of a finished answer
    if refusal:
        stop = "refusal"
    elif any(isinstance(p, ToolCall) for p in parts):
        stop = "tool_use"  # some servers say "stop" for a turn of tool calls
    elif unusable and stop in ("end_turn", "tool_use"):
        stop = "tool_use"  # a tool turn with no call callgate can make
    usage = raw.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return ModelResponse(
        parts=tuple(parts),
        stop_reason=stop,
        usage=Usage(
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
        ),
        model=completion.model if isinstance(completion.model, str) else None,
        raw=raw,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
