"""The Gemini adapter against the real google-genai SDK, over wire fixtures.

Every request goes through the SDK's own code (``client.aio.models``) to an
``httpx.MockTransport`` (or, for ``base_url``, a server on 127.0.0.1); the
assertions read the JSON the SDK actually sent, and the responses are written
in the Gemini API's documented ``generateContent`` format.
"""

from __future__ import annotations

import json
import socket
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

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
    message_from_json,
    message_to_json,
)
from callgate.agent.model import ModelError
from callgate.agent.providers import MissingCredentials
from tests.agent.corpus import Bfcl

genai = pytest.importorskip("google.genai")
from google.genai import types  # noqa: E402

from callgate.agent.gemini import GeminiModel  # noqa: E402

pytestmark = pytest.mark.anyio

MODEL = "gemini-2.5-flash"
SECRET_KEY = "test-key-0123456789"
LONG_NAME = "reporting." + "quarterly_revenue_breakdown_" * 3  # over Gemini's 64 characters

STATUS = ToolDef(
    name="ops.deploy_status",
    description="Status of one deployment.",
    input_schema={
        "$defs": {"Env": {"type": "string", "enum": ["prod", "staging"]}},
        "type": "object",
        "properties": {
            "deploy_id": {"type": "string", "description": "Like D-42."},
            "env": {"anyOf": [{"$ref": "#/$defs/Env"}, {"type": "null"}]},
        },
        "required": ["deploy_id"],
        "additionalProperties": False,
    },
)
ROLLBACK = ToolDef(name=LONG_NAME, description="Roll back.", input_schema={"type": "object"})


def _text(text: str, finish: str = "STOP") -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish}
        ],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3},
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "resp-text",
    }


def _calls(*calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += calls
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 30,
            "thoughtsTokenCount": 7,
            "totalTokenCount": 157,
        },
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "r7",
    }


def _error(code: int, status: str, message: str) -> httpx.Response:
    return httpx.Response(
        code, json={"error": {"code": code, "message": message, "status": status}}
    )


Answer = dict[str, Any] | httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Wire:
    """The Gemini API as fixtures: answers in order, records what the SDK sent."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)

    def model(self, api_key: str = "test-key") -> GeminiModel:
        transport = httpx.MockTransport(self.handle)
        options = types.HttpOptions(httpx_async_client=httpx.AsyncClient(transport=transport))
        return GeminiModel(MODEL, client=genai.Client(api_key=api_key, http_options=options))

    def body(self, index: int = -1) -> dict[str, Any]:
        sent: dict[str, Any] = json.loads(self.requests[index].content)
        return sent


async def test_request_sends_tools_system_history_and_results_paired_by_id() -> None:
    wire = Wire(_text("D-42 failed and was rolled back."))
    history = (
        UserMessage(content="Check D-42 and roll it back if it failed."),
        AssistantMessage(
            parts=(
                Text(text="Checking."),
                ToolCall(id="c1", name="ops.deploy_status", arguments={"deploy_id": "D-42"}),
                ToolCall(id="c2", name=LONG_NAME, arguments={}),
            )
        ),
        ToolResults(
            results=(
                ToolResult(call_id="c1", name="ops.deploy_status", content='{"state": "failed"}'),
                ToolResult(call_id="c2", name=LONG_NAME, content="Needs approval.", is_error=True),
            )
        ),
    )
    model = wire.model()
    response = await model.request(
        ModelRequest(
            messages=history,
            tools=(STATUS, ROLLBACK),
            system="You run deployments.",
            max_tokens=512,
        )
    )

    request = wire.requests[0]
    assert request.url.path.endswith(f"/models/{MODEL}:generateContent")
    assert request.headers["x-goog-api-key"] == "test-key"
    body = wire.body()
    assert body["systemInstruction"] == {
        "parts": [{"text": "You run deployments."}],
        "role": "user",
    }
    assert body["generationConfig"] == {"maxOutputTokens": 512}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    declarations = body["tools"][0]["functionDeclarations"]
    long_safe = declarations[1]["name"]
    assert len(long_safe) <= 64 and long_safe != LONG_NAME
    assert declarations == [
        {
            "name": "ops.deploy_status",  # dots are valid Gemini names: kept as they are
            "description": "Status of one deployment.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "deploy_id": {"type": "STRING", "description": "Like D-42."},
                    "env": {"type": "STRING", "enum": ["prod", "staging"], "nullable": True},
                },
                "required": ["deploy_id"],
            },
        },
        {"name": long_safe, "description": "Roll back."},  # no parameters: none sent
    ]
    user, assistant, results = body["contents"]
    assert user == {
        "role": "user",
        "parts": [{"text": "Check D-42 and roll it back if it failed."}],
    }
    assert assistant == {
        "role": "model",
        "parts": [
            {"text": "Checking."},
            {
                "functionCall": {
                    "id": "c1",
                    "name": "ops.deploy_status",
                    "args": {"deploy_id": "D-42"},
                }
            },
            {"functionCall": {"id": "c2", "name": long_safe, "args": {}}},
        ],
    }
    assert results == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "c1",
                    "name": "ops.deploy_status",
                    "response": {"result": '{"state": "failed"}'},
                }
            },
            {
                "functionResponse": {
                    "id": "c2",
                    "name": long_safe,
                    "response": {"error": "Needs approval."},
                }
            },
        ],
    }
    assert response.parts == (Text(text="D-42 failed and was rolled back."),)
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=12, output_tokens=3)
    assert response.model == "gemini-2.5-flash-001"
    assert model.name == f"gemini:{MODEL}"


async def test_parallel_calls_get_stable_unique_ids_and_names_map_back() -> None:
    dotted = "math.factorial"  # BFCL-style names
    wire = Wire(
        _calls(
            {"functionCall": {"name": dotted, "args": {"n": 5}}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": dotted, "args": {"n": 6}}},
            {"functionCall": {"name": "placeholder", "args": {}}},
            {"functionCall": {"id": "api-id-9", "name": "ops.deploy_status", "args": {}}},
            {"functionCall": {"id": "api-id-9", "name": "ops.deploy_status", "args": {"x": 1}}},
            text="Computing both.",
        )
    )
    tools = (
        ToolDef(name=dotted, description="n!", input_schema={"type": "object"}),
        ROLLBACK,
        STATUS,
    )
    model = wire.model()
    request = ModelRequest(messages=(UserMessage(content="5! and 6!?"),), tools=tools)
    first = await model.request(request)
    long_safe = wire.body()["tools"][0]["functionDeclarations"][1]["name"]
    # The model answers with the provider's name of the long tool: it maps back.
    wire.answers.append(_calls({"functionCall": {"name": long_safe, "args": {}}}))
    second = await model.request(request)

    assert first.stop_reason == "tool_use"
    assert first.parts[0] == Text(text="Computing both.")
    calls = [p for p in first.parts if isinstance(p, ToolCall)]
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [
        ("math.factorial-r7-0", dotted, {"n": 5}),
        ("math.factorial-r7-1", dotted, {"n": 6}),
        ("placeholder-r7-2", "placeholder", {}),  # unknown to callgate: kept for the gate
        ("api-id-9", "ops.deploy_status", {}),  # the API's own id wins
        ("api-id-9-4", "ops.deploy_status", {"x": 1}),  # unless it repeats within the turn
    ]
    assert first.usage == Usage(input_tokens=120, output_tokens=37)  # thinking is output
    assert first.raw is not None and first.raw["response_id"] == "r7"
    assert [(c.name, c.id) for c in second.message.tool_calls] == [(LONG_NAME, f"{long_safe}-r7-0")]

    # The next request carries the calls back, the first one with its signature.
    results = ToolResults(
        results=tuple(
            ToolResult(call_id=c.id, name=c.name, content=str(i)) for i, c in enumerate(calls)
        )
    )
    wire.answers.append(_text("120 and 720."))
    await model.request(
        ModelRequest(messages=(*request.messages, first.message, results), tools=tools)
    )
    _, assistant, answers = wire.body()["contents"]
    assert assistant["parts"][1] == {
        "functionCall": {"id": "math.factorial-r7-0", "name": dotted, "args": {"n": 5}},
        "thoughtSignature": "c2ln",  # the bytes Gemini signed, sent back as they came
    }
    assert "thoughtSignature" not in assistant["parts"][2]
    assert [p["functionResponse"]["id"] for p in answers["parts"]] == [c.id for c in calls]

    # A run resumed in another process: the history comes back from the store (JSON)
    # to a new adapter, which has remembered nothing; the signature still goes back.
    stored = message_from_json(message_to_json(first.message))
    fresh = wire.model()
    wire.answers.append(_text("120 and 720."))
    await fresh.request(ModelRequest(messages=(*request.messages, stored, results), tools=tools))
    _, assistant, _ = wire.body()["contents"]
    assert assistant["parts"][1]["thoughtSignature"] == "c2ln"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("any", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        (ForcedTool(name=LONG_NAME), {"mode": "ANY", "allowedFunctionNames": ["<long>"]}),
        (
            ForcedTool(name="ops.deploy_status"),
            {"mode": "ANY", "allowedFunctionNames": ["ops.deploy_status"]},
        ),
    ],
)
async def test_tool_choice_becomes_function_calling_config(
    choice: ToolChoice, expected: dict[str, Any]
) -> None:
    wire = Wire(_text("ok"))
    await wire.model().request(
        ModelRequest(
            messages=(UserMessage(content="hi"),), tools=(STATUS, ROLLBACK), tool_choice=choice
        )
    )
    body = wire.body()
    long_safe = body["tools"][0]["functionDeclarations"][1]["name"]
    if expected.get("allowedFunctionNames") == ["<long>"]:
        expected = {**expected, "allowedFunctionNames": [long_safe]}
    assert body["toolConfig"] == {"functionCallingConfig": expected}


async def test_a_request_without_tools_sends_neither_tools_nor_tool_config() -> None:
    wire = Wire(_text("Hello."))
    await wire.model().request(ModelRequest(messages=(UserMessage(content="hi"),)))
    body = wire.body()
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]  # it went out
    assert "tools" not in body and "toolConfig" not in body and "systemInstruction" not in body


@pytest.mark.parametrize(
    ("answer", "stop", "parts"),
    [
        (_text("The answer is cut", "MAX_TOKENS"), "max_tokens", (Text(text="The answer is cut"),)),
        ({"candidates": [{"finishReason": "SAFETY", "safetyRatings": []}]}, "refusal", ()),
        (_text("Quoted text", "RECITATION"), "refusal", (Text(text="Quoted text"),)),
        (
            {"candidates": [{"finishReason": "PROHIBITED_CONTENT"}], "usageMetadata": {}},
            "refusal",
            (),
        ),
        ({"promptFeedback": {"blockReason": "SAFETY"}}, "refusal", ()),
        ({"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL"}]}, "other", ()),
    ],
)
async def test_finish_reasons(answer: dict[str, Any], stop: str, parts: tuple[Text, ...]) -> None:
    response = (
        await Wire(answer).model().request(ModelRequest(messages=(UserMessage(content="q"),)))
    )
    assert response.stop_reason == stop
    assert response.parts == parts


def _ask(max_tokens: int = 4096) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="q"),), max_tokens=max_tokens)


@pytest.mark.parametrize(
    ("answer", "retryable", "status", "says"),
    [
        (
            _error(429, "RESOURCE_EXHAUSTED", "Quota exceeded."),
            True,
            429,
            "Gemini API error 429 (RESOURCE_EXHAUSTED): Quota exceeded.",
        ),
        (
            _error(503, "UNAVAILABLE", "The model is overloaded."),
            True,
            503,
            "Gemini API error 503 (UNAVAILABLE): The model is overloaded.",
        ),
        (_error(500, "INTERNAL", "Internal error."), True, 500, "(INTERNAL): Internal error."),
        (_error(409, "ABORTED", "Conflict, try again."), True, 409, "(ABORTED): Conflict"),
        (_error(400, "INVALID_ARGUMENT", "Invalid schema."), False, 400, "Invalid schema."),
        (_error(403, "PERMISSION_DENIED", "API key not valid."), False, 403, "API key not valid."),
        (
            _error(401, "UNAUTHENTICATED", "Request had invalid credentials."),
            False,
            401,
            "Gemini API error 401 (UNAUTHENTICATED): Request had invalid credentials; "
            "check the API key (GEMINI_API_KEY or GOOGLE_API_KEY)",
        ),
        (
            httpx.ConnectError("connection refused"),
            True,
            None,
            "could not reach the Gemini API (connection error)",
        ),
        (httpx.ReadTimeout("timed out"), True, None, "Gemini API request timed out"),
    ],
)
async def test_provider_failures_become_model_errors(
    answer: httpx.Response | Exception, retryable: bool, status: int | None, says: str
) -> None:
    with pytest.raises(ModelError) as caught:
        await Wire(answer).model().request(_ask())
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert says in str(caught.value)


async def test_a_context_error_says_what_to_lower() -> None:
    too_long = _error(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1048600) exceeds the maximum number of tokens allowed (1048576).",
    )
    with pytest.raises(ModelError) as caught:
        await Wire(too_long).model().request(_ask(max_tokens=2048))
    assert "lower the output budget (2048 tokens a request; --max-output-tokens" in str(
        caught.value
    )
    assert not caught.value.retryable and not caught.value.cut_off


async def test_the_key_is_in_no_error_text_nor_its_traceback() -> None:
    # A proxy that echoes the key it was sent.
    echo = _error(400, "INVALID_ARGUMENT", f"API key {SECRET_KEY} is not valid here.")
    with pytest.raises(ModelError) as caught:
        await Wire(echo).model(api_key=SECRET_KEY).request(_ask())
    assert str(caught.value) == (
        "Gemini API error 400 (INVALID_ARGUMENT): API key [redacted] is not valid here."
    )
    assert SECRET_KEY not in "".join(traceback.format_exception(caught.value))


async def test_a_rate_limit_says_when_to_try_again() -> None:
    limited = _error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")
    limited.headers["retry-after"] = "7"
    with pytest.raises(ModelError) as caught:
        await Wire(limited).model().request(_ask())
    assert str(caught.value).endswith("Quota exceeded; try again in 7 s")
    assert caught.value.retry_after == 7.0


async def test_an_unreachable_endpoint_is_a_model_error_with_the_sdks_own_client() -> None:
    # Without a client of the test's, the SDK sends with httpx2 (installed with the
    # other providers' SDKs), whose failures are not httpx's.
    with socket.socket() as sock:  # a port nothing listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = GeminiModel(MODEL, api_key="test-key", base_url=f"http://127.0.0.1:{port}")
    with anyio.fail_after(30), pytest.raises(ModelError) as caught:
        await model.request(_ask())
    assert str(caught.value) == "could not reach the Gemini API (connection error)"
    assert caught.value.retryable is True


def test_a_missing_key_names_gemini_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match="GEMINI_API_KEY"):
        GeminiModel(MODEL)


@asynccontextmanager
async def _local_gemini(answer: dict[str, Any]) -> AsyncIterator[tuple[str, list[Any]]]:
    """A one-route Gemini API on 127.0.0.1: the socket is bound before the server
    starts, so a client may connect at once (the kernel queues it)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen: list[Any] = []

    async def generate(request: Request) -> JSONResponse:
        seen.append((request.url.path, request.headers.get("x-goog-api-key"), await request.json()))
        return JSONResponse(answer)

    app = Starlette(routes=[Route("/{version}/models/{rest:path}", generate, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}", seen
        finally:
            server.should_exit = True
    sock.close()


async def test_api_key_from_the_environment_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "env-key")
    async with _local_gemini(_text("Hi from the local server.")) as (url, seen):
        with anyio.fail_after(10):
            response = await GeminiModel(MODEL, base_url=url).request(
                ModelRequest(messages=(UserMessage(content="hi"),))
            )
    assert response.parts == (Text(text="Hi from the local server."),)
    [(path, key, body)] = seen
    assert path.endswith(f"/models/{MODEL}:generateContent") and key == "env-key"
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "google.genai", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "callgate.agent.gemini")
    with pytest.raises(ImportError, match=r"pip install 'callgate\[gemini\]'"):
        importlib.import_module("callgate.agent.gemini")
    assert "callgate.agent.gemini" not in sys.modules


async def test_every_bfcl_name_round_trips_through_the_sdk(bfcl: Bfcl) -> None:
    tools: dict[str, ToolDef] = {}
    for tool in bfcl.unique_tools:  # one declaration per name, as a request holds them
        tools.setdefault(
            tool.name,
            ToolDef(name=tool.name, description=tool.description, input_schema=tool.schema),
        )

    def call_every_tool(request: httpx.Request) -> httpx.Response:
        declared = json.loads(request.content)["tools"][0]["functionDeclarations"]
        parts = [{"functionCall": {"name": d["name"], "args": {}}} for d in declared]
        return httpx.Response(200, json=_calls(*parts))

    wire = Wire(call_every_tool)
    response = await wire.model().request(
        ModelRequest(messages=(UserMessage(content="call them all"),), tools=tuple(tools.values()))
    )

    declared = [d["name"] for d in wire.body()["tools"][0]["functionDeclarations"]]
    assert sum("." in name for name in tools) > 800  # 871 distinct dotted names
    assert len(set(declared)) == len(tools)
    assert [c.name for c in response.message.tool_calls] == list(tools)
    assert len({c.id for c in response.message.tool_calls}) == len(tools)


async def test_a_temperature_reaches_the_wire_only_when_set() -> None:
    wire = Wire(_text("Hello."))
    await wire.model().request(ModelRequest(messages=(UserMessage(content="hi"),), temperature=0.0))
    assert wire.body()["generationConfig"]["temperature"] == 0.0
    wire = Wire(_text("Hello."))
    await wire.model().request(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert "temperature" not in wire.body().get("generationConfig", {})
