"""The OpenAI Responses API over the real SDK, against wire fixtures.

The fixtures are Responses JSON as OpenAI documents it (``input`` items out,
``output`` items back), served by an ``httpx.MockTransport`` to ``openai.AsyncOpenAI``.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

import httpx
import openai
import pytest

from callgate.agent._openai_common import PLACEHOLDER_KEY
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
from callgate.agent.openai_responses import OpenAIResponsesModel

pytestmark = pytest.mark.anyio

KEY = "sk-test-fedcba9876543210"


class Wire:
    """Answers the SDK's requests with fixtures, in order, and keeps what it sent."""

    def __init__(self, *answers: tuple[int, dict[str, Any]] | httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, httpx.Response):
            return answer
        status, body = answer
        return httpx.Response(status, json=body)

    @property
    def sent(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[-1].content)
        return body

    def transport(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=KEY, http_client=self.transport(), max_retries=0)


def response(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_760_000_000,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": "gpt-test-2026",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 654,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 32,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 686,
        },
    }


def message(text: str, kind: str = "output_text") -> dict[str, Any]:
    content: dict[str, Any] = (
        {"type": "output_text", "text": text, "annotations": []}
        if kind == "output_text"
        else {"type": "refusal", "refusal": text}
    )
    return {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [content],
    }


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


LOOKUP = ToolDef(
    name="math.factorial",  # a BFCL name with a dot
    description="n!",
    input_schema={
        "type": "object",
        "properties": {"number": {"type": "integer"}, "mod": {"type": "integer"}},
        "required": ["number"],
    },
    strict=True,
)
NOTE = ToolDef(
    name="notes.add",
    description="Add a note.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
)


async def test_history_goes_out_as_input_items_and_calls_come_back() -> None:
    wire = Wire(
        response(
            [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                message("Two more."),
                function_call("call_c", "math__factorial", '{"number": 7, "mod": null}'),
                function_call("call_d", "notes__add", '{"text": "7! done"}'),
            ]
        )
    )
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    request = ModelRequest(
        system="Be brief.",
        tools=(LOOKUP, NOTE),
        messages=(
            UserMessage(content="5! and 6!?"),
            AssistantMessage(
                parts=(
                    Text(text="Computing."),
                    ToolCall(id="call_a", name="math.factorial", arguments={"number": 5}),
                    ToolCall(id="call_b", name="math.factorial", arguments={"number": -6}),
                )
            ),
            ToolResults(
                results=(
                    ToolResult(call_id="call_a", name="math.factorial", content="120"),
                    ToolResult(
                        call_id="call_b",
                        name="math.factorial",
                        content="number must be >= 0",
                        is_error=True,
                    ),
                )
            ),
        ),
        max_tokens=256,
    )
    result = await model.request(request)

    assert wire.requests[0].url.path == "/v1/responses"
    assert wire.sent == {
        "model": "gpt-test",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "5! and 6!?"},
            {"role": "assistant", "content": "Computing."},
            {
                "type": "function_call",
                "call_id": "call_a",
                "name": "math__factorial",
                "arguments": '{"number": 5}',
            },
            {
                "type": "function_call",
                "call_id": "call_b",
                "name": "math__factorial",
                "arguments": '{"number": -6}',
            },
            {"type": "function_call_output", "call_id": "call_a", "output": "120"},
            {
                "type": "function_call_output",
                "call_id": "call_b",
                "output": "ERROR: number must be >= 0",
            },
        ],
        "tools": [
            {
                "type": "function",
                "name": "math__factorial",
                "description": "n!",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "number": {"type": "integer"},
                        "mod": {"type": ["integer", "null"]},
                    },
                    "required": ["number", "mod"],
                    "additionalProperties": False,
                },
                "strict": True,
            },
            {
                "type": "function",
                "name": "notes__add",
                "description": "Add a note.",
                "parameters": NOTE.input_schema,
                # Sent even when false: Responses makes function tools strict by default.
                "strict": False,
            },
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "max_output_tokens": 256,
    }
    assert result.parts == (
        Text(text="Two more."),
        ToolCall(id="call_c", name="math.factorial", arguments={"number": 7}),
        ToolCall(id="call_d", name="notes.add", arguments={"text": "7! done"}),
    )
    assert result.stop_reason == "tool_use"
    assert result.usage == Usage(input_tokens=654, output_tokens=32)
    assert result.model == "gpt-test-2026"
    assert result.raw is not None and result.raw["output"][0]["type"] == "reasoning"
    assert model.name == "openai-responses:gpt-test"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("any", "required"),
        ("none", "none"),
        (ForcedTool(name="math.factorial"), {"type": "function", "name": "math__factorial"}),
    ],
)
async def test_tool_choice(choice: ToolChoice, sent: object) -> None:
    wire = Wire(response([message("ok")]))
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    await model.request(
        ModelRequest(
            messages=(UserMessage(content="go"),),
            tools=(LOOKUP,),
            tool_choice=choice,
            parallel_tool_calls=False,
        )
    )
    assert wire.sent["tool_choice"] == sent
    assert wire.sent["parallel_tool_calls"] is False


async def test_without_tools_or_system_only_input_is_sent() -> None:
    wire = Wire(response([message("Hello.")]))
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    result = await model.request(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert set(wire.sent) == {"model", "input", "max_output_tokens"}
    assert result.parts == (Text(text="Hello."),)
    assert result.stop_reason == "end_turn"


async def test_invalid_json_arguments_are_kept_as_text() -> None:
    wire = Wire(response([function_call("call_x", "math__factorial", '{"number": 5')]))
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    result = await model.request(
        ModelRequest(messages=(UserMessage(content="go"),), tools=(LOOKUP,))
    )
    assert result.parts == (
        ToolCall(id="call_x", name="math.factorial", arguments={}, raw_arguments='{"number": 5'),
    )


@pytest.mark.parametrize(
    ("output", "status", "incomplete", "stop"),
    [
        ([message("Done.")], "completed", None, "end_turn"),
        ([message("Half an ans")], "incomplete", "max_output_tokens", "max_tokens"),
        ([], "incomplete", "content_filter", "refusal"),
        ([message("I can't help with that.", "refusal")], "completed", None, "refusal"),
        ([message("...")], "incomplete", "something_new", "other"),
    ],
)
async def test_status_becomes_stop_reason(
    output: list[dict[str, Any]], status: str, incomplete: str | None, stop: str
) -> None:
    wire = Wire(response(output, status=status, incomplete=incomplete))
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    result = await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert result.stop_reason == stop
    # Every message's text (or refusal) is a text part.
    assert result.parts == tuple(
        Text(text=item["content"][0].get("text") or item["content"][0]["refusal"])
        for item in output
    )


async def test_a_failed_response_is_a_model_error() -> None:
    failed = response([], status="failed", error={"code": "server_error", "message": "Try again."})
    model = OpenAIResponsesModel("gpt-test", client=Wire(failed).client())
    with pytest.raises(ModelError, match=r"failed \(server_error\): Try again\.") as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert raised.value.retryable is True


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(429, "rate_limit_exceeded", True), (500, None, True), (401, "invalid_api_key", False)],
)
async def test_http_errors_map_to_model_errors(
    status: int, code: str | None, retryable: bool
) -> None:
    body = {
        "error": {
            "message": f"Incorrect API key provided: {KEY[:8]}***{KEY[-4:]}"
            if status == 401
            else "Rate limit reached",
            "type": "invalid_request_error",
            "param": None,
            "code": code,
        }
    }
    model = OpenAIResponsesModel("gpt-test", client=Wire((status, body)).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert (raised.value.status, raised.value.retryable) == (status, retryable)
    assert f"OpenAI API error {status}" in str(raised.value)
    assert KEY[:8] not in str(raised.value) and KEY[-4:] not in str(raised.value)
    # Nor in the traceback a log would print: the SDK's exception is not chained.
    assert KEY[:8] not in "".join(traceback.format_exception(raised.value))


async def test_a_rate_limit_says_when_to_try_again() -> None:
    body = {"error": {"message": "Rate limit reached.", "type": "requests", "code": None}}
    limited = httpx.Response(429, json=body, headers={"retry-after": "30"})
    model = OpenAIResponsesModel("gpt-test", client=Wire(limited).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),)))
    assert (
        str(raised.value)
        == "OpenAI API error 429 (requests): Rate limit reached; try again in 30 s"
    )
    assert raised.value.retry_after == 30.0


async def test_a_context_error_says_what_to_lower() -> None:
    body = {
        "error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    model = OpenAIResponsesModel("gpt-test", client=Wire((400, body)).client())
    with pytest.raises(ModelError) as raised:
        await model.request(ModelRequest(messages=(UserMessage(content="go"),), max_tokens=900))
    assert "lower the output budget (900 tokens a request" in str(raised.value)
    assert not raised.value.retryable and not raised.value.cut_off


async def test_compatible_server_by_base_url_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIResponsesModel("local-model", base_url="http://127.0.0.1:8000/v1")
    assert model.name == "openai-compatible-responses:local-model"
    wire = Wire(response([message("hi")]))
    model.client = model.client.with_options(http_client=wire.transport(), max_retries=0)
    await model.request(ModelRequest(messages=(UserMessage(content="hi"),)))
    sent = wire.requests[0]
    assert (sent.url.host, sent.url.port, sent.url.path) == ("127.0.0.1", 8000, "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


def test_openai_without_a_key_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIResponsesModel("gpt-test")


async def test_a_temperature_reaches_the_wire_only_when_set() -> None:
    wire = Wire(response([message("Hello.")]))
    model = OpenAIResponsesModel("gpt-test", client=wire.client())
    await model.request(ModelRequest(messages=(UserMessage(content="hi"),), temperature=0.0))
    assert wire.sent["temperature"] == 0.0


async def test_a_compatible_server_gets_no_pattern_or_large_bounds_openai_does() -> None:
    # llama-cpp-python's grammar for these crashed its server (docs/agent.md).
    text = {"type": "string", "pattern": "^[a-z]+@[a-z]+\\.[a-z]{2,}$", "maxLength": 20_000}
    mail = ToolDef(
        name="mail.send",
        description="Send a message.",
        input_schema={"type": "object", "properties": {"body": text}, "required": ["body"]},
    )
    request = ModelRequest(messages=(UserMessage(content="hi"),), tools=(mail,))
    sent = {}
    for compatible in (True, False):
        wire = Wire(response([message("ok")]))
        model = OpenAIResponsesModel("m", client=wire.client(), compatible=compatible)
        await model.request(request)
        sent[compatible] = wire.sent["tools"][0]["parameters"]["properties"]["body"]

    assert sent[True] == {"type": "string"}
    assert sent[False] == text
