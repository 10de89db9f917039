"""The conformance fixture's resources and prompts.

``context_toolboxes()`` (config reference
``callgate.mcp.fixture_context:context_toolboxes``) returns one toolbox,
``conformance_context``, with no tools: only the resources and prompts the server
scenarios of ``@modelcontextprotocol/conformance`` 0.2.0-alpha.12 read, verbatim:

- ``resources-list``, ``resources-read-text`` (``test://static-text``),
  ``resources-read-binary`` (``test://static-binary``, a PNG), and
  ``resources-templates-read`` (``test://template/{id}/data``, JSON);
  ``sep-2164-resource-not-found`` needs no fixture (an unknown URI);
  ``resources-subscribe`` / ``-unsubscribe`` subscribe to a URI nobody serves;
- ``prompts-list``, ``prompts-get-simple``, ``prompts-get-with-args``,
  ``prompts-get-embedded-resource``, ``prompts-get-with-image``;
- ``input-required-result-non-tool-request`` (2026-07-28): a prompt that asks
  the user for context before it renders (``input_required`` on ``prompts/get``);
- ``completion-complete`` completes ``arg1`` of ``test_prompt_with_arguments``.

Resource URIs and prompt names are never prefixed with the toolbox name, so no
``unprefixed`` setting is needed for them.
"""

from __future__ import annotations

import json

from callgate.contract import EmbeddedResource, Image, Text, Toolbox, ToolContext
from callgate.contract.resources import Message
from callgate.mcp.fixture import PNG_1X1_RED

__all__ = [
    "CONTEXT_TOOLBOX",
    "CONTEXT_TOOLBOXES",
    "STATIC_TEXT",
    "context_toolboxes",
]

CONTEXT_TOOLBOX = "conformance_context"
CONTEXT_TOOLBOXES = "callgate.mcp.fixture_context:context_toolboxes"
"""The fixture as a ``toolboxes`` entry of a callgate config."""

STATIC_TEXT = "This is the content of the static text resource."
SIMPLE_PROMPT = "This is a simple prompt for testing."
EMBEDDED_TEXT = "Embedded resource content for testing."

ARG1_EXAMPLES = ("paris", "park", "party", "testValue1")
"""What completion offers for ``arg1`` (the scenario accepts any list)."""

CONTEXT_QUESTION = "What context should the prompt use?"
CONTEXT_FORM = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}


def static_text() -> str:
    """A static text resource (scenario resources-read-text)."""
    return STATIC_TEXT


def static_binary() -> bytes:
    """A static binary resource, a 1x1 PNG (scenario resources-read-binary)."""
    return PNG_1X1_RED


def template_data(id: str) -> str:
    """Data for one id (scenario resources-templates-read)."""
    return json.dumps(
        {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":")
    )


def test_simple_prompt() -> str:
    """A simple prompt without arguments (scenario prompts-get-simple)."""
    return SIMPLE_PROMPT


def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments (scenario prompts-get-with-args).

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt embedding a resource (scenario prompts-get-embedded-resource).

    Args:
        resourceUri: URI of the resource to embed.
    """
    return [
        Message(
            content=EmbeddedResource(uri=resourceUri, mime_type="text/plain", text=EMBEDDED_TEXT)
        ),
        Message(content=Text("Please process the embedded resource above.")),
    ]


def test_prompt_with_image() -> list[Message]:
    """A prompt with an image (scenario prompts-get-with-image)."""
    return [
        Message(content=Image(PNG_1X1_RED, "image/png")),
        Message(content=Text("Please analyze the image above.")),
    ]


async def test_input_required_result_prompt(ctx: ToolContext) -> str:
    """A prompt that asks the user for its context first (scenario
    input-required-result-non-tool-request)."""
    answer = await ctx.elicit(CONTEXT_QUESTION, CONTEXT_FORM, key="user_context")
    if not answer.accepted:
        return "Answer without any particular context."
    return f"Answer with this context in mind: {(answer.content or {}).get('context', '')}"


def context_toolboxes() -> list[Toolbox]:
    """The conformance resources and prompts, in a new toolbox on every call.

    Returns:
        One toolbox, ``conformance_context``.
    """
    box = Toolbox(
        CONTEXT_TOOLBOX,
        description="Resources and prompts the official MCP conformance suite reads; tests only.",
    )
    box.resource("test://static-text", name="static_text", title="Static text")(static_text)
    box.resource("test://static-binary", name="static_binary", mime_type="image/png")(static_binary)
    box.resource("test://template/{id}/data", name="template_data", mime_type="application/json")(
        template_data
    )
    box.prompt(test_simple_prompt)
    box.prompt(completions={"arg1": ARG1_EXAMPLES})(test_prompt_with_arguments)
    box.prompt(test_prompt_with_embedded_resource)
    box.prompt(test_prompt_with_image)
    box.prompt(test_input_required_result_prompt)
    return [box]
