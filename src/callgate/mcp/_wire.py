"""The one place where callgate's tool contract and Envelopes become MCP wire types."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from callgate.contract import ToolSpec
from callgate.runtime.envelope import Envelope, Status

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


def tool(spec: ToolSpec, *, name: str | None = None) -> types.Tool:
    """The MCP ``Tool`` for ``spec``: model-facing schemas only, trusted fields absent."""
    annotations = spec.annotations.to_mcp()
    return types.Tool(
        name=name or spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        output_schema=output_schema(spec),
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


def _text(value: Any) -> types.TextContent:
    return types.TextContent(
        text=value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    )


def call_result(envelope: Envelope, spec: ToolSpec | None) -> types.CallToolResult:
    """The ``tools/call`` result for an Envelope.

    ``ok`` becomes the JSON payload as text plus ``structuredContent`` (wrapped
    under ``result`` when the tool's output schema is not an object); every other
    status is a tool execution error (``isError``) carrying the model-facing
    message and next step, so the model can correct itself. A truncated result
    carries its notice as a last text block.
    """
    meta = {"callgate/callId": envelope.call_id, "callgate/status": envelope.status.value}
    if envelope.status is Status.OK:
        payload = envelope.payload
        content: list[types.ContentBlock] = [_text(payload)]
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
