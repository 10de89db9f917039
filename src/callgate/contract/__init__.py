"""Tool contracts: what a tool is, how it is named, described and classified."""

from callgate.contract.annotations import RiskTier, ToolAnnotations, derive_risk
from callgate.contract.content import Audio, Block, Content, EmbeddedResource, Image, Text
from callgate.contract.context import (
    LOG_LEVELS,
    REDACTED,
    LogLevel,
    Principal,
    Secret,
    ToolContext,
    ToolSink,
    Trusted,
    TrustedField,
)
from callgate.contract.function import FunctionHandler, spec_from_function
from callgate.contract.handles import Handle, HandleConflict, HandleKind, Handles, UnknownHandle
from callgate.contract.identity import InvalidIdentity
from callgate.contract.naming import (
    FULL_NAMES,
    InvalidToolName,
    ToolNames,
    check_tool_name,
    qualify,
    rename_in_schema,
    rename_in_text,
)
from callgate.contract.spec import ToolHandler, ToolSpec
from callgate.contract.toolbox import DuplicateTool, Toolbox, tool

__all__ = [
    "FULL_NAMES",
    "LOG_LEVELS",
    "REDACTED",
    "Audio",
    "Block",
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
