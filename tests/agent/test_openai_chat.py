"""OpenAI Chat Completions (and compatible servers) over the real SDK, against wire fixtures.

The fixtures are Chat Completions JSON as OpenAI documents it, served by an
``httpx.MockTransport`` to ``openai.AsyncOpenAI``: the SDK's own request
building, response parsing and error mapping run.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from callgate.agent._openai_common import PLACEHOLDER_KEY, Tools
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    ModelRequest,
    Text,
    ToolCall,
    ToolChoice,
    ToolDef,
    ToolResult,
    ToolResults,
    Usage,
    UserMessage,
)
from callgate.agent.model import ModelError
from callgate.agent.names import OPENAI_NAMES
from callgate.agent.openai_chat import OpenAIChatModel
from tests.agent.corpus import Bfcl

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"


class Wire:
    """Answers the SDK's requests with fixtures, in order, and keeps what it sent."""

    def __init__(self, *answers: tuple[int, dict[str, Any]] | Callable[[], httpx.Response]):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if callable(answer):
            return answer()
        status, body = answer
        return httpx.Response(status, json=body)

    @property
    def sent(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[-1].content)
        return body

    def client(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=options.pop("api_key", KEY),
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self)),
            max_retries=0,  # the SDK's backoff sleeps; one answer per request here
            **options,
        )


def completion(
    message: dict[str, Any], finish_reason: str = "stop", **extra: Any
) -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": "gpt-test-2026",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
        **extra,
    }


def error(status: int, message: str, type_: str, code: str | None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


DEPLOY = ToolDef(
    name="ops.deploy_status",
    description="The state of a deployment.",
    input_schema={
        "type": "object",
        "properties": {"deploy_id": {"type": "string"}, "verbose": {"type": "boolean"}},
        "required": ["deploy_id"],
    },
)
ROLLBACK = ToolDef(
    name="ops.rollback",
    description="Roll a deployment back.",
    input_schema={
        "type": "object",
        "properties": {"deploy_id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["deploy_id"],
    },
    strict=True,
)


def history() -> ModelRequest:
    return ModelRequest(
        system="You run deployments.",
        tools=(DEPLOY, ROLLBACK),
        messages=(
            UserMessage(content="Check D-1 and D-2."),
            AssistantMessage(
                parts=(
                    Text(text="Checking both."),
                    ToolCall(id="call_a", name="ops.deploy_status", arguments={"deploy_id": "D-1"}),
                    ToolCall(id="call_b", name="ops.deploy_status", raw_arguments='{"deploy_id": '),
                )
            ),
            ToolResults(
                results=(
                    ToolResult(
                        call_id="call_a", name="ops.deploy_status", content='{"state": "failed"}'
                    ),
                    ToolResult(
                        call_id="call_b",
                        name="ops.deploy_status",
                        content="invalid JSON arguments; send a JSON object",
                        is_error=True,
                    ),
                )
            ),
        ),
        max_tokens=512,
    )


async def test_tools_history_and_results_go_out_as_chat_messages() -> None:
    wire = Wire(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_c",
                        "type": "function",
                        "function": {
                            "name": "ops__rollback",
                            "arguments": '{"deploy_id": "D-1", "reason": null}',
                        },
                    },
                    {
                        "id": "call_d",
                        "type": "function",
                        "function": {
                            "name": "ops__deploy_status",
                            "arguments": '{"deploy_id": "D-2"}',
                        },
                    },
                ],
            },
            finish_reason="tool_calls",
        )
    )
    model = OpenAIChatModel("gpt-test", client=wire.client())
    response = await model.request(history())

    assert wire.requests[0].url.path == "/v1/chat/completions"
    assert wire.sent == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You run deployments."},
            {"role": "user", "content": "Check D-1 and D-2."},
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {
                            "name": "ops__deploy_status",
                            "arguments": '{"deploy_id": "D-1"}',
                        },
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ops__deploy_status", "arguments": '{"deploy_id": '},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": '{"state": "failed"}'},
            {
                "role": "tool",
                "tool_call_id": "call_b",
                "content": "ERROR: invalid JSON arguments; send a JSON object",
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "ops__deploy_status",
                    "description": "The state of a deployment.",
                    "parameters": DEPLOY.input_schema,
                    "strict": False,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "ops__rollback",
                    "description": "Roll a deployment back.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "deploy_id": {"type": "string"},
                            "reason": {"type": ["string", "null"]},
                        },
                        "required": ["deploy_id", "reason"],
                        "additionalProperties": False,
                    },
                    "strict": True,
                },
            },
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "max_completion_tokens": 512,
    }
    assert response.parts == (
        # The strict tool's null for its optional field means "left out".
        ToolCall(id="call_c", name="ops.rollback", arguments={"deploy_id": "D-1"}),
        ToolCall(id="call_d", name="ops.deploy_status", arguments={"deploy_id": "D-2"}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(input_tokens=321, output_tokens=45)
    assert response.model == "gpt-test-2026"
    assert response.raw is not None and response.raw["id"] == "chatcmpl-1"
    assert model.name == "openai:gpt-test"


async def test_strict_model_sends_every_tool_strict() -> None:
    wire = Wire(completion({"content": "ok"}))
    model = OpenAIChatModel("gpt-test", client=wire.client(), strict=True)
    await model.request(ModelRequest(messages=(UserMessage(content="hi"),), tools=(DEPLOY,)))
    function = wire.sent["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["deploy_id", "verbose"]
    assert function["parameters"]["properties"]["verbose"] == {"type": ["boolean", "null"]}


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("any", "required"),
        ("none", "none"),
        (
            ForcedTool(name="ops.rollback"),
            {"type": "function", "function": {"name": "ops__rollback"}},
        ),
    ],
)
async def test_tool_choice(choice: ToolChoice, sent: object) -> None:
    wire = Wire(completion({"content": "ok"}))
    model = OpenAIChatModel("gpt-test", client=wire.client())
    request = ModelRequest(
        messages=(UserMessage(content="go"),),
        tools=(DEPLOY, ROLLBACK),
        tool_choice=choice,
        parallel_tool_calls=False,
    )
    await model.request(request)
    assert wire.sent["tool_choice"] == sent
    assert wire.sent["parallel_tool_calls"] is False


async def test_without_tools_no_tool_options_are_sent() -> None:
    wire = Wire(completion({"content": "Hello."}))
    model = OpenAIChatModel("gpt-test", client=wire.client())
    response = await model.request(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert set(wire.sent) == {"model", "messages", "max_completion_tokens"}
    assert response.parts == (Text(text="Hello."),)
    assert response.stop_reason == "end_turn"


@pytest.mark.parametrize("arguments", ['{"deploy_id": "D-1"', "[1, 2]", "null"])
async def test_arguments_that_are_not_a_json_object_are_kept_as_text(arguments: str) -> None:
    wire = Wire(
        completion(
            {
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "ops__deploy_status", "arguments": arguments},
                    }
                ]
            },
            finish_reason="tool_calls",
        )
    )
    model = OpenAIChatModel("gpt-test", client=wire.client())
    response = await model.request(
        ModelRequest(messages=(UserMessage(content="go"),), tools=(DEPLOY,))
    )
    assert response.parts == (
        ToolCall(id="call_x", name="ops.deploy_status", arguments={}, raw_arguments=arguments),
    )


@pytest.mark.parametrize(
    ("message", "finish_reason", "stop"),
    [
        ({"content": "Done."}, "stop", "end_turn"),
        ({"content": "Half an ans"}, "length", "max_tokens"),
        ({"content": None}, "content_filter", "refusal"),
        ({"content": None, "refusal": "I can't help with that."}, "stop", "refusal"),
        ({"content": "?"}, "something_new", "other"),
        # Some compatible servers say "stop" for a turn of tool calls.
        (
            {
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}}
                ]
            },
            "stop",
            "tool_use",
        ),
    ],
)
async def test_finish_reasons(message: dict[str, Any], finish_reason: str, stop: str) -> None:
    wire = Wire(completion(message, finish_reason=finish_reason))
    model = OpenAIChatModel("gpt-test", client=wire.client())
    response = await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert response.stop_reason == stop
    if message.get("refusal"):
        assert response.parts == (Text(text="I can't help with that."),)


@pytest.mark.parametrize(
    ("answer", "retryable", "status", "says"),
    [
        (
            error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded"),
            True,
            429,
            "OpenAI API error 429 (rate_limit_exceeded): Rate limit reached",
        ),
        (error(500, "The server had an error", "server_error", None), True, 500, "server_error"),
        (error(503, "Overloaded", "server_error", None), True, 503, "Overloaded"),
        (
            error(400, "Invalid schema for function 'x'", "invalid_request_error", None),
            False,
            400,
            "Invalid schema for function 'x'",
        ),
        (
            error(
                401,
                f"Incorrect API key provided: {KEY[:8]}***{KEY[-4:]}. You can find your key...",
                "invalid_request_error",
                "invalid_api_key",
            ),
            False,
            401,
            "authentication failed; check the API key (OPENAI_API_KEY)",
        ),
    ],
)
async def test_errors_map_to_model_errors(
    answer: tuple[int, dict[str, Any]], retryable: bool, status: int, says: str
) -> None:
    model = OpenAIChatModel("gpt-test", client=Wire(answer).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert raised.value.retryable is retryable
    assert raised.value.status == status
    assert says in str(raised.value)
    assert KEY[:8] not in str(raised.value) and KEY[-4:] not in str(raised.value)
    # Nor in the traceback a log would print: the SDK's exception is not chained.
    assert KEY[:8] not in "".join(traceback.format_exception(raised.value))


async def test_a_rate_limit_says_when_to_try_again() -> None:
    def limited() -> httpx.Response:
        status, body = error(429, "Rate limit reached.", "requests", "rate_limit_exceeded")
        return httpx.Response(status, json=body, headers={"retry-after-ms": "1500"})

    model = OpenAIChatModel("gpt-test", client=Wire(limited).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert str(raised.value) == (
        "OpenAI API error 429 (rate_limit_exceeded): Rate limit reached; try again in 1.5 s"
    )
    assert raised.value.retry_after == 1.5


async def test_the_placeholder_key_is_no_secret_to_cut_from_a_servers_text() -> None:
    said = "The field 'reasoning_effort' is unused by this server."
    answer = error(400, said, "invalid_request_error", None)
    client = Wire(answer).client(api_key=PLACEHOLDER_KEY, base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ModelError) as raised:
        await OpenAIChatModel("m", client=client).request(
            ModelRequest(messages=(UserMessage(content="go"),))
        )
    assert str(raised.value).endswith(f"/v1/chat/completions: {said}")


async def test_unreachable_server_is_a_retryable_error() -> None:
    def refuse() -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    model = OpenAIChatModel("gpt-test", client=Wire(refuse).client())
    with pytest.raises(ModelError, match="could not reach") as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert raised.value.retryable is True and raised.value.status is None


async def test_compatible_server_by_base_url_needs_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-only-key")  # not for another host
    model = OpenAIChatModel("qwen3:8b", base_url="http://127.0.0.1:11434/v1")
    assert model.name == "openai-compatible:qwen3:8b"
    wire = Wire(completion({"content": "Hi from a local model."}, usage=None))
    model.client = model.client.with_options(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(wire)), max_retries=0
    )
    response = await model.request(
        ModelRequest(messages=(UserMessage(content="hi"),), tools=(DEPLOY,), max_tokens=64)
    )
    sent = wire.requests[0]
    assert (sent.url.host, sent.url.port, sent.url.path) == (
        "127.0.0.1",
        11434,
        "/v1/chat/completions",
    )
    assert sent.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    # Compatible servers all read max_tokens; not all read max_completion_tokens.
    assert wire.sent["max_tokens"] == 64 and "max_completion_tokens" not in wire.sent
    assert response.parts == (Text(text="Hi from a local model."),)
    assert response.usage == Usage()  # the server reported none


def test_openai_without_a_key_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="set the OPENAI_API_KEY environment variable"):
        OpenAIChatModel("gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert OpenAIChatModel("gpt-test").client.api_key == KEY


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    for module in ("callgate.agent.openai_chat", "callgate.agent._openai_common"):
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "openai", None)  # what an absent package looks like
    with pytest.raises(ImportError, match=r"pip install 'callgate\[openai\]'"):
        importlib.import_module("callgate.agent.openai_chat")


def test_every_bfcl_name_maps_to_an_openai_name_and_back(bfcl: Bfcl) -> None:
    tools = tuple(
        ToolDef(name=name, description="", input_schema={"type": "object"})
        for name in sorted({t.name for t in bfcl.unique_tools})
    )
    dotted = [t.name for t in tools if "." in t.name]
    assert len(dotted) == 871  # distinct names (1,289 of the 3,200 tools)
    prepared = Tools(ModelRequest(messages=(), tools=tools), strict=False)
    sent = [tool.name for tool in prepared.tools]
    assert all(OPENAI_NAMES.accepts(name) for name in sent)
    assert len(set(sent)) == len(tools)
    assert [prepared.call(id="c", name=n, arguments="{}").name for n in sent] == [
        t.name for t in tools
    ]


def tool_turn() -> ModelRequest:
    return ModelRequest(
        messages=(
            UserMessage(content="go"),
            AssistantMessage(
                parts=(ToolCall(id="c1", name="ops.deploy_status", arguments={"deploy_id": "D-1"}),)
            ),
            ToolResults(
                results=(ToolResult(call_id="c1", name="ops.deploy_status", content="{}"),)
            ),
        ),
        tools=(DEPLOY,),
    )


@pytest.mark.parametrize(
    ("options", "content", "name"),
    [
        ({}, None, "openai:gpt-test"),  # OpenAI's own documented form
        ({"base_url": "https://api.openai.com/v1"}, None, "openai:gpt-test"),
        # Any other host is a compatible server: llama.cpp's refuses null.
        ({"base_url": "http://127.0.0.1:8080/v1"}, "", "openai-compatible:gpt-test"),
        ({"base_url": "https://llm.internal.example/v1"}, "", "openai-compatible:gpt-test"),
    ],
)
async def test_a_tool_only_assistant_message_has_the_content_its_server_reads(
    options: dict[str, Any], content: str | None, name: str
) -> None:
    wire = Wire(completion({"content": "ok"}))
    model = OpenAIChatModel("gpt-test", client=wire.client(**options))
    await model.request(tool_turn())
    assistant = next(m for m in wire.sent["messages"] if m["role"] == "assistant")
    assert assistant["content"] == content
    assert model.name == name
    # An empty system message (the tools' place in some servers' templates) only
    # for compatible servers: OpenAI gets the request as given.
    first = wire.sent["messages"][0]
    assert (first == {"role": "system", "content": ""}) == name.startswith("openai-compatible")


async def test_compatible_can_be_said_outright() -> None:
    wire = Wire(completion({"content": "ok"}))
    model = OpenAIChatModel("gpt-test", client=wire.client(), compatible=True)
    await model.request(tool_turn())
    assert wire.sent["messages"][2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": wire.sent["messages"][2]["tool_calls"],
    }
    assert wire.sent["max_tokens"] == 4096


async def test_a_vllm_context_error_says_what_to_lower() -> None:
    answer = error(
        400,
        "This model's maximum context length is 2048 tokens. However, you requested "
        "4196 tokens (100 in the messages, 4096 in the completion).",
        "BadRequestError",
        None,
    )
    model = OpenAIChatModel("m", client=Wire(answer).client(base_url="http://127.0.0.1:8000/v1"))
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),), max_tokens=4096))
    assert "lower the output budget (4096 tokens a request; --max-output-tokens" in str(
        raised.value
    )
    assert raised.value.retryable is False


async def test_an_unrelated_400_gets_no_context_hint() -> None:
    answer = error(400, "Invalid schema for function 'x'", "invalid_request_error", None)
    model = OpenAIChatModel("m", client=Wire(answer).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert "output budget" not in str(raised.value)


def test_the_openai_compatible_provider_is_compatible_whatever_its_url() -> None:
    from callgate.agent.providers import make_model

    model = make_model("openai-compatible", "m", base_url="https://api.openai.com/v1")
    assert isinstance(model, OpenAIChatModel) and model.compatible
    assert model.name == "openai-compatible:m"
