"""The conformance fixture toolbox through a real Gate: each tool gives what its scenario expects."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import struct
import subprocess
import sys
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import ErrorKind, Gate, Policy, Principal, Rule, Status, Toolbox
from callgate.config import GateConfig
from callgate.contract import Content, Image, LogLevel
from callgate.contract.context import ClientCannot, Elicitation, Root
from callgate.runtime.envelope import Envelope
from callgate.store import MemoryStore
from tests.conformance.fixture import (
    FIXTURE_TOOLBOX,
    FIXTURE_TOOLBOXES,
    JSON_SCHEMA_2020_12,
    LOG_MESSAGES,
    SEP1034_DEFAULTS,
    SEP1330_ENUMS,
    fixture_toolboxes,
)

pytestmark = pytest.mark.anyio

CALLER = Principal("conformance-suite")

SCENARIO_TOOLS = {
    "tools-call-simple-text": "test_simple_text",
    "tools-call-error": "test_error_handling",
    "tools-call-image": "test_image_content",
    "tools-call-audio": "test_audio_content",
    "tools-call-embedded-resource": "test_embedded_resource",
    "tools-call-mixed-content": "test_multiple_content_types",
    "tools-call-with-progress": "test_tool_with_progress",
    "tools-call-with-logging": "test_tool_with_logging",
    "json-schema-2020-12": "json_schema_2020_12_tool",
    "server-sse-polling": "test_reconnection",
    "http-custom-header-server-validation": "test_custom_header",
    "server-stateless (no log without logLevel)": "test_logging_tool",
    "server-stateless (list changed)": "test_trigger_tool_change",
    "tasks-* (sync tool)": "greet",
    "tasks-* (long tool)": "slow_compute",
    "tasks-* (tool error)": "failing_job",
    "tasks-* (protocol error)": "protocol_error_job",
    "tasks-* (elicitation)": "confirm_delete",
    "tasks-mrtr-partial-fulfillment": "multi_input",
    "tasks-mrtr-composition": "test_tool_with_task",
    "tools-call-sampling": "test_sampling",
    "tools-call-elicitation": "test_elicitation",
    "elicitation-sep1034-defaults": "test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "test_elicitation_sep1330_enums",
    "input-required-result-basic-elicitation": "test_input_required_result_elicitation",
    "input-required-result-basic-sampling": "test_input_required_result_sampling",
    "input-required-result-basic-list-roots": "test_input_required_result_list_roots",
    "input-required-result-multi-round": "test_input_required_result_multi_round",
    "input-required-result-request-state": "test_input_required_result_request_state",
    "input-required-result-tampered-state": "test_input_required_result_tampered_state",
    "input-required-result-capability-check": "test_input_required_result_capabilities",
    "input-required-result-multiple-input-requests": "test_input_required_result_multiple_inputs",
    "server-stateless (-32021)": "test_missing_capability",
    "server-stateless (no requests on the stream)": "test_streaming_elicitation",
}
"""Scenario -> the bare MCP tool name it calls."""


@pytest.fixture
def box() -> Toolbox:
    return fixture_toolboxes()[0]


@pytest.fixture
async def gate(box: Toolbox) -> AsyncIterator[Gate]:
    async with Gate([box], store=MemoryStore()) as gate:
        yield gate


async def call(gate: Gate, tool: str, arguments: dict[str, Any] | None = None) -> Envelope:
    return await gate.call(f"{FIXTURE_TOOLBOX}.{tool}", arguments or {}, principal=CALLER)


def test_every_tool_the_scenarios_call_is_in_the_toolbox(box: Toolbox) -> None:
    local = {spec.local_name for spec in box}
    assert set(SCENARIO_TOOLS.values()) <= local
    assert all(spec.description for spec in box), "tools-list requires a description"


def test_the_config_reference_loads_the_fixture() -> None:
    boxes = GateConfig(toolboxes=(FIXTURE_TOOLBOXES,)).load_toolboxes()
    assert [b.name for b in boxes] == [FIXTURE_TOOLBOX, "conformance_context"]
    assert boxes[0].get("test_simple_text") is not None


@pytest.mark.slow
def test_the_fixture_loads_by_path_alone(tmp_path: Path) -> None:
    """As ``callgate serve`` loads it for the suite: its modules import each other, and
    that works without ``tests`` (or the checkout) importable."""
    script = (
        "import sys\n"
        "from callgate.config import GateConfig\n"
        f"boxes = GateConfig(toolboxes=({FIXTURE_TOOLBOXES!r},)).load_toolboxes()\n"
        "print(*[b.name for b in boxes], len(boxes[0]), 'tests' in sys.modules)\n"
    )
    # -I keeps the cwd and $PYTHONPATH off sys.path; the installed callgate stays on it.
    run = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    expected = [FIXTURE_TOOLBOX, "conformance_context", str(len(fixture_toolboxes()[0])), "False"]
    assert run.stdout.split() == expected


async def test_simple_text(gate: Gate) -> None:
    env = await call(gate, "test_simple_text")
    assert env.status is Status.OK
    assert env.payload == "This is a simple text response for testing."


async def test_error_handling_is_a_tool_execution_error_with_the_message(gate: Gate) -> None:
    env = await call(gate, "test_error_handling")
    assert env.status is Status.ERROR and env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert env.error.message_for_model == "This tool intentionally returns an error for testing"


def _blocks(env: Envelope) -> list[dict[str, Any]]:
    """The content blocks of a Content payload (its JSON form in the Envelope)."""
    assert env.status is Status.OK
    assert set(env.payload) == {"content"}
    blocks: list[dict[str, Any]] = env.payload["content"]
    return blocks


def assert_content_tool(box: Toolbox, tool: str) -> None:
    """A content tool advertises no output schema: it sends no structuredContent."""
    spec = box.get(tool)
    assert spec is not None and spec.output_schema is None


async def test_image_content_is_a_real_one_pixel_png(gate: Gate, box: Toolbox) -> None:
    env = await call(gate, "test_image_content")
    [block] = _blocks(env)
    assert (block["type"], block["mimeType"]) == ("image", "image/png")
    png = base64.b64decode(block["data"], validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (1, 1)
    assert_content_tool(box, "test_image_content")
    assert Content.from_payload(env.payload) == Content(Image(png, "image/png"))


async def test_audio_content_is_a_real_wav(gate: Gate, box: Toolbox) -> None:
    env = await call(gate, "test_audio_content")
    [block] = _blocks(env)
    assert (block["type"], block["mimeType"]) == ("audio", "audio/wav")
    with wave.open(io.BytesIO(base64.b64decode(block["data"], validate=True))) as audio:
        assert audio.getnframes() > 0
    assert_content_tool(box, "test_audio_content")


async def test_embedded_resource(gate: Gate, box: Toolbox) -> None:
    env = await call(gate, "test_embedded_resource")
    assert _blocks(env) == [
        {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }
    ]
    assert_content_tool(box, "test_embedded_resource")


async def test_multiple_content_types(gate: Gate, box: Toolbox) -> None:
    env = await call(gate, "test_multiple_content_types")
    blocks = _blocks(env)
    assert [block["type"] for block in blocks] == ["text", "image", "resource"]
    assert blocks[0]["text"] == "Multiple content types test:"
    resource = blocks[2]["resource"]
    assert resource["uri"] == "test://mixed-content-resource"
    assert resource["mimeType"] == "application/json"
    assert json.loads(resource["text"]) == {"test": "data", "value": 123}
    assert_content_tool(box, "test_multiple_content_types")


class RecordingSink:
    """A ToolSink that keeps what a tool sent, with the time it arrived."""

    def __init__(self) -> None:
        self.progress_reports: list[tuple[float, float | None]] = []
        self.logs: list[tuple[str, str]] = []
        self.times: list[float] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress_reports.append((progress, total))
        self.times.append(anyio.current_time())

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        self.logs.append((level, message))
        self.times.append(anyio.current_time())


@pytest.mark.parametrize("tool", ["test_tool_with_progress", "test_tool_with_logging"])
async def test_stepped_tools_send_three_messages_50_ms_apart(gate: Gate, tool: str) -> None:
    sink = RecordingSink()
    env = await gate.call(f"{FIXTURE_TOOLBOX}.{tool}", {}, principal=CALLER, sink=sink)
    assert env.status is Status.OK and isinstance(env.payload, str) and env.payload
    if tool == "test_tool_with_progress":
        assert sink.progress_reports == [(0, 100), (50, 100), (100, 100)]
    else:
        assert sink.logs == [("info", message) for message in LOG_MESSAGES]
        assert LOG_MESSAGES == (
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        )
    gaps = [later - earlier for earlier, later in zip(sink.times, sink.times[1:], strict=False)]
    assert len(gaps) == 2 and all(gap >= 0.045 for gap in gaps)


@pytest.mark.parametrize("tool", ["test_tool_with_progress", "test_tool_with_logging"])
async def test_stepped_tools_run_without_a_sink(gate: Gate, tool: str) -> None:
    env = await call(gate, tool)
    assert env.status is Status.OK and env.timing is not None and env.timing.duration_ms >= 100


async def test_logging_tool_and_reconnection_answer_text(gate: Gate) -> None:
    for tool in ("test_logging_tool", "test_reconnection"):
        env = await call(gate, tool)
        assert env.status is Status.OK and isinstance(env.payload, str) and env.payload


def test_json_schema_tool_advertises_the_2020_12_schema_verbatim(box: Toolbox) -> None:
    spec = box.get("json_schema_2020_12_tool")
    assert spec is not None
    schema = spec.input_schema
    assert schema == JSON_SCHEMA_2020_12
    # The keywords the scenario checks, spelled out (SEP-1613, SEP-2106).
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$defs"]["address"]["$anchor"] == "addressDef"
    assert schema["additionalProperties"] is False
    assert {"allOf", "if", "then", "else"} <= set(schema)
    # The contract hash covers the advertised schema, not the generated one.
    assert spec.contract_hash == dataclasses.replace(spec, contract_hash="").contract_hash


async def test_json_schema_tool_is_validated_against_that_schema(gate: Gate) -> None:
    ok = await call(
        gate,
        "json_schema_2020_12_tool",
        {
            "name": "Ada",
            "address": {"street": "1 Main St", "city": "Springfield"},
            "contactMethod": "phone",
            "phone": "555-0100",
        },
    )
    assert ok.status is Status.OK
    assert ok.payload["contactMethod"] == "phone" and ok.payload["address"]["city"] == "Springfield"

    for wrong in (
        {"contactMethod": "phone", "email": "a@example.com"},  # if/then: phone required
        {"name": "no contact"},  # anyOf: phone or email
        {"email": "a@example.com", "fax": "1"},  # additionalProperties: false
    ):
        env = await call(gate, "json_schema_2020_12_tool", wrong)
        assert env.status is Status.ERROR and env.error is not None, wrong
        assert env.error.kind is ErrorKind.CONSTRUCTION


async def test_custom_header_parameter_is_annotated_for_mcp_param_headers(
    gate: Gate, box: Toolbox
) -> None:
    spec = box.get("test_custom_header")
    assert spec is not None
    region = spec.input_schema["properties"]["region"]
    assert (region["type"], region["x-mcp-header"]) == ("string", "Region")
    env = await call(gate, "test_custom_header", {"region": "us-west1", "query": "SELECT 1"})
    assert env.payload == "region=us-west1 query=SELECT 1"


async def test_trigger_tool_change_adds_then_removes_a_tool(gate: Gate, box: Toolbox) -> None:
    changes: list[str] = []
    box.on_change(lambda changed: changes.append(changed.name))
    dynamic = f"{FIXTURE_TOOLBOX}.test_dynamic_tool"

    await call(gate, "test_trigger_tool_change")
    assert dynamic in {spec.name for spec in gate.registry.specs()}
    assert (await call(gate, "test_dynamic_tool")).status is Status.OK

    await call(gate, "test_trigger_tool_change")
    assert dynamic not in {spec.name for spec in gate.registry.specs()}
    assert changes == [FIXTURE_TOOLBOX, FIXTURE_TOOLBOX]  # what list_changed hangs on


def test_each_call_builds_independent_toolboxes() -> None:
    first, second = fixture_toolboxes()[0], fixture_toolboxes()[0]
    assert first is not second
    assert [s.name for s in first] == [s.name for s in second]


async def test_greet(gate: Gate) -> None:
    assert (await call(gate, "greet", {"name": "World"})).payload == "Hello, World!"


async def test_slow_compute_answers_and_allows_a_minute(gate: Gate, box: Toolbox) -> None:
    env = await call(gate, "slow_compute", {"seconds": 0, "label": "instant"})
    assert env.status is Status.OK and "instant" in env.payload
    spec = box.get("slow_compute")
    assert spec is not None and spec.timeout is not None and spec.timeout > 60
    too_long = await call(gate, "slow_compute", {"seconds": 1000})
    assert too_long.error is not None and too_long.error.kind is ErrorKind.CONSTRUCTION


async def test_failing_job_is_a_tool_error_and_protocol_error_job_a_crash(gate: Gate) -> None:
    failing = await call(gate, "failing_job")
    assert failing.error is not None and failing.error.kind is ErrorKind.BUSINESS_STATE
    crash = await call(gate, "protocol_error_job")
    assert crash.error is not None and crash.error.kind is ErrorKind.UNRECOVERABLE
    assert "on purpose" not in crash.error.message_for_model  # internal text never leaks


async def test_confirm_delete_goes_through_approval_when_policy_asks(box: Toolbox) -> None:
    spec = box.get("confirm_delete")
    assert spec is not None and spec.effective_annotations.destructive
    policy = Policy([Rule("require_approval", tools=[f"{FIXTURE_TOOLBOX}.confirm_delete"])])
    async with Gate([box], store=MemoryStore(), policy=policy) as gate:
        env = await call(gate, "confirm_delete", {"filename": "rt.txt"})
    assert env.status is Status.PENDING_APPROVAL


async def test_logging_tool_logs_so_the_server_must_hold_it_back(gate: Gate) -> None:
    sink = RecordingSink()
    env = await gate.call(f"{FIXTURE_TOOLBOX}.test_logging_tool", {}, principal=CALLER, sink=sink)
    assert env.status is Status.OK
    assert sink.logs == [("info", "test_logging_tool ran")]


class AskingSink(RecordingSink):
    """A sink that can ask the client: answers every question, records the questions."""

    def __init__(self, *, elicitation: bool = True) -> None:
        super().__init__()
        self.elicitation = elicitation
        self.questions: list[tuple[str, Any]] = []

    async def elicit(self, message: str, schema: Any, key: str | None) -> Elicitation:
        if not self.elicitation:
            raise ClientCannot("elicitation", "ask the user questions (elicitation)")
        self.questions.append(("elicit", (message, dict(schema), key)))
        return Elicitation("accept", {"name": "Ada", "username": "ada", "email": "a@x"})

    async def sample(
        self,
        messages: Any,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        self.questions.append(("sample", (list(messages), max_tokens, key)))
        return "Paris"

    async def list_roots(self, key: str | None) -> list[Root]:
        self.questions.append(("roots", key))
        return [Root("file:///test/root", "Test Root")]


async def ask(
    gate: Gate, tool: str, sink: AskingSink, arguments: dict[str, Any] | None = None
) -> Envelope:
    return await gate.call(
        f"{FIXTURE_TOOLBOX}.{tool}", arguments or {}, principal=CALLER, sink=sink
    )


async def test_sampling_sends_the_prompt_with_100_tokens(gate: Gate) -> None:
    sink = AskingSink()
    env = await ask(gate, "test_sampling", sink, {"prompt": "Test prompt"})
    assert env.payload == "LLM response: Paris"
    user = {"role": "user", "content": {"type": "text", "text": "Test prompt"}}
    assert sink.questions == [("sample", ([user], 100, None))]


async def test_elicitation_asks_for_username_and_email(gate: Gate) -> None:
    sink = AskingSink()
    env = await ask(gate, "test_elicitation", sink, {"message": "Who?"})
    assert isinstance(env.payload, str) and env.payload.startswith("User response: action=accept")
    ((kind, (message, schema, _key)),) = sink.questions
    assert (kind, message, schema["required"]) == ("elicit", "Who?", ["username", "email"])


async def test_the_sep_forms_are_sent_verbatim(gate: Gate) -> None:
    sink = AskingSink()
    await ask(gate, "test_elicitation_sep1034_defaults", sink)
    await ask(gate, "test_elicitation_sep1330_enums", sink)
    assert [q[1][1] for q in sink.questions] == [SEP1034_DEFAULTS, SEP1330_ENUMS]
    defaults = SEP1034_DEFAULTS["properties"]
    assert [defaults[k]["default"] for k in ("name", "age", "score", "status", "verified")] == [
        "John Doe",
        30,
        95.5,
        "active",
        True,
    ]


async def test_input_required_tools_use_the_scenarios_keys(gate: Gate) -> None:
    sink = AskingSink()
    await ask(gate, "test_input_required_result_multiple_inputs", sink)
    assert [(kind, q if kind == "roots" else q[-1]) for kind, q in sink.questions] == [
        ("elicit", "user_name"),
        ("sample", "greeting"),
        ("roots", "client_roots"),
    ]
    env = await ask(gate, "test_input_required_result_request_state", sink)
    assert isinstance(env.payload, str) and "state-ok" in env.payload


async def test_the_capability_tool_does_without_elicitation(gate: Gate) -> None:
    env = await ask(gate, "test_input_required_result_capabilities", AskingSink(elicitation=False))
    assert env.payload == "no elicitation; Paris"


async def test_asking_without_a_client_is_a_construction_error(gate: Gate) -> None:
    env = await call(gate, "test_missing_capability")
    assert env.status is not Status.OK and env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert env.error.message_for_model == "this client cannot sample its model (sampling)"
