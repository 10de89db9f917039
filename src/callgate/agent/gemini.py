"""Google Gemini as a :class:`~callgate.agent.model.Model`, over the official ``google-genai`` SDK.

Install with ``pip install 'callgate[gemini]'``. Requests go through the SDK's
async API (``client.aio.models.generate_content``):

- tools are function declarations (names made Gemini-safe by a
  :class:`~callgate.agent.names.NameMap`, schemas by
  :mod:`callgate.agent._gemini_schema`);
- the conversation is ``contents`` with roles ``user`` and ``model``: a tool
  call is a ``function_call`` part, every result of one turn is one ``user``
  content of ``function_response`` parts (``{"result": ...}``, or
  ``{"error": ...}`` for an error result), paired by ``id``;
- ``tool_choice`` is ``tool_config.function_calling_config`` (``AUTO``,
  ``ANY``, ``NONE``; a forced tool is ``ANY`` with one allowed name). Gemini has
  no switch for parallel calls: ``parallel_tool_calls=False`` is not sent, and
  the loop runs what comes back by its own rules. ``ToolDef.strict`` and
  ``input_examples`` have no Gemini counterpart and are not sent.

Gemini may leave a function call without an id: the adapter then makes one up
from the response (``<name>-<index>``, with the response's id when it has one),
unique within the turn and the same every time the response is read.

Thinking models sign their function calls (``thought_signature``) and, from
Gemini 3 on, refuse a history whose calls lost their signature. The adapter keeps
the signature in the call's ``provider_data`` (``{"gemini": {"thought_signature":
base64}}``), which the run stores with its messages, so a run resumed in another
process sends it back too; calls of a history made elsewhere fall back to the
signatures this adapter remembers.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from callgate.agent._failures import Api, Failure, model_error, retry_after
from callgate.agent._gemini_schema import to_gemini_parameters
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
    ToolChoice,
    ToolResults,
    Usage,
    UserMessage,
)
from callgate.agent.names import GEMINI_NAMES, NameMap
from callgate.agent.providers import MissingCredentials

try:
    from google import genai
    from google.genai import errors, types
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "callgate.agent.gemini needs the google-genai SDK: pip install 'callgate[gemini]'"
    ) from exc

# The SDK sends with httpx2 where it is installed (the Anthropic and OpenAI SDKs
# bring it), else with httpx: its failures to connect are of either's classes.
_HTTPX_MODULES: tuple[Any, ...] = tuple(
    importlib.import_module(name) for name in ("httpx", "httpx2") if importlib.util.find_spec(name)
)
_TIMEOUTS: tuple[type[Exception], ...] = tuple(m.TimeoutException for m in _HTTPX_MODULES)
_FAILURES: tuple[type[Exception], ...] = (
    errors.APIError,
    *(m.TransportError for m in _HTTPX_MODULES),
)

__all__ = ["GeminiModel"]

_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
GEMINI_API = Api(name="Gemini API", key_variable=" or ".join(_KEY_VARIABLES))
_SIGNATURES_KEPT = 4096
"""Signatures remembered per model: far more calls than one run's history holds."""

_REFUSALS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        "LANGUAGE",
    }
)


class GeminiModel:
    """A Gemini model, e.g. ``GeminiModel("gemini-2.5-flash")``.

    Args:
        model: the model name the API knows.
        client: a ready ``google.genai.Client`` (Vertex AI, custom HTTP options,
            tests); ``api_key`` and ``base_url`` are then ignored.
        api_key: the Gemini API key; default: ``GEMINI_API_KEY``, then
            ``GOOGLE_API_KEY``.
        base_url: another endpoint for the Gemini API (a proxy, a test server).

    Raises:
        MissingCredentials: no client was given and no API key is configured
            (the message names ``GEMINI_API_KEY``).
    """

    name_rule = GEMINI_NAMES
    """The tool names the provider accepts (the loop names tools in texts its way)."""

    def __init__(
        self,
        model: str,
        *,
        client: genai.Client | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.name = f"gemini:{model}"
        if client is None:
            key = api_key or next(
                (os.environ[v] for v in _KEY_VARIABLES if os.environ.get(v)), None
            )
            if not key:
                raise MissingCredentials(
                    "no API key for gemini: set the environment variable GEMINI_API_KEY "
                    "(or GOOGLE_API_KEY), or pass api_key= or client= to GeminiModel"
                )
            options = types.HttpOptions(base_url=base_url) if base_url else None
            client = genai.Client(api_key=key, vertexai=False, http_options=options)
        self._client = client
        self._secrets = (getattr(getattr(client, "_api_client", None), "api_key", None),)
        self._signatures: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask Gemini once.

        Raises:
            ModelError: the API refused the request (4xx: not retryable, but
                408, 409 and 429 are; 5xx: retryable) or could not be reached
                (retryable); see :mod:`callgate.agent._failures`.
        """
        names = NameMap(_names_in(request), GEMINI_NAMES)
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model,
                contents=[self._content(m, names) for m in request.messages if _has_parts(m)],
                config=_config(request, names),
            )
        except _FAILURES as exc:
            # Not chained: the SDK's exception carries the response, and the
            # request with its key header.
            raise model_error(
                GEMINI_API, _failure(exc), secrets=self._secrets, max_tokens=request.max_tokens
            ) from None
        return self._response(response, names)

    # -- to Gemini ------------------------------------------------------------

    def _content(self, message: Message, names: NameMap) -> types.Content:
        if isinstance(message, UserMessage):
            return types.Content(role="user", parts=[types.Part(text=message.content)])
        if isinstance(message, ToolResults):
            return types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=result.call_id,
                            name=names.to_provider(result.name),
                            response={"error" if result.is_error else "result": result.content},
                        )
                    )
                    for result in message.results
                ],
            )
        parts: list[types.Part] = []
        for part in message.parts:
            if isinstance(part, Text):
                if part.text:
                    parts.append(types.Part(text=part.text))
                continue
            name = names.to_provider(part.name)
            args = dict(part.arguments)
            signature = _stored_signature(part) or self._signatures.get(
                _signature_key(part.id, name, args)
            )
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(id=part.id, name=name, args=args),
                    thought_signature=signature,
                )
            )
        return types.Content(role="model", parts=parts)

    # -- from Gemini ----------------------------------------------------------

    def _response(self, response: types.GenerateContentResponse, names: NameMap) -> ModelResponse:
        candidate = response.candidates[0] if response.candidates else None
        parts: list[Part] = []
        seen: set[str] = set()
        calls = 0
        content = candidate.content if candidate is not None else None
        for part in (content.parts if content is not None else None) or ():
            if part.function_call is not None:
                call = part.function_call
                provider_name = call.name or ""
                args = dict(call.args or {})
                call_id = call.id or _invented_id(provider_name, calls, response.response_id)
                while call_id in seen:  # an API id repeated within the turn
                    call_id = f"{call_id}-{calls}"
                seen.add(call_id)
                calls += 1
                provider_data = None
                if part.thought_signature:
                    self._remember(
                        _signature_key(call_id, provider_name, args), part.thought_signature
                    )
                    encoded = base64.b64encode(part.thought_signature).decode("ascii")
                    provider_data = {"gemini": {"thought_signature": encoded}}
                parts.append(
                    ToolCall(
                        id=call_id,
                        name=names.from_provider(provider_name),
                        arguments=args,
                        provider_data=provider_data,
                    )
                )
            elif part.text and not part.thought:  # thought summaries are not the answer
                parts.append(Text(text=part.text))
        usage = response.usage_metadata
        return ModelResponse(
            parts=tuple(parts),
            stop_reason=_stop_reason(candidate, has_calls=calls > 0),
            usage=Usage(
                input_tokens=(usage.prompt_token_count or 0) if usage else 0,
                # Thinking tokens are billed as output: count them as output.
                output_tokens=(
                    (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
                    if usage
                    else 0
                ),
            ),
            model=response.model_version or self.model,
            raw=response.model_dump(mode="json", exclude_none=True, exclude={"sdk_http_response"}),
        )

    def _remember(self, key: tuple[str, str, str], signature: bytes) -> None:
        self._signatures[key] = signature
        self._signatures.move_to_end(key)
        while len(self._signatures) > _SIGNATURES_KEPT:
            self._signatures.popitem(last=False)


def _names_in(request: ModelRequest) -> Iterable[str]:
    yield from (tool.name for tool in request.tools)
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            yield from (call.name for call in message.tool_calls)
        elif isinstance(message, ToolResults):
            yield from (result.name for result in message.results)
    if isinstance(request.tool_choice, ForcedTool):
        yield request.tool_choice.name


def _has_parts(message: Message) -> bool:
    # Gemini refuses a content without parts; an empty assistant turn says nothing.
    if isinstance(message, AssistantMessage):
        return any(isinstance(p, ToolCall) or p.text for p in message.parts)
    return not isinstance(message, ToolResults) or bool(message.results)


def _config(request: ModelRequest, names: NameMap) -> types.GenerateContentConfig:
    tools: list[types.ToolUnion] | None = None
    tool_config = None
    if request.tools:
        declarations = []
        for tool in request.tools:
            parameters = to_gemini_parameters(tool.input_schema)
            declarations.append(
                types.FunctionDeclaration(
                    name=names.to_provider(tool.name),
                    description=tool.description,
                    parameters=None
                    if parameters is None
                    else types.Schema.model_validate(parameters),
                )
            )
        tools = [types.Tool(function_declarations=declarations)]
        tool_config = types.ToolConfig(function_calling_config=_calling(request.tool_choice, names))
    return types.GenerateContentConfig(
        system_instruction=request.system or None,
        max_output_tokens=request.max_tokens,
        temperature=request.temperature,
        tools=tools,
        tool_config=tool_config,
        # The SDK would run Python callables itself; callgate executes every call.
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def _calling(choice: ToolChoice, names: NameMap) -> types.FunctionCallingConfig:
    if isinstance(choice, ForcedTool):
        return types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY,
            allowed_function_names=[names.to_provider(choice.name)],
        )
    mode = {
        "auto": types.FunctionCallingConfigMode.AUTO,
        "any": types.FunctionCallingConfigMode.ANY,
        "none": types.FunctionCallingConfigMode.NONE,
    }[choice]
    return types.FunctionCallingConfig(mode=mode)


def _stop_reason(candidate: types.Candidate | None, *, has_calls: bool) -> StopReason:
    if candidate is None:
        return "refusal"  # the prompt itself was blocked (prompt_feedback says why)
    reason = candidate.finish_reason.value if candidate.finish_reason is not None else None
    if reason == "MAX_TOKENS":
        return "max_tokens"
    if reason in _REFUSALS:
        return "refusal"
    if has_calls:
        return "tool_use"
    if reason in (None, "STOP", "FINISH_REASON_UNSPECIFIED"):
        return "end_turn"
    return "other"  # MALFORMED_FUNCTION_CALL, OTHER, ...


def _invented_id(name: str, index: int, response_id: str | None) -> str:
    return f"{name}-{response_id}-{index}" if response_id else f"{name}-{index}"


def _stored_signature(call: ToolCall) -> bytes | None:
    """The thought signature kept with the call (see the module docs), if any."""
    data = (call.provider_data or {}).get("gemini")
    encoded = data.get("thought_signature") if isinstance(data, Mapping) else None
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError:
        return None


def _signature_key(call_id: str, name: str, args: Mapping[str, Any]) -> tuple[str, str, str]:
    return call_id, name, json.dumps(args, sort_keys=True, default=str)


def _failure(exc: Exception) -> Failure:
    if isinstance(exc, errors.APIError):
        headers = getattr(exc.response, "headers", None)
        return Failure(
            kind="status",
            status=exc.code if isinstance(exc.code, int) else None,
            code=exc.status,
            detail=exc.message,
            retry_after=retry_after(headers if isinstance(headers, Mapping) else None),
        )
    return Failure(kind="timeout" if isinstance(exc, _TIMEOUTS) else "connection")
