"""What the Chat Completions and Responses adapters share: the client, errors, tools
and the way tool call arguments come back.

Error results: neither API has an error flag on a tool's answer (``role: tool``,
``function_call_output``), so an error result's text starts with
:data:`ERROR_PREFIX`; models read it as a failed call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from callgate.agent import _failures as failures
from callgate.agent._failures import Api, Failure, retry_after
from callgate.agent._openai_schema import StrictSchema, loose_schema, strict_schema
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    ModelRequest,
    ToolCall,
    ToolDef,
    ToolResult,
)
from callgate.agent.model import ModelError
from callgate.agent.names import OPENAI_NAMES, NameMap

try:
    import openai
except ImportError as error:
    raise ImportError(
        "callgate's OpenAI adapters need the OpenAI SDK: pip install 'callgate[openai]'"
    ) from error

API_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "unused"
"""Sent to an OpenAI-compatible server when no key is given: the SDK requires one,
local servers (vLLM, llama.cpp, Ollama) ignore it."""
ERROR_PREFIX = "ERROR: "


def make_client(
    *, api_key: str | None, base_url: str | None, max_retries: int
) -> openai.AsyncOpenAI:
    """A client for OpenAI (key from ``OPENAI_API_KEY``) or, with ``base_url``, for
    an OpenAI-compatible server (``api_key`` or a placeholder: ``OPENAI_API_KEY``
    is OpenAI's and is not sent to another host).

    Raises:
        ValueError: no ``base_url``, no ``api_key`` and ``OPENAI_API_KEY`` unset.
    """
    if base_url is None:
        api_key = api_key or os.environ.get(API_KEY_ENV)
        if not api_key:
            raise ValueError(
                f"no OpenAI API key: set the {API_KEY_ENV} environment variable "
                "(or pass api_key=, or base_url= for an OpenAI-compatible server)"
            )
    return openai.AsyncOpenAI(
        api_key=api_key or PLACEHOLDER_KEY, base_url=base_url, max_retries=max_retries
    )


class OpenAIModelBase:
    """What both OpenAI adapters hold: the model, its name and the client.

    ``names`` are the model-name prefixes for OpenAI itself and for a compatible
    server at ``base_url``.
    """

    name_rule = OPENAI_NAMES
    """The tool names the provider accepts (the loop names tools in texts its way)."""

    names: tuple[str, str] = ("openai", "openai-compatible")

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        strict: bool = False,
        max_retries: int = 2,
        compatible: bool | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.client = client or make_client(
            api_key=api_key, base_url=base_url, max_retries=max_retries
        )
        self.compatible = (
            compatible if compatible is not None else is_compatible(str(self.client.base_url))
        )
        self.name = f"{self.names[1] if self.compatible else self.names[0]}:{model}"
        self.strict = strict


OPENAI_HOST = "api.openai.com"


def is_compatible(base_url: str) -> bool:
    """Whether ``base_url`` is an OpenAI-compatible server rather than OpenAI's own
    API: any host but OpenAI's is (vLLM, llama.cpp, Ollama, gateways), and gets
    the forms every such server reads (``"content": ""``, ``max_tokens``)."""
    return urlsplit(base_url).hostname != OPENAI_HOST


OPENAI_API = Api(
    name="OpenAI API", key_variable=API_KEY_ENV, names_url="unanswered", auth_text_quotes_key=True
)
COMPATIBLE_SERVER = Api(
    # OPENAI_API_KEY is OpenAI's and not sent to another host: the 401 names none.
    name="OpenAI-compatible server",
    names_url="always",
    auth_text_quotes_key=True,
)


def unreadable(error: Exception, *, compatible: bool) -> ModelError:
    """The error for an answer in a shape the API never has: the run fails (and is
    saved) with what was wrong, rather than with a traceback."""
    failure = Failure(kind="unreadable", detail=f"{type(error).__name__}: {error}")
    return failures.model_error(COMPATIBLE_SERVER if compatible else OPENAI_API, failure)


def model_error(
    error: openai.APIError,
    *,
    api_key: str | None,
    compatible: bool,
    max_tokens: int | None = None,
) -> ModelError:
    """``error`` as the loop sees it (:mod:`callgate.agent._failures`): the URL
    tried is named when no answer came, and in every error of an OpenAI-compatible
    server, the user's choice of URL (a typo in it is the usual reason)."""
    request = getattr(error, "request", None)
    url = str(request.url) if request is not None else None
    failure: Failure
    if isinstance(error, openai.APIStatusError):
        code, detail = _error_body(error.body)
        failure = Failure(
            kind="status",
            status=error.status_code,
            code=code,
            detail=detail or error.message,
            url=url,
            retry_after=retry_after(error.response.headers),
        )
    elif isinstance(error, openai.APITimeoutError):  # a kind of connection error: first
        failure = Failure(kind="timeout", url=url)
    elif isinstance(error, openai.APIConnectionError):
        failure = Failure(kind="connection", url=url)
    else:  # a response the SDK could not read
        failure = Failure(kind="unreadable", detail=error.message)
    return failures.model_error(
        COMPATIBLE_SERVER if compatible else OPENAI_API,
        failure,
        # The placeholder is no secret, and redacting it would cut the word from texts.
        secrets=() if api_key == PLACEHOLDER_KEY else (api_key,),
        max_tokens=max_tokens,
    )


def _error_body(body: object) -> tuple[str | None, str | None]:
    """(code or type, message) of an OpenAI error body ``{"error": {...}}``."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if not isinstance(body, Mapping):
        return None, None
    code = body.get("code") or body.get("type")
    detail = body.get("message")
    return (
        str(code) if code else None,
        str(detail) if detail else None,
    )


def result_text(result: ToolResult) -> str:
    """What the model reads of ``result`` (marked when it is an error)."""
    return ERROR_PREFIX + result.content if result.is_error else result.content


GRAMMAR_BOUNDS = {"maxLength": 1000, "maxItems": 100}
"""The largest bounds sent to an OpenAI-compatible server. llama-cpp-python turns
a tool's parameters into a sampling grammar in which a bound becomes that many
nested rules: a ``maxLength`` of 1,500 or more (the demo's email body allows
20,000) crashed its server with a segmentation fault, 1,000 did not."""


def compatible_parameters(schema: Any) -> Any:
    """``schema`` as an OpenAI-compatible server is sent it: without the bounds
    above :data:`GRAMMAR_BOUNDS` and without ``pattern`` (llama-cpp-python's
    server crashed on the demo's email pattern, and on ``^[a-z]+@[a-z]+\\.[a-z]{2,}$``,
    while ``^D-[0-9]+$`` worked). The model is told less; the gate still checks
    every bound and pattern, and the descriptions give examples."""
    if isinstance(schema, list):
        return [compatible_parameters(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {}
    for key, value in schema.items():
        # A property named like a keyword has a schema, not a number or text, as value.
        if key == "pattern" and isinstance(value, str):
            continue
        if key in GRAMMAR_BOUNDS and isinstance(value, int) and value > GRAMMAR_BOUNDS[key]:
            continue
        kept[key] = compatible_parameters(value)
    return kept


@dataclass(frozen=True)
class OpenAITool:
    """One tool as one request sends it."""

    tool: ToolDef
    name: str
    parameters: dict[str, Any]
    strict: StrictSchema | None


class Tools:
    """The tools of one request, their provider names, and the way back for calls.

    The :class:`NameMap` is built from the request's tools and every call in its
    history (and a forced tool), so earlier calls keep their names. For a
    ``compatible`` server the parameters are :func:`compatible_parameters`.
    """

    def __init__(self, request: ModelRequest, *, strict: bool, compatible: bool = False) -> None:
        names = [tool.name for tool in request.tools]
        for message in request.messages:
            if isinstance(message, AssistantMessage):
                names += [call.name for call in message.tool_calls]
        if isinstance(request.tool_choice, ForcedTool):
            names.append(request.tool_choice.name)
        self.names = NameMap(names, OPENAI_NAMES)
        self.tools: list[OpenAITool] = []
        self._strict: dict[str, StrictSchema] = {}
        for tool in request.tools:
            converted = strict_schema(tool.input_schema) if strict or tool.strict else None
            parameters = converted.schema if converted else loose_schema(tool.input_schema)
            if compatible:
                parameters = compatible_parameters(parameters)
            self.tools.append(
                OpenAITool(
                    tool=tool,
                    name=self.names.to_provider(tool.name),
                    parameters=parameters,
                    strict=converted,
                )
            )
            if converted is not None:
                self._strict[tool.name] = converted

    def call(self, *, id: object, name: object, arguments: object) -> ToolCall:
        """A model's call in callgate's terms: the name mapped back, the arguments
        parsed (and, for a strict tool, restored to the original schema's form).

        The API sends arguments as JSON text; some compatible servers send the
        object itself, which is taken as it is. Arguments that are not a JSON
        object stay as text in ``raw_arguments`` (with empty ``arguments``), for
        the loop to answer with an error the model can fix; so does any other
        shape (a missing name becomes ``""``, which the gate refuses). A missing
        or non-text id becomes ``""``: the loop gives the call one of its own.
        """
        call_id = id if isinstance(id, str) else ""
        tool_name = self.names.from_provider(name) if isinstance(name, str) else ""
        parsed: object
        if isinstance(arguments, Mapping):
            parsed = dict(arguments)
        elif arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            return ToolCall(id=call_id, name=tool_name, arguments={})  # some servers send ""
        elif isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                return ToolCall(id=call_id, name=tool_name, arguments={}, raw_arguments=arguments)
        else:
            raw = json.dumps(arguments, ensure_ascii=False, default=str)
            return ToolCall(id=call_id, name=tool_name, arguments={}, raw_arguments=raw)
        assert isinstance(parsed, dict)
        parsed = {str(key): value for key, value in parsed.items()}
        strict = self._strict.get(tool_name)
        if strict is not None:
            parsed = strict.restore(parsed)
        return ToolCall(id=call_id, name=tool_name, arguments=parsed)
