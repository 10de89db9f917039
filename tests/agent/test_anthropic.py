"""The Anthropic adapter: the real SDK against wire fixtures (request and response JSON as documented)."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from callgate.agent.anthropic import AnthropicModel
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
from callgate.agent.names import ANTHROPIC_NAMES
from tests.agent.corpus import Bfcl

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
API_KEY = "sk-ant-test-0123456789abcdef"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())  # type: ignore[no-any-return]


Answer = tuple[int, dict[str, Any]] | Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


@dataclass
class Wire:
    """The Messages endpoint, served from fixtures; keeps what the SDK sent."""

    answers: list[Answer] = field(default_factory=list)
    sent: list[httpx2.Request] = field(default_factory=list)
    fail: Exception | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Sent with every answer, beside a request id."""

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.sent[-1].content)  # type: ignore[no-any-return]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request)
        if self.fail is not None:
            raise self.fail
        answer = self.answers.pop(0)
        status, body = answer(json.loads(request.content)) if callable(answer) else answer
        return httpx2.Response(
            status, json=body, headers={"request-id": "req_test", **self.headers}
        )


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
async def model(wire: Wire) -> AsyncIterator[AnthropicModel]:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(wire.handle))
    client = anthropic.AsyncAnthropic(
        api_key=API_KEY, base_url="http://anthropic.test", http_client=http, max_retries=0
    )
    yield AnthropicModel("claude-sonnet-4-6", client=client)
    await client.close()


DEPLOY_STATUS = ToolDef(
    name="ops.deploy_status",
    description="Status of a deployment.",
    input_schema={
        "type": "object",
        "properties": {
            "deploy_id": {"type": "string"},
            "verbose": {"type": "boolean", "default": False},
        },
        "required": ["deploy_id"],
    },
    strict=True,
    input_examples=({"deploy_id": "D-1"}, {"deploy_id": "D-2", "verbose": True}),
)
ROLLBACK = ToolDef(
    name="ops.rollback",
    description="Roll a deployment back.",
    input_schema={
        "$defs": {"Reason": {"type": "string", "enum": ["failed", "manual"]}},
        "type": "object",
        "properties": {
            "deploy_id": {"type": "string"},
            "reason": {"$ref": "#/$defs/Reason", "description": "Why."},
        },
        "required": ["deploy_id", "reason"],
    },
)


def ask(*messages: Any, **options: Any) -> ModelRequest:
    return ModelRequest(
        messages=messages or (UserMessage(content="Check D-42."),),
        tools=(DEPLOY_STATUS, ROLLBACK),
        **options,
    )


# -- requests --------------------------------------------------------------------


async def test_a_request_with_tools_and_history_is_the_documented_wire_json(
    wire: Wire, model: AnthropicModel
) -> None:
    wire.answers.append((200, fixture("message_text.json")))
    history = (
        UserMessage(content="Check D-42 and D-43."),
        AssistantMessage(
            parts=(
                Text(text="Checking both."),
                ToolCall(id="toolu_c1", name="ops.deploy_status", arguments={"deploy_id": "D-42"}),
                ToolCall(id="toolu_c2", name="ops.deploy_status", arguments={"deploy_id": "D-43"}),
            )
        ),
        ToolResults(
            results=(
                ToolResult(
                    call_id="toolu_c1", name="ops.deploy_status", content='{"state": "failed"}'
                ),
                ToolResult(
                    call_id="toolu_c2",
                    name="ops.deploy_status",
                    content="unknown deployment D-43",
                    is_error=True,
                ),
            )
        ),
        UserMessage(content="Roll back the failed one."),
    )
    response = await model.request(
        ask(*history, system="You operate deployments.", max_tokens=1024)
    )

    assert wire.body == fixture("request_with_history.json")
    sent = wire.sent[-1]
    assert sent.method == "POST" and sent.url.path == "/v1/messages"
    # The key goes in a header (which one is the SDK version's choice), never in the body.
    assert any(API_KEY in value for value in sent.headers.values())
    assert API_KEY not in sent.content.decode()
    assert "anthropic-version" in sent.headers
    assert response.parts == (Text(text="D-42 was rolled back."),)
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=1200, output_tokens=9)
    assert model.name == "anthropic:claude-sonnet-4-6"


async def test_empty_parts_are_not_sent_and_turns_of_one_role_are_joined(
    wire: Wire, model: AnthropicModel
) -> None:
    # The API refuses empty text blocks and empty turns; it would join same-role turns.
    wire.answers.append((200, fixture("message_text.json")))
    call = ToolCall(id="toolu_1", name="ops.rollback", arguments={"deploy_id": "D-1"})
    await model.request(
        ask(
            UserMessage(content="Go."),
            AssistantMessage(parts=(Text(text="Rolling back."),)),
            AssistantMessage(parts=(Text(text=""), call)),
            ToolResults(
                results=(ToolResult(call_id="toolu_1", name="ops.rollback", content="ok"),)
            ),
            AssistantMessage(parts=(Text(text=""),)),
            UserMessage(content="And now?"),
        )
    )
    turns = [(m["role"], [b["type"] for b in m["content"]]) for m in wire.body["messages"][1:]]
    assert turns == [("assistant", ["text", "tool_use"]), ("user", ["tool_result", "text"])]
    assert wire.body["messages"][0] == {"role": "user", "content": "Go."}


@pytest.mark.parametrize(
    ("choice", "parallel", "wire_choice"),
    [
        ("auto", True, {"type": "auto"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("any", True, {"type": "any"}),
        ("any", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("none", True, {"type": "none"}),
        (ForcedTool(name="ops.rollback"), True, {"type": "tool", "name": "ops__rollback"}),
        (
            ForcedTool(name="ops.rollback"),
            False,
            {"type": "tool", "name": "ops__rollback", "disable_parallel_tool_use": True},
        ),
    ],
)
async def test_tool_choice_reaches_the_wire(
    wire: Wire,
    model: AnthropicModel,
    choice: ToolChoice,
    parallel: bool,
    wire_choice: dict[str, Any],
) -> None:
    wire.answers.append((200, fixture("message_text.json")))
    await model.request(ask(tool_choice=choice, parallel_tool_calls=parallel))
    assert wire.body["tool_choice"] == wire_choice


async def test_no_tools_sends_neither_tools_nor_tool_choice(
    wire: Wire, model: AnthropicModel
) -> None:
    wire.answers.append((200, fixture("message_text.json")))
    await model.request(ModelRequest(messages=(UserMessage(content="Hi"),), tool_choice="any"))
    assert wire.body["messages"] == [{"role": "user", "content": "Hi"}]  # the request went out
    assert "tools" not in wire.body and "tool_choice" not in wire.body and "system" not in wire.body


async def test_a_strict_tool_whose_schema_has_no_strict_form_is_sent_without_strict(
    wire: Wire, model: AnthropicModel
) -> None:
    # An open map cannot be closed without refusing its entries: strict would refuse the
    # whole request, so this tool goes unconstrained (the gate validates it anyway).
    wire.answers.append((200, fixture("message_text.json")))
    labels = ToolDef(
        name="ops.label",
        description="Set labels.",
        input_schema={
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            },
        },
        strict=True,
    )
    await model.request(ModelRequest(messages=(UserMessage(content="Hi"),), tools=(labels,)))
    (tool,) = wire.body["tools"]
    assert "strict" not in tool
    assert tool["input_schema"]["properties"]["labels"]["additionalProperties"] == {
        "type": "string"
    }


# -- responses -------------------------------------------------------------------


async def test_parallel_tool_use_maps_back_to_callgate_names(
    wire: Wire, model: AnthropicModel
) -> None:
    wire.answers.append((200, fixture("message_parallel_tool_use.json")))
    response = await model.request(ask())
    assert response.parts == (
        Text(text="I'll check both deployments."),
        ToolCall(
            id="toolu_01A09q90qw90lq917835lq9",
            name="ops.deploy_status",
            arguments={"deploy_id": "D-42"},
        ),
        ToolCall(
            id="toolu_01B12r34st56uv78wx90yz12",
            name="ops.deploy_status",
            arguments={"deploy_id": "D-43", "verbose": True},
        ),
    )
    assert response.stop_reason == "tool_use"
    # Cache reads and writes are input too: the API counts them apart from input_tokens.
    assert response.usage == Usage(input_tokens=512 + 100 + 2000, output_tokens=87)
    assert response.model == "claude-sonnet-4-6"
    assert response.raw is not None
    assert response.raw["id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert response.raw == fixture("message_parallel_tool_use.json")  # as it came


async def test_a_name_the_model_invented_comes_back_as_it_is(
    wire: Wire, model: AnthropicModel
) -> None:
    answer = fixture("message_parallel_tool_use.json")
    answer["content"] = [{"type": "tool_use", "id": "toolu_x", "name": "delete_all", "input": {}}]
    wire.answers.append((200, answer))
    response = await model.request(ask())
    assert response.message.tool_calls == (ToolCall(id="toolu_x", name="delete_all"),)


@pytest.mark.parametrize(
    ("wire_reason", "reason"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "other"),
        ("model_context_window_exceeded", "other"),
    ],
)
async def test_stop_reasons(
    wire: Wire, model: AnthropicModel, wire_reason: str, reason: str
) -> None:
    answer = fixture("message_text.json") | {"stop_reason": wire_reason}
    wire.answers.append((200, answer))
    assert (await model.request(ask())).stop_reason == reason


async def test_a_refusal_and_a_truncated_answer(wire: Wire, model: AnthropicModel) -> None:
    wire.answers += [
        (200, fixture("message_refusal.json")),
        (200, fixture("message_max_tokens.json")),
    ]
    refused = await model.request(ask())
    assert refused.stop_reason == "refusal" and refused.parts == ()
    truncated = await model.request(ask())
    assert truncated.stop_reason == "max_tokens"
    assert truncated.message.text == "The deployment D-42 failed because the health check"


# -- errors ----------------------------------------------------------------------


async def test_a_rate_limit_is_a_retryable_model_error(wire: Wire, model: AnthropicModel) -> None:
    wire.answers.append((429, fixture("error_rate_limit.json")))
    with pytest.raises(ModelError) as caught:
        await model.request(ask())
    assert caught.value.retryable is True and caught.value.status == 429
    assert str(caught.value) == (
        "Anthropic API error 429 (rate_limit_error): "
        "Number of request tokens has exceeded your per-minute rate limit"
    )


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (403, "permission_error", False),
        (404, "not_found_error", False),
        (413, "request_too_large", False),
        (500, "api_error", True),
        (529, "overloaded_error", True),
    ],
)
async def test_api_errors_map_to_model_errors_without_the_key(
    wire: Wire, model: AnthropicModel, status: int, kind: str, retryable: bool
) -> None:
    # A proxy that echoes the key it was given must not put it in a trace.
    body = {"type": "error", "error": {"type": kind, "message": f"rejected x-api-key {API_KEY}"}}
    wire.answers.append((status, body))
    with pytest.raises(ModelError) as caught:
        await model.request(ask())
    assert caught.value.retryable is retryable and caught.value.status == status
    assert kind in str(caught.value)
    assert API_KEY not in str(caught.value) and "[redacted]" in str(caught.value)
    # Nor in the traceback a log would print: the SDK's exception is not chained.
    assert API_KEY not in "".join(traceback.format_exception(caught.value))


async def test_a_401_says_which_key_to_check(wire: Wire, model: AnthropicModel) -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    wire.answers.append((401, body))
    with pytest.raises(ModelError) as caught:
        await model.request(ask())
    assert str(caught.value) == (
        "Anthropic API error 401 (authentication_error): invalid x-api-key; "
        "check the API key (ANTHROPIC_API_KEY)"
    )


@pytest.mark.parametrize(
    "said",
    [
        "prompt is too long: 208573 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again",
    ],
)
async def test_a_context_error_says_what_to_lower(
    wire: Wire, model: AnthropicModel, said: str
) -> None:
    wire.answers.append(
        (400, {"type": "error", "error": {"type": "invalid_request_error", "message": said}})
    )
    with pytest.raises(ModelError) as caught:
        await model.request(ModelRequest(messages=(UserMessage(content="Hi"),), max_tokens=8192))
    assert str(caught.value).startswith(f"Anthropic API error 400 (invalid_request_error): {said}")
    assert "lower the output budget (8192 tokens a request; --max-output-tokens" in str(
        caught.value
    )
    assert not caught.value.retryable and not caught.value.cut_off


async def test_a_rate_limit_says_when_to_try_again(wire: Wire, model: AnthropicModel) -> None:
    wire.headers["retry-after"] = "20"
    wire.answers.append((429, fixture("error_rate_limit.json")))
    with pytest.raises(ModelError) as caught:
        await model.request(ask())
    assert str(caught.value).endswith("per-minute rate limit; try again in 20 s")
    assert caught.value.retry_after == 20.0


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (httpx2.ConnectError("refused"), "could not reach the Anthropic API (connection error)"),
        (httpx2.ReadTimeout("slow"), "Anthropic API request timed out"),
    ],
)
async def test_unreachable_api_is_a_retryable_model_error(
    wire: Wire, model: AnthropicModel, failure: Exception, message: str
) -> None:
    wire.fail = failure
    with pytest.raises(ModelError) as caught:
        await model.request(ask())
    assert caught.value.retryable is True and caught.value.status is None
    assert str(caught.value) == message


def test_without_a_key_the_error_names_the_environment_variable() -> None:
    with pytest.raises(ValueError, match="set the ANTHROPIC_API_KEY environment variable"):
        AnthropicModel("claude-sonnet-4-6")


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    model = AnthropicModel("claude-haiku-4-5", base_url="http://anthropic.test", max_retries=5)
    assert model.name == "anthropic:claude-haiku-4-5"
    assert model._client.api_key == API_KEY
    assert model._client.max_retries == 5
    assert str(model._client.base_url).startswith("http://anthropic.test")


@pytest.mark.slow
def test_callgate_agent_does_not_import_the_sdk_and_the_adapter_names_the_extra() -> None:
    code = (
        "import sys; import callgate.agent; assert 'anthropic' not in sys.modules\n"
        "sys.modules['anthropic'] = None\n"
        "try:\n    import callgate.agent.anthropic\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'callgate[anthropic]'" in out.stdout


# -- names ------------------------------------------------------------------------


async def test_bfcl_dotted_names_round_trip_through_the_wire(
    wire: Wire, model: AnthropicModel, bfcl: Bfcl
) -> None:
    dotted = [call for call in bfcl.calls if "." in call.tool.name]
    tools: dict[str, ToolDef] = {}
    for call in dotted:
        tools.setdefault(
            call.tool.name,
            ToolDef(
                name=call.tool.name,
                description=call.tool.description,
                input_schema=call.tool.schema,
            ),
        )
    position = {name: i for i, name in enumerate(tools)}

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        shown = [tool["name"] for tool in body["tools"]]
        assert all(ANTHROPIC_NAMES.accepts(name) for name in shown)
        assert len(set(shown)) == len(shown)
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_{i:05d}",
                "name": shown[position[call.tool.name]],  # the model calls what it was shown
                "input": call.arguments,
            }
            for i, call in enumerate(dotted)
        ]
        return 200, fixture("message_parallel_tool_use.json") | {"content": content}

    wire.answers.append(answer)
    response = await model.request(
        ModelRequest(messages=(UserMessage(content="Go."),), tools=tuple(tools.values()))
    )
    got = [(c.name, json.dumps(c.arguments, sort_keys=True)) for c in response.message.tool_calls]
    want = [(c.tool.name, json.dumps(c.arguments, sort_keys=True)) for c in dotted]
    assert got == want
    assert len(tools) > 500 and len(dotted) > 1000


async def test_a_temperature_is_refused_before_anything_is_sent(
    wire: Wire, model: AnthropicModel
) -> None:
    with pytest.raises(ModelError, match="takes no temperature") as refused:
        await model.request(ModelRequest(messages=(UserMessage(content="Hi"),), temperature=0.0))
    assert not refused.value.retryable and wire.sent == []
