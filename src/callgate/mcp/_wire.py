"""The one place where callgate's tool contract and Envelopes become MCP wire types."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import allowed_log_levels

from callgate.contract import LOG_LEVELS, Audio, Block, Content, Image, LogLevel, Text, ToolSpec
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.shaping import dumps

RESULT_KEY = "result"
"""The property a non-object result is wrapped in (MCP structured content is an object)."""


def is_object_schema(schema: Mapping[str, Any] | None) -> bool:
    """Whether ``schema`` describes a JSON object at its root (MCP's 2025-11-25 rule)."""
    return schema is not None and schema.get("type") == "object"


def output_schema(spec: ToolSpec) -> dict[str, Any] | None:
    """The tool's output schema as MCP requires it: an object, wrapping anything else."""
    schema = spec.output_schema
    if schema is None:
        return None
    if is_object_schema(schema):
        return dict(schema)
    # Definitions stay at the root so the wrapped schema's "$ref"s still resolve.
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "$schema")}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {RESULT_KEY: inner},
        "required": [RESULT_KEY],
    }
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]
    return wrapped


def tool(
    spec: ToolSpec,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
) -> types.Tool:
    """The MCP ``Tool`` for ``spec``: model-facing schemas only, trusted fields absent.

    ``name``, ``description`` and ``input_schema`` replace the spec's own (the
    server's names for the tool and for the tools its texts mention).
    """
    annotations = spec.annotations.to_mcp()
    return types.Tool(
        name=name or spec.name,
        title=spec.title,
        description=description if description is not None else spec.description,
        input_schema=dict(input_schema if input_schema is not None else spec.input_schema),
        output_schema=output_schema(spec),
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


def _text(value: Any) -> types.TextContent:
    return types.TextContent(text=value if isinstance(value, str) else dumps(value))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def content_block(block: Block) -> types.ContentBlock:
    """The MCP content block for one block of a :class:`Content` result."""
    if isinstance(block, Text):
        return types.TextContent(text=block.text)
    if isinstance(block, Image):
        return types.ImageContent(data=_b64(block.data), mime_type=block.mime_type)
    if isinstance(block, Audio):
        return types.AudioContent(data=_b64(block.data), mime_type=block.mime_type)
    resource: types.TextResourceContents | types.BlobResourceContents
    if block.blob is not None:
        resource = types.BlobResourceContents(
            uri=block.uri, mime_type=block.mime_type, blob=_b64(block.blob)
        )
    else:
        resource = types.TextResourceContents(
            uri=block.uri, mime_type=block.mime_type, text=block.text or ""
        )
    return types.EmbeddedResource(resource=resource)


def _as_content(envelope: Envelope, spec: ToolSpec | None) -> Content | None:
    # A tool with an output schema promised structured data: never reinterpret it.
    if spec is not None and spec.output_schema is not None:
        return None
    return Content.from_payload(envelope.payload)


def call_result(envelope: Envelope, spec: ToolSpec | None) -> types.CallToolResult:
    """The ``tools/call`` result for an Envelope.

    ``ok`` becomes the JSON payload as text plus ``structuredContent`` (wrapped
    under ``result`` when the tool's output schema is not an object), or, for a
    :class:`Content` payload of a tool without an output schema, its blocks as
    MCP content blocks (image, audio, embedded resource, text); every other
    status is a tool execution error (``isError``) carrying the model-facing
    message and next step, so the model can correct itself. A truncated result
    carries its notice as a last text block.
    """
    meta = {"callgate/callId": envelope.call_id, "callgate/status": envelope.status.value}
    if envelope.status is Status.OK:
        blocks = _as_content(envelope, spec)
        if blocks is not None:
            content_blocks = [content_block(block) for block in blocks]
            if envelope.truncated is not None:
                content_blocks.append(_text(envelope.truncated.notice))
            return types.CallToolResult(content=content_blocks, _meta=meta)
        payload = envelope.payload
        text = payload if isinstance(payload, str) else envelope.payload_json()
        content: list[types.ContentBlock] = [types.TextContent(text=text)]
        structured: Any = None
        if spec is not None and spec.output_schema is not None:
            structured = payload if is_object_schema(spec.output_schema) else {RESULT_KEY: payload}
        elif isinstance(payload, dict):
            structured = payload
        if envelope.truncated is not None:
            content.append(_text(envelope.truncated.notice))
        return types.CallToolResult(content=content, structured_content=structured, _meta=meta)
    lines: list[str] = []
    if envelope.error is not None:
        lines.append(envelope.error.message_for_model)
        if envelope.error.next_step:
            lines.append(f"Next step: {envelope.error.next_step}")
    else:
        lines.append(f"The call ended with status {envelope.status.value}.")
    if envelope.status is Status.PENDING_APPROVAL and isinstance(envelope.payload, dict):
        approval_id = envelope.payload.get("approval_id")
        if approval_id:
            meta["callgate/approvalId"] = approval_id
            lines.append(f"approval_id: {approval_id}")
    return types.CallToolResult(content=[_text("\n".join(lines))], is_error=True, _meta=meta)


class RequestSink:
    """A running tool's progress and log messages, as notifications for one request.

    Progress goes out as ``notifications/progress`` only if the request carried a
    progress token (the SDK checks), and only while it increases, as the spec
    requires. Log messages go out as ``notifications/message`` on the request's
    own stream: at 2026-07-28 only if the request opted in with a log level in
    ``_meta`` (the SDK's rule), at 2025-11-25 from ``min_level`` up (the level
    the client set with ``logging/setLevel``; every level when it set none).
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        logger: str,
        min_level: LogLevel | None = None,
    ) -> None:
        self._ctx = ctx
        self._logger = logger
        allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
        if min_level is not None:
            allowed = allowed & frozenset(LOG_LEVELS[LOG_LEVELS.index(min_level) :])
        self._levels = allowed
        self._last_progress: float | None = None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._last_progress is not None and progress <= self._last_progress:
            return
        self._last_progress = progress
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        if level not in self._levels:
            return
        params = types.LoggingMessageNotificationParams(
            level=level,
            logger=self._logger,
            data=message if data is None else {"message": message, "data": data},
        )
        # Request-scoped: the spec allows log messages only on the stream of the
        # request they belong to (2026-07-28), and it is right at 2025-11-25 too.
        await self._ctx.session.send_notification(
            types.LoggingMessageNotification(params=params),
            related_request_id=self._ctx.request_id,
        )
