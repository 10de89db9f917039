"""Between the gate and a model: tool definitions out, Envelopes back as results."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from callgate.agent.messages import ToolCall, ToolDef, ToolResult
from callgate.contract import (
    FULL_NAMES,
    Principal,
    ToolNames,
    ToolSpec,
    rename_in_schema,
    rename_in_text,
)
from callgate.runtime.builtin import BUILTIN_TOOLBOX
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.gate import Gate

__all__ = ["estimate_tokens", "result_for", "tool_def", "tool_defs"]


def tool_def(
    spec: ToolSpec,
    *,
    strict: bool = False,
    shown: ToolNames = FULL_NAMES,
    known: Iterable[str] = (),
) -> ToolDef:
    """The model's view of one tool: model-facing schema, description, examples.

    The tools of ``known`` that its texts mention are named as ``shown`` names
    them (the tool itself keeps callgate's name: the adapter maps it).
    """
    description = spec.description
    schema: dict[str, Any] = dict(spec.input_schema)
    if shown is not FULL_NAMES:
        pool = tuple(known)
        description = rename_in_text(description, pool, shown)
        schema = rename_in_schema(schema, pool, shown)
    return ToolDef(
        name=spec.name,
        description=description,
        input_schema=schema,
        strict=strict,
        input_examples=tuple(dict(example) for example in spec.input_examples),
    )


def tool_defs(
    gate: Gate,
    principal: Principal,
    *,
    names: Iterable[str] | None = None,
    strict: bool = False,
    shown: ToolNames = FULL_NAMES,
    builtins: Iterable[str] = (),
) -> tuple[ToolDef, ...]:
    """The tools ``principal`` may call, in name order, then those of callgate's own
    (``callgate.read_more``, ``callgate.approval_status``) named in ``builtins``.

    callgate's own tools are offered only when they can be used: a small model
    offered ``read_more`` with nothing truncated calls it instead of the tools
    that do the work. With ``names``, only those are the caller's tools
    (unknown names are refused; callgate's own named there are offered always,
    after the others). Descriptions name the tools they mention as ``shown``
    does.

    Raises:
        ValueError: a name in ``names`` is not a tool ``principal`` may call.
    """
    specs = gate.tools(principal)
    known = [spec.name for spec in specs]
    wanted = set(builtins)
    if names is not None:
        named = set(names)
        missing = sorted(named - set(known))
        if missing:
            raise ValueError(f"no tool {missing} that {principal.user} may call")
        wanted |= named
    else:
        wanted |= {spec.name for spec in specs if spec.toolbox != BUILTIN_TOOLBOX}
    offered = sorted(
        (spec for spec in specs if spec.name in wanted),
        key=lambda spec: (spec.toolbox == BUILTIN_TOOLBOX, spec.name),
    )
    return tuple(tool_def(spec, strict=strict, shown=shown, known=known) for spec in offered)


def estimate_tokens(value: Any) -> int:
    """A rough token count of ``value`` as JSON text (about 4 characters a token).

    Providers count with their own tokenizers, which cannot be loaded offline; this
    is for comparing sizes (tool definitions across formats), not for billing.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return math.ceil(len(text) / 4)


def result_for(call: ToolCall, envelope: Envelope) -> ToolResult:
    """What the model reads for ``call`` (:meth:`Envelope.for_model`, the same text an
    MCP client gets), paired with the call's id: an error result unless ``ok``."""
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=envelope.for_model(),
        is_error=envelope.status is not Status.OK,
    )
