"""``callgate.contract`` exports a deliberate list of names."""

from __future__ import annotations

import callgate.contract


def test_exported_names() -> None:
    assert sorted(callgate.contract.__all__) == [
        "Audio",
        "Block",
        "ChangeOptions",
        "Content",
        "DuplicateTool",
        "EmbeddedResource",
        "FULL_NAMES",
        "FunctionHandler",
        "Handle",
        "HandleConflict",
        "HandleKind",
        "Handles",
        "Image",
        "InvalidIdentity",
        "InvalidToolName",
        "LOG_LEVELS",
        "LogLevel",
        "Principal",
        "REDACTED",
        "RiskTier",
        "Secret",
        "Text",
        "ToolAnnotations",
        "ToolContext",
        "ToolHandler",
        "ToolNames",
        "ToolOptions",
        "ToolSink",
        "ToolSpec",
        "Toolbox",
        "Trusted",
        "TrustedField",
        "UnknownHandle",
        "check_tool_name",
        "derive_risk",
        "qualify",
        "rename_in_schema",
        "rename_in_text",
        "spec_from_function",
        "tool",
    ]
    # Each name is imported on first use: each must be in the lazy table.
    assert set(callgate.contract._HOMES) == set(callgate.contract.__all__)
    for name in callgate.contract.__all__:
        assert getattr(callgate.contract, name) is not None
