"""The conformance fixture: the tools the official MCP conformance suite calls.

``fixture_toolboxes()`` (config reference ``callgate.mcp.fixture:fixture_toolboxes``)
returns one toolbox, ``conformance``, whose tools behave as the server scenarios of
``@modelcontextprotocol/conformance`` 0.2.0-alpha.12 expect. Serve it with
``scripts/conformance.sh`` pointed at the server.

Naming: the suite calls tools by bare MCP names (``test_simple_text``), while callgate
names them ``conformance.test_simple_text``. The server has to expose this toolbox's
tools unprefixed for the suite to find them. Beware that ``tools-call-simple-text`` and
``tools-call-error`` pass without it: they accept any text and any ``isError`` result,
"Unknown tool" included, so our own tests must check the exact results.

What a toolbox expresses here, per scenario (both spec versions unless noted):

- ``tools-call-simple-text``, ``tools-call-error``, ``json-schema-2020-12``,
  ``server-sse-polling`` (``test_reconnection``; the stream closing mid-call is the
  transport's job), ``http-custom-header-server-validation`` (2026-07-28; a string
  parameter annotated ``x-mcp-header``; the header check is the transport's job),
  ``server-stateless`` (2026-07-28): ``test_logging_tool``, and
  ``test_trigger_tool_change``, which adds or removes ``test_dynamic_tool`` so the
  server must send ``tools/list_changed``.
- Tasks extension fixtures (``tasks-*``, optional): ``greet``, ``slow_compute``,
  ``failing_job`` (a tool execution error), ``protocol_error_job`` (an unexpected
  exception, to become a failed task), ``confirm_delete`` and ``multi_input`` (they
  ask the user, one question or two at once: the task waits in ``input_required``
  for ``tasks/update``). ``slow_compute``, ``protocol_error_job`` and the two that
  ask carry the ``task`` tag (they run as tasks where the client declares the
  extension), ``failing_job`` the ``task:required`` tag (only as a task; see
  :mod:`callgate.mcp.tasks`), and ``test_tool_with_task`` (tasks-mrtr-composition)
  ``task:ask-first``: it asks in the foreground, then continues as a task.
- Content results (``Content``, sent as MCP content blocks): ``tools-call-image``,
  ``tools-call-audio``, ``tools-call-embedded-resource``, ``tools-call-mixed-content``.
- Asking the client through ``ToolContext.elicit`` / ``sample`` / ``list_roots`` (the
  server sends them as requests at 2025-11-25 and as ``input_required`` results at
  2026-07-28): ``tools-call-sampling``, ``tools-call-elicitation``,
  ``elicitation-sep1034-defaults``, ``elicitation-sep1330-enums`` (2025-11-25); the
  ``input-required-result-*`` scenarios (``test_input_required_result_*``, with the
  scenarios' ``inputRequests`` keys), ``test_streaming_elicitation`` and
  ``test_missing_capability`` (``-32021``) of ``server-stateless`` (2026-07-28).
- Through ``ToolContext``: ``tools-call-with-progress`` (``test_tool_with_progress``
  reports 0, 50, 100 of 100; the server sends them as ``notifications/progress``
  when the request has a progress token) and ``tools-call-with-logging``
  (2025-11-25; ``test_tool_with_logging`` logs three info messages, sent as
  ``notifications/message``; the scenario first calls ``logging/setLevel``, which
  the server has to accept).

Needs MCP features a toolbox cannot express at all, so the server must provide
them itself (a server-level fixture, or new contract features):

- resources: ``resources-list``, ``resources-read-text`` (``test://static-text``),
  ``resources-read-binary`` (``test://static-binary``), ``resources-templates-read``
  (``test://template/{id}/data``), ``resources-subscribe`` / ``-unsubscribe``
  (2025-11-25), ``sep-2164-resource-not-found`` (2026-07-28), ``caching`` (2026-07-28,
  ``ttlMs``/``cacheScope`` on list and read results);
- prompts: ``prompts-list``, ``prompts-get-simple``, ``prompts-get-with-args``,
  ``prompts-get-embedded-resource``, ``prompts-get-with-image`` and
  ``test_trigger_prompt_change`` (``server-stateless``); not yet
  ``input-required-result-non-tool-request`` (a prompt that asks the client: prompts
  get no ``ToolContext``);
- completion: ``completion-complete``; logging: ``logging-set-level`` (2025-11-25);
- protocol only, no fixture: ``server-initialize``, ``server-session-lifecycle``,
  ``ping``, ``tools-list``, ``server-sse-multiple-streams``,
  ``dns-rebinding-protection``, ``http-header-validation``.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import wave
import zlib
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from callgate.contract import (
    Audio,
    Content,
    EmbeddedResource,
    Image,
    Text,
    Toolbox,
    ToolContext,
    ToolSpec,
)
from callgate.contract.function import spec_from_function
from callgate.errors import BusinessStateError
from callgate.mcp.fixture_input import ASKS_CLIENT, TASKS_ASK_CLIENT, test_tool_with_task
from callgate.mcp.tasks import TASK_ASK_FIRST_TAG, TASK_REQUIRED_TAG, TASK_TAG

__all__ = [
    "FIXTURE_TOOLBOX",
    "FIXTURE_TOOLBOXES",
    "JSON_SCHEMA_2020_12",
    "LOG_MESSAGES",
    "PNG_1X1_RED",
    "WAV_SILENCE",
    "fixture_toolboxes",
]

FIXTURE_TOOLBOX = "conformance"
FIXTURE_TOOLBOXES = "callgate.mcp.fixture:fixture_toolboxes"
"""The fixture as a ``toolboxes`` entry of a callgate config."""

SIMPLE_TEXT = "This is a simple text response for testing."
ERROR_TEXT = "This tool intentionally returns an error for testing"
DYNAMIC_TOOL = "test_dynamic_tool"
STEP_DELAY = 0.05
"""Seconds between the steps of the progress and logging tools, as the suite asks."""


def _png_1x1_red() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)  # 10 ms
    return buffer.getvalue()


PNG_1X1_RED = _png_1x1_red()
WAV_SILENCE = _wav_silence()
LOG_MESSAGES = ("Tool execution started", "Tool processing data", "Tool execution completed")
"""The info messages of test_tool_with_logging, in order."""

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""The input schema the ``json-schema-2020-12`` scenario expects, verbatim."""


def test_simple_text() -> str:
    """Return a fixed text (conformance scenario tools-call-simple-text)."""
    return SIMPLE_TEXT


def test_error_handling() -> str:
    """Always fail with a tool execution error (scenario tools-call-error)."""
    raise BusinessStateError(ERROR_TEXT)


def test_image_content() -> Content:
    """Return a 1x1 red PNG as an image content block (scenario tools-call-image)."""
    return Content(Image(PNG_1X1_RED, "image/png"))


def test_audio_content() -> Content:
    """Return 10 ms of silence as a WAV audio content block (scenario tools-call-audio)."""
    return Content(Audio(WAV_SILENCE, "audio/wav"))


def test_embedded_resource() -> Content:
    """Return an embedded text resource (scenario tools-call-embedded-resource)."""
    return Content(
        EmbeddedResource(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
    )


def test_multiple_content_types() -> Content:
    """Return text, an image and a resource together (scenario tools-call-mixed-content)."""
    return Content(
        Text("Multiple content types test:"),
        Image(PNG_1X1_RED, "image/png"),
        EmbeddedResource(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test":"data","value":123}',
        ),
    )


async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Report progress 0, 50 and 100 of 100, 50 ms apart (scenario tools-call-with-progress)."""
    await ctx.report_progress(0, 100)
    await anyio.sleep(STEP_DELAY)
    await ctx.report_progress(50, 100)
    await anyio.sleep(STEP_DELAY)
    await ctx.report_progress(100, 100)
    return "Progress test completed: 100/100."


async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Log three info messages, 50 ms apart (scenario tools-call-with-logging)."""
    for index, message in enumerate(LOG_MESSAGES):
        if index:
            await anyio.sleep(STEP_DELAY)
        await ctx.log("info", message)
    return "Logging test completed."


async def test_logging_tool(ctx: ToolContext) -> str:
    """Log one info message, which the server may send only if the request asks for
    logs (server-stateless at 2026-07-28: no ``logLevel`` in ``_meta``, no message)."""
    await ctx.log("info", "test_logging_tool ran")
    return "Logging tool completed."


async def test_reconnection() -> str:
    """Take a moment, so the server can close the SSE stream mid-call (server-sse-polling)."""
    await anyio.sleep(0.5)
    return "Reconnection test completed."


def test_custom_header(
    region: Annotated[
        str,
        Field(json_schema_extra={"x-mcp-header": "Region"}),
    ],
    query: str,
) -> str:
    """Echo a header-mirrored argument (scenario http-custom-header-server-validation).

    Args:
        region: Region to route to; clients mirror it in the Mcp-Param-Region header.
        query: Any text.
    """
    return f"region={region} query={query}"


def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: Literal["phone", "email"] | None = None,  # the schema's name
    phone: str | None = None,
    email: str | None = None,
) -> dict[str, Any]:
    """Tool with JSON Schema 2020-12 features."""
    given = {
        "name": name,
        "address": address,
        "contactMethod": contactMethod,
        "phone": phone,
        "email": email,
    }
    return {key: value for key, value in given.items() if value is not None}


def greet(name: str) -> str:
    """Greet someone (tasks scenarios: a tool that never runs as a task).

    Args:
        name: Who to greet.
    """
    return f"Hello, {name}!"


async def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=110)],
    label: str = "",
) -> str:
    """Sleep, then answer (tasks scenarios: a long-running tool).

    Args:
        seconds: How long to work.
        label: Echoed in the result.
    """
    await anyio.sleep(seconds)
    return f"Computed {label!r} in {seconds:g}s."


def failing_job() -> str:
    """Always fail with a tool execution error (tasks scenarios)."""
    raise BusinessStateError("failing_job always fails: this is a test fixture.")


def protocol_error_job() -> str:
    """Always crash unexpectedly (tasks scenarios: a protocol-level failure)."""
    raise RuntimeError("protocol_error_job crashed on purpose")


def test_dynamic_tool() -> str:
    """A tool that test_trigger_tool_change adds and removes."""
    return "The dynamic tool is here."


class _ToolChanger:
    """``test_trigger_tool_change``, bound to the toolbox it changes.

    Async so the change happens on the event loop, not in a worker thread.
    """

    def __init__(self, box: Toolbox) -> None:
        self._box = box

    async def test_trigger_tool_change(self) -> str:
        """Add test_dynamic_tool, or remove it if present (the tool list changes)."""
        if self._box.get(DYNAMIC_TOOL) is None:
            self._box.add(test_dynamic_tool, read_only=True)
            return f"Added {DYNAMIC_TOOL}."
        self._box.remove(DYNAMIC_TOOL)
        return f"Removed {DYNAMIC_TOOL}."


_READ_ONLY = (
    test_simple_text,
    test_error_handling,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_tool_with_progress,
    test_tool_with_logging,
    test_logging_tool,
    test_reconnection,
    test_custom_header,
    greet,
)


def _json_schema_tool(box: Toolbox) -> ToolSpec:
    """The spec of ``json_schema_2020_12_tool`` with the scenario's schema verbatim.

    A function's schema is generated from its type hints; this one needs keywords
    (``if``/``then``/``else``, ``$anchor``) that hints do not produce. The function
    accepts every property, and the gate validates calls against this schema.
    """
    spec = spec_from_function(
        json_schema_2020_12_tool,
        toolbox=box.name,
        trusted_source=box.trusted,
        read_only=True,
        idempotent=True,
    )
    # An empty hash is recomputed, so it covers the replaced schema.
    return dataclasses.replace(spec, input_schema=JSON_SCHEMA_2020_12, contract_hash="")


def fixture_toolboxes() -> list[Toolbox]:
    """The conformance fixture toolboxes, new on every call (one changes its own tools).

    Returns:
        ``conformance`` (the tools) and ``conformance_context`` (resources, prompts).
    """
    box = Toolbox(
        FIXTURE_TOOLBOX,
        description="Fixture tools the official MCP conformance suite calls; for tests only.",
    )
    for fn in _READ_ONLY:
        box.add(fn, read_only=True, idempotent=True)
    for asks in ASKS_CLIENT:
        box.add(asks, read_only=True)
    # Tagged to run as tasks where the client declares the Tasks extension.
    tasks = [TASK_TAG]
    box.add(slow_compute, read_only=True, idempotent=True, timeout=120.0, tags=tasks)
    box.add(failing_job, read_only=True, idempotent=True, tags=[TASK_REQUIRED_TAG])
    box.add(protocol_error_job, read_only=True, idempotent=True, tags=tasks)
    for asks in TASKS_ASK_CLIENT:  # they ask before they change anything
        box.add(asks, destructive=True, idempotent=True, tags=tasks)
    # Asks in the foreground, then becomes a task; never synchronous at 2026-07-28.
    box.add(test_tool_with_task, read_only=True, tags=[TASK_ASK_FIRST_TAG, TASK_REQUIRED_TAG])
    box.add(_ToolChanger(box).test_trigger_tool_change, read_only=False, destructive=False)
    box.add_spec(_json_schema_tool(box))
    # Imported here: the context fixture imports this module's sample media.
    from callgate.mcp.fixture_context import context_toolboxes

    return [box, *context_toolboxes()]
