"""The agent loop: a model proposes tool calls, the governed chain disposes.

:mod:`callgate.agent.messages` is the one representation of a conversation;
provider adapters (``callgate.agent.anthropic``, ``openai_chat``,
``openai_responses``, ``gemini``) convert it to and from each API, over the
official SDKs (optional extras). :class:`Agent` runs the loop (see
:mod:`callgate.agent.loop`); :class:`ScriptedModel` answers from a script, for
tests without a provider. See docs/agent.md.
"""

from __future__ import annotations

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
