"""The one place where callgate's tool contract and Envelopes become MCP wire types.

Every outcome leaves the MCP server through here: a tool's listing
(:func:`tool`), an Envelope as a ``tools/call`` result, an ``input_required``
round or a protocol error (:func:`call_result`), a task's outcome
(:func:`task_outcome`), and every JSON-RPC error the server answers with (the
constructors at the end: nothing else in callgate builds an ``MCPError``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError

from callgate.contract import Audio, Block, Content, Image, Text, ToolSpec
from callgate.errors import ErrorKind
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


def _meta(envelope: Envelope) -> dict[str, Any]:
    meta = {"callgate/callId": envelope.call_id, "callgate/status": envelope.status.value}
    if envelope.approval is not None:
        meta["callgate/approvalId"] = envelope.approval.approval_id
    return meta


def tool_result(envelope: Envelope, spec: ToolSpec | None) -> types.CallToolResult:
    """The ``CallToolResult`` for an Envelope.

    ``ok`` becomes the payload as text (:meth:`Envelope.payload_text`) plus
    ``structuredContent`` (wrapped under ``result`` when the tool's output schema
    is not an object), or, for a :class:`Content` payload of a tool without an
    output schema, its blocks as MCP content blocks (image, audio, embedded
    resource, text); every other status is a tool execution error (``isError``)
    carrying :meth:`Envelope.explanation`, so the model can correct itself. A
    truncated result carries its notice as a last text block.
    """
    meta = _meta(envelope)
    if envelope.status is not Status.OK:
        return types.CallToolResult(
            content=[types.TextContent(text=envelope.explanation())], is_error=True, _meta=meta
        )
    blocks = _as_content(envelope, spec)
    if blocks is not None:
        content_blocks = [content_block(block) for block in blocks]
        if envelope.truncated is not None:
            content_blocks.append(_text(envelope.truncated.notice))
        return types.CallToolResult(content=content_blocks, _meta=meta)
    payload = envelope.payload
    content: list[types.ContentBlock] = [types.TextContent(text=envelope.payload_text())]
    structured: Any = None
    if spec is not None and spec.output_schema is not None:
        structured = payload if is_object_schema(spec.output_schema) else {RESULT_KEY: payload}
    elif isinstance(payload, dict):
        structured = payload
    if envelope.truncated is not None:
        content.append(_text(envelope.truncated.notice))
    return types.CallToolResult(content=content, structured_content=structured, _meta=meta)


@dataclass(kw_only=True)
class Round:
    """One ``tools/call`` round as the server answers it: the chain's Envelope, and
    what the wire needs around it.

    Args:
        envelope: the call's outcome.
        spec: the tool (its output schema shapes the result).
        input_required: whether this client is asked through ``input_required``
            results (2026-07-28) rather than requests on the call's stream.
        request_state: makes the state the next round continues from (the
            answers so far), for an ``input_required`` result.
        asking: questions the server itself asks first (the requester's
            approval), by key; they come before the Envelope.
        challenge: where the answer may be a scope challenge (an authenticated
            2026-07-28 HTTP request): told the scopes the tool needs when the
            caller lacked some, so the HTTP answer is ``403`` naming them.
    """

    envelope: Envelope
    spec: ToolSpec | None
    input_required: bool = False
    request_state: Callable[[], str] | None = None
    asking: dict[str, types.InputRequest] = field(default_factory=dict)
    challenge: Callable[[Iterable[str]], None] | None = None

    @property
    def questions(self) -> dict[str, Any] | None:
        """What the client is asked before the call can go on (wire JSON), if anything."""
        if self.asking:
            return {
                key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, request in self.asking.items()
            }
        envelope = self.envelope
        if self.input_required and envelope.input is not None and envelope.input.requests:
            return dict(envelope.input.requests)
        return None


def call_result(round_: Round) -> types.CallToolResult | types.InputRequiredResult:
    """The answer to a ``tools/call``: the Envelope as a result, or the questions
    the client must answer first (``input_required``).

    Raises:
        MCPError: ``-32021`` at 2026-07-28 when the tool needed a client
            capability this client did not declare (at 2025-11-25 that is a tool
            execution error, as the tool's other errors); ``-32600`` for a call
            refused for lacking scopes where the round may challenge (see
            :func:`insufficient_scope`).
    """
    questions = round_.questions
    if questions is not None:
        state = round_.request_state() if round_.request_state is not None else None
        return types.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": questions, "requestState": state}
        )
    error = round_.envelope.error
    if round_.challenge is not None and error is not None and error.missing_scopes:
        needed = sorted(round_.spec.scopes if round_.spec is not None else error.missing_scopes)
        round_.challenge(needed)
        raise insufficient_scope(round_.envelope, needed)
    if round_.input_required and error is not None and error.missing_capability is not None:
        raise needs_capabilities(round_.envelope.tool, {error.missing_capability: {}})
    return tool_result(round_.envelope, round_.spec)


TaskEnd = Literal["completed", "failed"]


def task_outcome(
    envelope: Envelope, spec: ToolSpec | None, *, input_required: bool = True
) -> tuple[TaskEnd, dict[str, Any]]:
    """How a task whose call ended with ``envelope`` ends: ``completed`` with the
    call's result (a tool execution error included), or ``failed`` with the
    JSON-RPC error (the tool crashed: ``unrecoverable``; or the protocol refused
    the call, e.g. a missing client capability)."""
    error = envelope.error
    if envelope.status is Status.ERROR and error is not None:
        if error.kind is ErrorKind.UNRECOVERABLE:
            return "failed", {"code": types.INTERNAL_ERROR, "message": envelope.explanation()}
        if input_required and error.missing_capability is not None:
            failure = needs_capabilities(envelope.tool, {error.missing_capability: {}})
            return "failed", error_json(failure)
    result = tool_result(envelope, spec)
    return "completed", result.model_dump(by_alias=True, mode="json", exclude_none=True)


def error_json(error: MCPError) -> dict[str, Any]:
    """A protocol error as the ``error`` of a failed task (``{code, message[, data]}``)."""
    out: dict[str, Any] = {"code": error.error.code, "message": error.error.message}
    if error.error.data is not None:
        out["data"] = error.error.data
    return out


# Protocol errors: the only place callgate makes them ----------------------------


def invalid_params(message: str, data: Any = None) -> MCPError:
    """``-32602``: the request's params cannot be served (an unknown name, a
    malformed answer)."""
    return MCPError(types.INVALID_PARAMS, message, data)


def not_found(what: str, key: str, data: dict[str, Any]) -> MCPError:
    """``-32602`` for something that does not exist, or is not this caller's to see:
    both answer alike. ``data`` names what was asked for, never why it is hidden
    (SEP-2164 standardizes -32602 for an unknown resource)."""
    return MCPError(types.INVALID_PARAMS, f"{what} not found: {key}", data)


def unknown_tool(envelope: Envelope) -> MCPError:
    """``-32602`` for a tool this server does not show, with the chain's message
    (it names close matches), once the chain has audited the attempt."""
    message = envelope.error.message_for_model if envelope.error else "Unknown tool"
    # The name as the Envelope holds it: a huge one is cut (see Call.tool_name).
    return MCPError(
        types.INVALID_PARAMS, message, {"name": envelope.tool, "callgate/callId": envelope.call_id}
    )


def invalid_state() -> MCPError:
    """``-32602`` for a request state that fails our checks (the SDK's wording)."""
    return MCPError(
        types.INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"}
    )


def needs_capabilities(name: str, capabilities: Mapping[str, Any]) -> MCPError:
    """``-32021``: what ``name`` needs of the client, which it did not declare."""
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{name} needs the client capabilities {sorted(capabilities)}",
        {"requiredCapabilities": dict(capabilities)},
    )


def needs_extension(extension: str) -> MCPError:
    """``-32021``: the request needs the client to declare ``extension``."""
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"this request needs the client to declare the {extension} extension",
        {"requiredCapabilities": {"extensions": {extension: {}}}},
    )


def header_mismatch(header: str, field_name: str) -> MCPError:
    """A routing header that names something other than the request's body (SEP-2243)."""
    return MCPError(
        types.HEADER_MISMATCH,
        f"{header} header does not match the request body's {field_name!r}",
    )


def insufficient_scope(envelope: Envelope, scopes: Iterable[str]) -> MCPError:
    """``-32600`` for a call its caller lacks scopes for, answered over HTTP as
    ``403`` with an ``insufficient_scope`` challenge: the Envelope's text (which
    scopes are missing, the next step) as the message, so a client that does not
    step up still shows why; ``data`` names the scopes the tool needs (what to
    step up to) and the ones missing."""
    error = envelope.error
    return MCPError(
        types.INVALID_REQUEST,
        envelope.explanation(),
        {
            "callgate/callId": envelope.call_id,
            "callgate/status": envelope.status.value,
            "kind": ErrorKind.PERMISSION.value,
            "scope": " ".join(scopes),
            "missingScopes": list(error.missing_scopes) if error is not None else [],
        },
    )


def unauthenticated() -> MCPError:
    """``-32600`` for a request without a caller, to a server that serves only
    authenticated ones (built without a fixed principal)."""
    return MCPError(
        types.INVALID_REQUEST,
        "This server serves authenticated callers only; connect over its HTTP endpoint "
        "with credentials.",
    )


def internal(message: str) -> MCPError:
    """``-32603`` with a message written for the client: never internals, at most
    a reference operators can look up."""
    return MCPError(types.INTERNAL_ERROR, message)
