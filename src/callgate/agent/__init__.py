"""The agent loop: a model proposes tool calls, the governed chain disposes.

:mod:`callgate.agent.messages` is the one representation of a conversation;
provider adapters (``callgate.agent.anthropic``, ``openai_chat``,
``openai_responses``, ``gemini``) convert it to and from each API, over the
official SDKs (optional extras). :class:`Agent` runs the loop (see
:mod:`callgate.agent.loop`); :class:`ScriptedModel` answers from a script, for
tests without a provider. See docs/agent.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from callgate._lazy import lazy_exports

if TYPE_CHECKING:
    from callgate.agent.loop import Agent, CallOutcome, RunEvent, RunLimits, RunResult, RunUsage
    from callgate.agent.messages import (
        AssistantMessage,
        ForcedTool,
        Message,
        ModelRequest,
        ModelResponse,
        Text,
        ToolCall,
        ToolChoice,
        ToolDef,
        ToolResult,
        ToolResults,
        Usage,
        UserMessage,
    )
    from callgate.agent.model import Model, ModelError, ScriptedModel, call, calls, reply

# Imported on first use: ``callgate run --help`` needs the provider table, not
# the loop (which brings the gate and its store).
_HOMES = {
    "Agent": "callgate.agent.loop",
    "CallOutcome": "callgate.agent.loop",
    "RunEvent": "callgate.agent.loop",
    "RunLimits": "callgate.agent.loop",
    "RunResult": "callgate.agent.loop",
    "RunUsage": "callgate.agent.loop",
    "AssistantMessage": "callgate.agent.messages",
    "ForcedTool": "callgate.agent.messages",
    "Message": "callgate.agent.messages",
    "ModelRequest": "callgate.agent.messages",
    "ModelResponse": "callgate.agent.messages",
    "Text": "callgate.agent.messages",
    "ToolCall": "callgate.agent.messages",
    "ToolChoice": "callgate.agent.messages",
    "ToolDef": "callgate.agent.messages",
    "ToolResult": "callgate.agent.messages",
    "ToolResults": "callgate.agent.messages",
    "Usage": "callgate.agent.messages",
    "UserMessage": "callgate.agent.messages",
    "Model": "callgate.agent.model",
    "ModelError": "callgate.agent.model",
    "ScriptedModel": "callgate.agent.model",
    "call": "callgate.agent.model",
    "calls": "callgate.agent.model",
    "reply": "callgate.agent.model",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "Agent",
    "AssistantMessage",
    "CallOutcome",
    "ForcedTool",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "RunEvent",
    "RunLimits",
    "RunResult",
    "RunUsage",
    "ScriptedModel",
    "Text",
    "ToolCall",
    "ToolChoice",
    "ToolDef",
    "ToolResult",
    "ToolResults",
    "Usage",
    "UserMessage",
    "call",
    "calls",
    "reply",
]
