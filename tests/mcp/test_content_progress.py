"""Content blocks, progress and log messages through the MCP server, with the SDK client.

Both protocol generations, in memory: the fixture tools the conformance suite calls
(served unprefixed, as the suite needs), plus a few tools of our own for the edges.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from callgate import Gate, Limits, Principal, Toolbox
from callgate.contract import Audio, Content, EmbeddedResource, Image, Text, ToolContext
from callgate.mcp import build_server
from callgate.store import MemoryStore
from tests.conformance.fixture import (
    FIXTURE_TOOLBOX,
    LOG_MESSAGES,
    PNG_1X1_RED,
    WAV_SILENCE,
    fixture_toolboxes,
)

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
CALLER = Principal("mcp-client", tenant="acme")
PDF = b"%PDF-1.4 not really\x00\xff"


def media_toolbox() -> Toolbox:
    media = Toolbox("media")

    @media.tool(read_only=True)
    def report() -> Content:
        """A chart with its caption and the source PDF."""
        return Content(
            "Sales by month:",
            Image(PNG_1X1_RED, "image/png"),
            Audio(WAV_SILENCE, "audio/wav"),
            EmbeddedResource(uri="file:///report.pdf", mime_type="application/pdf", blob=PDF),
        )

    @media.tool(read_only=True)
    def many_images(n: int) -> Content:
        """Many small images: more than the result budget holds.

        Args:
            n: How many.
        """
        return Content(*(Image(bytes([i % 256]) * 300, "image/png") for i in range(n)))

    @media.tool(read_only=True)
    def looks_like_content() -> dict[str, Any]:
        """Structured data that happens to have the content shape."""
        return {"content": [{"type": "text", "text": "data, not content"}]}

    @media.tool(read_only=True)
    def sync_steps(ctx: ToolContext) -> str:
        """A sync tool reporting progress and logging from its worker thread."""
        ctx.report_progress_sync(1, 2, "half")
        ctx.log_sync("warning", "careful", {"step": 1})
        ctx.report_progress_sync(2, 2)
        return "done"

    @media.tool(read_only=True)
    async def noisy(ctx: ToolContext) -> str:
        """Logs at several levels and reports progress that goes backwards once."""
        await ctx.log("debug", "details")
        await ctx.log("error", "trouble")
        await ctx.report_progress(10)
        await ctx.report_progress(5)  # not an increase: dropped
        await ctx.report_progress(20)
        return "ok"

    return media


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with Gate(
        [*fixture_toolboxes(), media_toolbox()],
        store=MemoryStore(),
        limits=Limits(max_result_tokens=500),
    ) as gate:
        yield gate


class Received:
    """What the client's callbacks got."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


@pytest.fixture
def received() -> Received:
    return Received()


@pytest.fixture(params=MODES)
async def client(
    request: pytest.FixtureRequest, gate: Gate, received: Received
) -> AsyncIterator[Client]:
    server = build_server(gate, principal=CALLER, unprefixed=[FIXTURE_TOOLBOX])
    # At 2026-07-28 a request opts in to log messages with a level in _meta.
    log_level: types.LoggingLevel | None = None if request.param == "legacy" else "debug"
    async with Client(
        server, mode=request.param, logging_callback=received.on_log, log_level=log_level
    ) as client:
        yield client


async def call(client: Client, tool: str, received: Received | None = None) -> types.CallToolResult:
    with anyio.fail_after(5):
        return await client.call_tool(
            tool, {}, progress_callback=received.on_progress if received else None
        )


async def test_image_arrives_as_an_image_block(client: Client, gate: Gate) -> None:
    result = await call(client, "test_image_content")
    assert not result.is_error and result.structured_content is None
    [block] = result.content
    assert isinstance(block, types.ImageContent)
    assert block.mime_type == "image/png"
    assert base64.b64decode(block.data) == PNG_1X1_RED
    # The call is still governed and recorded, under its full name.
    [record] = await gate.audit()
    assert record.tool == f"{FIXTURE_TOOLBOX}.test_image_content"


async def test_audio_arrives_as_an_audio_block(client: Client) -> None:
    result = await call(client, "test_audio_content")
    [block] = result.content
    assert isinstance(block, types.AudioContent)
    assert (block.mime_type, base64.b64decode(block.data)) == ("audio/wav", WAV_SILENCE)


async def test_embedded_resource_arrives_as_a_resource_block(client: Client) -> None:
    result = await call(client, "test_embedded_resource")
    [block] = result.content
    assert isinstance(block, types.EmbeddedResource)
    assert isinstance(block.resource, types.TextResourceContents)
    assert str(block.resource.uri) == "test://embedded-resource"
    assert block.resource.mime_type == "text/plain"
    assert block.resource.text == "This is an embedded resource content."


async def test_mixed_content_keeps_its_order(client: Client) -> None:
    result = await call(client, "test_multiple_content_types")
    text, image, resource = result.content
    assert isinstance(text, types.TextContent) and text.text == "Multiple content types test:"
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.TextResourceContents)
    assert json.loads(resource.resource.text) == {"test": "data", "value": 123}


async def test_every_block_kind_and_a_binary_resource(client: Client, gate: Gate) -> None:
    result = await call(client, "media__report")
    kinds = [type(block) for block in result.content]
    assert kinds == [
        types.TextContent,
        types.ImageContent,
        types.AudioContent,
        types.EmbeddedResource,
    ]
    resource = result.content[3]
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.BlobResourceContents)
    assert base64.b64decode(resource.resource.blob) == PDF
    # The Envelope's payload is JSON, and reads back as the same Content.
    [record] = await gate.audit()
    assert record.status == "ok"


async def test_too_many_blocks_are_truncated_with_the_notice(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.call_tool("media__many_images", {"n": 40})
    assert not result.is_error
    *images, notice = result.content
    assert images and all(isinstance(block, types.ImageContent) for block in images)
    assert len(images) < 40
    assert isinstance(notice, types.TextContent) and "truncated" in notice.text
    assert "call callgate__read_more with cursor" in notice.text


async def test_structured_data_of_the_content_shape_stays_structured(client: Client) -> None:
    result = await call(client, "media__looks_like_content")
    assert result.structured_content == {"content": [{"type": "text", "text": "data, not content"}]}
    [block] = result.content
    assert isinstance(block, types.TextContent)
    assert json.loads(block.text) == result.structured_content


async def test_progress_notifications_arrive(client: Client, received: Received) -> None:
    result = await call(client, "test_tool_with_progress", received)
    assert not result.is_error
    assert [(p, t) for p, t, _ in received.progress] == [(0, 100), (50, 100), (100, 100)]


async def test_no_progress_without_a_progress_callback(client: Client, received: Received) -> None:
    result = await call(client, "test_tool_with_progress")
    assert not result.is_error
    assert received.progress == []


async def test_log_messages_arrive(client: Client, received: Received, gate: Gate) -> None:
    result = await call(client, "test_tool_with_logging")
    assert not result.is_error
    assert [(log.level, log.data) for log in received.logs] == [
        ("info", message) for message in LOG_MESSAGES
    ]
    assert {log.logger for log in received.logs} == {"test_tool_with_logging"}
    [record] = await gate.audit()
    assert record.tool == f"{FIXTURE_TOOLBOX}.test_tool_with_logging"


async def test_sync_tools_report_from_their_thread(client: Client, received: Received) -> None:
    result = await call(client, "media__sync_steps", received)
    assert not result.is_error
    assert received.progress == [(1, 2, "half"), (2, 2, None)]
    [log] = received.logs
    assert (log.level, log.data) == ("warning", {"message": "careful", "data": {"step": 1}})


async def test_progress_only_increases(client: Client, received: Received) -> None:
    await call(client, "media__noisy", received)
    assert [p for p, _, _ in received.progress] == [10, 20]


@pytest.mark.parametrize(("log_level", "expected"), [(None, []), ("error", ["error"])])
async def test_stateless_requests_get_only_the_logs_they_opt_in_to(
    gate: Gate, received: Received, log_level: types.LoggingLevel | None, expected: list[str]
) -> None:
    server = build_server(gate, principal=CALLER)
    async with Client(
        server, mode="2026-07-28", logging_callback=received.on_log, log_level=log_level
    ) as client:
        result = await call(client, "media__noisy")
    assert not result.is_error
    assert [log.level for log in received.logs] == expected


async def test_content_round_trips_through_its_json_form() -> None:
    content = Content(
        Text("a"),
        Image(b"\x00\x01", "image/png"),
        Audio(b"\x02", "audio/wav"),
        EmbeddedResource(uri="x://1", text="t"),
        EmbeddedResource(uri="x://2", mime_type="application/octet-stream", blob=b"\xff"),
    )
    payload = content.to_payload()
    assert json.loads(json.dumps(payload)) == payload
    assert Content.from_payload(payload) == content
    assert Content.from_payload({"content": [{"type": "video"}]}) is None
    assert Content.from_payload({"content": [], "more": 1}) is None
    with pytest.raises(ValueError, match="exactly one of text or blob"):
        EmbeddedResource(uri="x://3")


async def test_legacy_set_level_filters_tool_logs(gate: Gate, received: Received) -> None:
    server = build_server(gate, principal=CALLER)
    async with Client(server, mode="legacy", logging_callback=received.on_log) as client:
        with anyio.fail_after(5), pytest.warns(MCPDeprecationWarning):
            await client.set_logging_level("error")
        result = await call(client, "media__noisy")
    assert not result.is_error
    assert [(log.level, log.data) for log in received.logs] == [("error", "trouble")]
