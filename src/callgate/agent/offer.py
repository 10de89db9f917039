"""Which tools a run offers the model, beside the caller's own: callgate's tools
that can be of use so far, the tools it had described, and code mode's offer."""

from __future__ import annotations

from typing import Any

from callgate.agent.messages import ToolDef
from callgate.agent.runs import RunState
from callgate.agent.tools import tool_defs
from callgate.codemode.tool import RUN_CODE, catalogue_for, run_code_description
from callgate.contract import FULL_NAMES, Principal, ToolNames
from callgate.discovery.meta import DESCRIBE_TOOLS, LOAD_SKILL
from callgate.runtime.approvals import APPROVAL_STATUS_TOOL
from callgate.runtime.envelope import Status
from callgate.runtime.gate import Gate
from callgate.runtime.stages.shape import READ_MORE_TOOL

__all__ = ["code_mode_defs", "definition_json", "described", "usable_builtins"]


def usable_builtins(run: RunState) -> list[str]:
    """callgate's own tools that can be of use in ``run`` so far: ``read_more`` once
    a result was truncated, ``approval_status`` once a call was parked for approval."""
    usable: list[str] = []
    envelopes = [e["envelope"] for e in run.trace if e.get("type") == "tool_call"]
    if any(envelope.get("truncated") for envelope in envelopes):
        usable.append(READ_MORE_TOOL)
    if any(envelope.get("status") == Status.PENDING_APPROVAL.value for envelope in envelopes):
        usable.append(APPROVAL_STATUS_TOOL)
    return usable


def definition_json(tool: ToolDef) -> dict[str, Any]:
    """A tool definition as counted for its tokens (about what providers send)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": dict(tool.input_schema),
    }


def described(run: RunState) -> list[str]:
    """Tools the model had described (or a loaded skill named) so far in ``run``,
    as the model was shown them, in the order they were first described."""
    out: dict[str, None] = {}
    for entry in run.trace:
        if entry.get("type") != "tool_call" or entry["call"].get("name") not in (
            DESCRIBE_TOOLS,
            LOAD_SKILL,
        ):
            continue
        payload = entry["envelope"].get("payload")
        if isinstance(payload, dict):
            for tool in payload.get("tools") or ():
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    out.setdefault(tool["name"])
    return list(out)


def code_mode_defs(
    gate: Gate,
    principal: Principal,
    *,
    strict: bool = False,
    shown: ToolNames = FULL_NAMES,
    builtins: list[str],
) -> tuple[ToolDef, ...]:
    """Code mode's offer: ``callgate.run_code`` (its description listing the
    functions the caller's programs may call: no turn spent asking for them),
    then callgate's own tools of use so far.

    Raises:
        ValueError: the gate has no code mode.
    """
    if gate.sandbox is None:
        raise ValueError(
            "code mode needs a gate that runs programs: "
            "Gate(..., code_mode=CodeModeSettings(enabled=True)), or [code_mode] enabled = true"
        )
    defs = tool_defs(
        gate, principal, names=[], strict=strict, shown=shown, builtins=[RUN_CODE, *builtins]
    )
    stubs = catalogue_for(gate, principal).stubs()
    return tuple(
        ToolDef(
            name=d.name,
            description=run_code_description(stubs),
            input_schema=d.input_schema,
            strict=d.strict,
            input_examples=d.input_examples,
        )
        if d.name == RUN_CODE
        else d
        for d in defs
    )
