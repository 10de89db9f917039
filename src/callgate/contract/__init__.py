"""Tool contracts: what a tool is, how it is named, described and classified."""

from __future__ import annotations

from typing import TYPE_CHECKING

from callgate._lazy import lazy_exports

if TYPE_CHECKING:
    from callgate.contract.annotations import RiskTier, ToolAnnotations, derive_risk
    from callgate.contract.content import Audio, Block, Content, EmbeddedResource, Image, Text
    from callgate.contract.context import (
        LOG_LEVELS,
        REDACTED,
        LogLevel,
        Secret,
        ToolContext,
        ToolSink,
        Trusted,
        TrustedField,
    )
    from callgate.contract.function import FunctionHandler, spec_from_function
    from callgate.contract.handles import Handle, HandleConflict, HandleKind, Handles, UnknownHandle
    from callgate.contract.identity import InvalidIdentity, Principal
    from callgate.contract.naming import (
        FULL_NAMES,
        InvalidToolName,
        ToolNames,
        check_tool_name,
        qualify,
        rename_in_schema,
        rename_in_text,
    )
    from callgate.contract.options import ChangeOptions, ToolOptions
    from callgate.contract.spec import ToolHandler, ToolSpec
    from callgate.contract.toolbox import DuplicateTool, Toolbox, tool

# Imported on first use, so that a module of this package (``naming``, say)
# can be imported without the rest (the handles bring the store).
_HOMES = {
    "RiskTier": "callgate.contract.annotations",
    "ToolAnnotations": "callgate.contract.annotations",
    "derive_risk": "callgate.contract.annotations",
    "Audio": "callgate.contract.content",
    "Block": "callgate.contract.content",
    "Content": "callgate.contract.content",
    "EmbeddedResource": "callgate.contract.content",
    "Image": "callgate.contract.content",
    "Text": "callgate.contract.content",
    "LOG_LEVELS": "callgate.contract.context",
    "REDACTED": "callgate.contract.context",
    "LogLevel": "callgate.contract.context",
    "Principal": "callgate.contract.identity",
    "Secret": "callgate.contract.context",
    "ToolContext": "callgate.contract.context",
    "ToolSink": "callgate.contract.context",
    "Trusted": "callgate.contract.context",
    "TrustedField": "callgate.contract.context",
    "FunctionHandler": "callgate.contract.function",
    "spec_from_function": "callgate.contract.function",
    "Handle": "callgate.contract.handles",
    "HandleConflict": "callgate.contract.handles",
    "HandleKind": "callgate.contract.handles",
    "Handles": "callgate.contract.handles",
    "UnknownHandle": "callgate.contract.handles",
    "InvalidIdentity": "callgate.contract.identity",
    "FULL_NAMES": "callgate.contract.naming",
    "InvalidToolName": "callgate.contract.naming",
    "ToolNames": "callgate.contract.naming",
    "check_tool_name": "callgate.contract.naming",
    "qualify": "callgate.contract.naming",
    "rename_in_schema": "callgate.contract.naming",
    "rename_in_text": "callgate.contract.naming",
    "ChangeOptions": "callgate.contract.options",
    "ToolOptions": "callgate.contract.options",
    "ToolHandler": "callgate.contract.spec",
    "ToolSpec": "callgate.contract.spec",
    "DuplicateTool": "callgate.contract.toolbox",
    "Toolbox": "callgate.contract.toolbox",
    "tool": "callgate.contract.toolbox",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "FULL_NAMES",
    "LOG_LEVELS",
    "REDACTED",
    "Audio",
    "Block",
    "ChangeOptions",
    "Content",
    "DuplicateTool",
    "EmbeddedResource",
    "FunctionHandler",
    "Handle",
    "HandleConflict",
    "HandleKind",
    "Handles",
    "Image",
    "InvalidIdentity",
    "InvalidToolName",
    "LogLevel",
    "Principal",
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
