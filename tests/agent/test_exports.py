"""``callgate.agent`` exports a deliberate list of names, and imports no provider SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

import callgate.agent


def test_exported_names() -> None:
    assert sorted(callgate.agent.__all__) == [
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
    for name in callgate.agent.__all__:
        assert getattr(callgate.agent, name) is not None


@pytest.mark.slow
def test_the_loop_needs_no_provider_sdk() -> None:
    code = (
        "import sys, callgate.agent, callgate.cli.app; "
        "print(sorted(m for m in ('anthropic', 'openai', 'google.genai') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
