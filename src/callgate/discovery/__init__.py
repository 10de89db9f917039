"""Tool discovery: thousands of tools, a few in context, the right one found.

Above a threshold (:class:`DiscoverySettings`), a model is offered the
meta-tools instead of every tool: ``callgate.search_tools`` (names and one
line each), ``callgate.describe_tools`` (full definitions) and
``callgate.call_tool`` (runs one, through the whole governed chain), plus
``callgate.load_skill`` and ``callgate.read_skill_file`` where Agent Skills are
configured. Search filters by who asks before it ranks: a tool outside the
caller's reach is never found and cannot be called. See docs/discovery.md.
"""

from callgate.discovery.index import Document, Hit, SearchIndex, function_document, tool_document
from callgate.discovery.meta import CALL_TOOL, DESCRIBE_TOOLS, META_TOOLS, SEARCH_TOOLS
from callgate.discovery.service import Discovery, SearchOutcome
from callgate.discovery.settings import (
    DiscoveryMode,
    DiscoveryRule,
    DiscoverySettings,
    parse_discovery,
)

__all__ = [
    "CALL_TOOL",
    "DESCRIBE_TOOLS",
    "META_TOOLS",
    "SEARCH_TOOLS",
    "Discovery",
    "DiscoveryMode",
    "DiscoveryRule",
    "DiscoverySettings",
    "Document",
    "Hit",
    "SearchIndex",
    "SearchOutcome",
    "function_document",
    "parse_discovery",
    "tool_document",
]
