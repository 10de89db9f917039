"""The Anthropic adapter against the real SDK, over wire fixtures; its schema conversion on BFCL and tau2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from jsonschema import Draft202012Validator

from callgate.agent._anthropic_schema import input_schema, strict_input_schema
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
from tests.agent.corpus import bfcl_calls, bfcl_unique_tools, tau2_tools

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

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.sent[-1].content)  # type: ignore[no-any-return]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request)
        if self.fail is not None:
            raise self.fail
        answer = self.answers.pop(0)
        status, body = answer(json.loads(request.content)) if callable(answer) else answer
        return httpx2.Response(status, json=body, headers={"request-id": "req_test"})


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


async def test_an_empty_text_part_is_not_sent(wire: Wire, model: AnthropicModel) -> None:
    # The API refuses empty text blocks, and assistant turns with no content at all.
    wire.answers.append((200, fixture("message_text.json")))
    call = ToolCall(id="toolu_1", name="ops.rollback", arguments={"deploy_id": "D-1"})
    await model.request(
        ask(
            UserMessage(content="Go."),
            AssistantMessage(parts=(Text(text=""), call)),
            ToolResults(
                results=(ToolResult(call_id="toolu_1", name="ops.rollback", content="ok"),)
            ),
            AssistantMessage(parts=(Text(text=""),)),
            UserMessage(content="And now?"),
        )
    )
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in wire.body["messages"][1:]]
    assert roles == [("assistant", ["tool_use"]), ("user", ["tool_result", "text"])]


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


# -- schemas: the corpora ----------------------------------------------------------


def corpus_tools() -> list[Any]:
    return [*bfcl_unique_tools(), *tau2_tools()]


META = Draft202012Validator(Draft202012Validator.META_SCHEMA)
"""What ``check_schema`` does, built once: it builds a validator per call, 6,500 times here."""


def test_every_corpus_schema_converts_to_an_input_schema_the_api_accepts() -> None:
    tools = corpus_tools()
    assert len(tools) == 3_200 + 72
    strict = 0
    for tool in tools:
        schema = input_schema(tool.schema)
        assert schema["type"] == "object", tool.name
        META.validate(schema)
        assert '"$ref"' not in json.dumps(schema) and "$defs" not in schema, tool.name
        closed = strict_input_schema(tool.schema)
        if closed is not None:
            META.validate(closed)
            strict += 1
    # Those without a strict form have open maps (BFCL "dict") or values of any type.
    assert strict == 3_131


def test_no_bfcl_ground_truth_call_is_lost_by_the_conversion() -> None:
    checked = lost_to_strict = 0
    for call in bfcl_calls():
        if not Draft202012Validator(call.tool.schema).is_valid(call.arguments):
            continue  # BFCL's answer does not fit its own schema: nothing to keep
        checked += 1
        converted = Draft202012Validator(input_schema(call.tool.schema))
        assert converted.is_valid(call.arguments), (call.entry, call.tool.name)
        closed = strict_input_schema(call.tool.schema)
        if closed is not None:
            errors = list(Draft202012Validator(closed).iter_errors(call.arguments))
            # Strict closes objects: only arguments the schema never named are refused.
            assert all(e.validator == "additionalProperties" for e in errors), call.entry
            lost_to_strict += bool(errors)
    assert checked == 3_101
    assert lost_to_strict == 4


async def test_bfcl_dotted_names_round_trip_through_the_wire(
    wire: Wire, model: AnthropicModel
) -> None:
    dotted = [call for call in bfcl_calls() if "." in call.tool.name]
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


# -- schemas: what is done to them --------------------------------------------------

TREE = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        }
    },
    "type": "object",
    "properties": {
        "root": {"$ref": "#/$defs/Node", "description": "The top."},
        "elsewhere": {"$ref": "other.json#/Thing"},
    },
}


def test_references_are_inlined_and_recursion_is_cut_without_losing_values() -> None:
    schema = input_schema(TREE)
    root = schema["properties"]["root"]
    assert root["description"] == "The top."  # an annotating sibling overrides the target's
    assert root["properties"]["name"] == {"type": "string"}
    assert root["properties"]["children"]["items"] == {
        "description": "Any value: the same shape as Node (recursive)."
    }
    assert schema["properties"]["elsewhere"] == {
        "description": "Any value: the same shape as other.json#/Thing (not resolvable here)."
    }
    deep = {"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}}
    assert Draft202012Validator(TREE).is_valid(deep)
    assert Draft202012Validator(schema).is_valid(deep)
    assert strict_input_schema(TREE) is None  # strict mode compiles no recursion


def test_a_constraining_ref_sibling_is_kept_beside_the_target() -> None:
    schema = input_schema(
        {
            "definitions": {"Code": {"type": "string", "pattern": "^[A-Z]+$"}},
            "type": "object",
            "properties": {"code": {"$ref": "#/definitions/Code", "maxLength": 3}},
        }
    )
    assert schema["properties"]["code"] == {
        "allOf": [{"type": "string", "pattern": "^[A-Z]+$"}],
        "maxLength": 3,
    }


def test_names_and_data_that_look_like_keywords_are_left_alone() -> None:
    original = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "internal",
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$defs": {"type": "integer"},
            "query": {"type": "object", "default": {"$ref": "#/not/a/schema"}, "properties": {}},
        },
    }
    schema = input_schema(original)
    assert schema == {
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$defs": {"type": "integer"},
            "query": {"type": "object", "default": {"$ref": "#/not/a/schema"}, "properties": {}},
        },
    }


def test_the_root_becomes_an_object() -> None:
    assert input_schema({}) == {"type": "object"}
    assert input_schema({"type": ["object", "null"], "properties": {}})["type"] == "object"
    merged = input_schema(
        {
            "anyOf": [
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                {
                    "type": "object",
                    "properties": {"email": {"type": "string"}, "id": {"type": "integer"}},
                    "required": ["email"],
                },
            ]
        }
    )
    assert merged["type"] == "object" and "anyOf" not in merged and "required" not in merged
    assert merged["properties"]["id"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert "one of 2 forms" in merged["description"] and "(email)" in merged["description"]
    assert Draft202012Validator(merged).is_valid({"email": "a@b.c"})
    assert Draft202012Validator(merged).is_valid({"id": 7})
    both = input_schema(
        {
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        }
    )
    assert both == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    with pytest.raises(ValueError, match="must describe an object"):
        input_schema({"type": "string"})


def test_the_strict_form_closes_objects_and_describes_what_it_cannot_compile() -> None:
    strict = strict_input_schema(
        {
            "type": "object",
            "properties": {
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": "How many.",
                },
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "when": {"type": "string", "format": "date"},
                "zip": {"type": "string", "format": "postal-code"},
                "pick": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                "where": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    )
    assert strict == {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "How many. (minimum: 1, maximum: 10)"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "(minItems: 2)"},
            "when": {"type": "string", "format": "date"},
            "zip": {"type": "string", "description": "(format: 'postal-code')"},
            "pick": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "where": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }
    assert strict_input_schema({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    free_form = {"type": "object", "properties": {"extra": {"type": "object"}}}
    any_value = {"type": "object", "properties": {"value": {"description": "Anything."}}}
    assert strict_input_schema(free_form) is None
    assert strict_input_schema(any_value) is None
