"""Resources, prompts, completion and logging/setLevel, through the SDK client in memory."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning

from callgate import Gate, Principal, Toolbox
from callgate.contract import Text
from callgate.contract.resources import DuplicatePrompt, DuplicateResource, Message
from callgate.mcp import build_server
from tests.conformance.fixture import PNG_1X1_RED, STATIC_TEXT, context_toolboxes
from tests.mcp.tools import ALICE, build_toolbox

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
NOTES = {"n1": "# First note", "n2": "# Second note"}


def notes_toolbox() -> Toolbox:
    """A toolbox as a user would write one: a note by URI, a secret, a prompt."""
    box = Toolbox("notes", tenants={"acme"})

    @box.resource("notes://{note_id}", mime_type="text/markdown", completions={"note_id": NOTES})
    def note(note_id: str) -> str:
        """One note by id."""
        return NOTES[note_id]  # a KeyError means "no such note"

    @box.resource("notes://admin/secret", scopes={"admin"})
    def secret() -> str:
        return "the launch codes"

    @box.prompt(title="Review a note")
    def review(note_id: str, tone: Literal["kind", "blunt", "brief"] = "kind") -> list[Message]:
        """Ask for a review of one note.

        Args:
            note_id: The note to review.
            tone: How to say it.
        """
        return [Message(content=Text(f"Review note {note_id}, {tone}ly."))]

    @box.prompt(scopes={"admin"})
    def audit_all() -> str:
        return "Audit everything."

    return box


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    boxes = [build_toolbox(), notes_toolbox(), *context_toolboxes()]
    async with Gate(boxes, store="memory://") as gate:
        yield gate


@pytest.fixture(params=MODES)
async def client(request: pytest.FixtureRequest, gate: Gate) -> AsyncIterator[Client]:
    async with Client(build_server(gate, principal=ALICE), mode=request.param) as client:
        yield client


async def _error(call: Awaitable[object]) -> MCPError:
    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
        await call
    return caught.value


async def _capabilities(client: Client) -> types.ServerCapabilities:
    if client.protocol_version == "2025-11-25":
        return client.server_capabilities
    # A 2026-07-28 client adopts the version without asking; server/discover tells.
    with anyio.fail_after(5):
        raw = await client.session.send_discover(client.protocol_version)
    return types.DiscoverResult.model_validate(raw).capabilities


async def test_capabilities_are_advertised(client: Client) -> None:
    caps = await _capabilities(client)
    assert caps.resources is not None
    assert caps.prompts is not None
    assert caps.completions is not None


async def test_resources_list_is_uri_ordered_without_templates_or_hidden_ones(
    client: Client,
) -> None:
    with anyio.fail_after(5):
        resources = (await client.list_resources()).resources
    assert [r.uri for r in resources] == ["test://static-binary", "test://static-text"]
    binary = resources[0]
    assert (binary.name, binary.mime_type) == ("static_binary", "image/png")
    assert resources[1].description == "A static text resource (scenario resources-read-text)."


async def test_templates_list(client: Client) -> None:
    with anyio.fail_after(5):
        templates = (await client.list_resource_templates()).resource_templates
    assert [(t.uri_template, t.mime_type) for t in templates] == [
        ("notes://{note_id}", "text/markdown"),
        ("test://template/{id}/data", "application/json"),
    ]


async def test_read_text_resource(client: Client) -> None:
    with anyio.fail_after(5):
        (contents,) = (await client.read_resource("test://static-text")).contents
    assert isinstance(contents, types.TextResourceContents)
    assert (contents.uri, contents.mime_type, contents.text) == (
        "test://static-text",
        "text/plain",
        STATIC_TEXT,
    )


async def test_read_binary_resource_is_a_base64_blob(client: Client) -> None:
    with anyio.fail_after(5):
        (contents,) = (await client.read_resource("test://static-binary")).contents
    assert isinstance(contents, types.BlobResourceContents)
    assert contents.mime_type == "image/png"
    assert base64.b64decode(contents.blob) == PNG_1X1_RED


async def test_read_templated_resource_substitutes_the_variable(client: Client) -> None:
    with anyio.fail_after(5):
        (contents,) = (await client.read_resource("test://template/123/data")).contents
        (note,) = (await client.read_resource("notes://n2")).contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.uri == "test://template/123/data"
    assert contents.mime_type == "application/json"
    assert json.loads(contents.text) == {
        "id": "123",
        "templateTest": True,
        "data": "Data for ID: 123",
    }
    assert isinstance(note, types.TextResourceContents) and note.text == "# Second note"


@pytest.mark.parametrize(
    "uri",
    [
        "test://nonexistent-resource",
        "test://template/1/2/data",  # a variable matches one segment only
        "notes://n9",  # the template matches, the function raises KeyError
        "notes://admin/secret",  # needs a scope alice lacks: looks missing
    ],
)
async def test_unknown_or_hidden_resource_is_invalid_params_naming_the_uri(
    client: Client, uri: str
) -> None:
    error = await _error(client.read_resource(uri))
    assert error.code == types.INVALID_PARAMS
    assert error.data == {"uri": uri}
    assert error.message == f"Resource not found: {uri}"


async def test_scoped_resource_and_prompt_are_served_to_a_holder(gate: Gate) -> None:
    admin = Principal("root", tenant="acme", scopes={"admin"})
    with anyio.fail_after(5):
        async with Client(build_server(gate, principal=admin), mode="legacy") as client:
            (contents,) = (await client.read_resource("notes://admin/secret")).contents
            prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text == "the launch codes"
    assert "audit_all" in prompts


async def test_other_tenants_see_nothing_of_a_tenant_toolbox(gate: Gate) -> None:
    outsider = Principal("eve", tenant="globex")
    with anyio.fail_after(5):
        async with Client(build_server(gate, principal=outsider), mode="legacy") as client:
            templates = (await client.list_resource_templates()).resource_templates
            error = await _error(client.read_resource("notes://n1"))
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
    assert error.code == types.INVALID_PARAMS


async def test_prompts_list_is_name_ordered_with_arguments(client: Client) -> None:
    with anyio.fail_after(5):
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert list(prompts) == [
        "review",
        "test_input_required_result_prompt",
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
        "test_simple_prompt",
    ]
    review = prompts["review"]
    assert review.title == "Review a note"
    assert review.description == "Ask for a review of one note."
    assert review.arguments is not None
    assert [(a.name, a.required, a.description) for a in review.arguments] == [
        ("note_id", True, "The note to review."),
        ("tone", False, "How to say it."),
    ]
    assert prompts["test_simple_prompt"].arguments is None


async def test_get_simple_prompt_is_one_user_message(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.get_prompt("test_simple_prompt")
    (message,) = result.messages
    assert message.role == "user"
    assert message.content == types.TextContent(text="This is a simple prompt for testing.")


async def test_get_prompt_with_arguments(client: Client) -> None:
    with anyio.fail_after(5):
        result = await client.get_prompt(
            "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"}
        )
        review = await client.get_prompt("review", {"note_id": "n1"})
    (message,) = result.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Prompt with arguments: arg1='hello', arg2='world'"
    (default,) = review.messages
    assert isinstance(default.content, types.TextContent)
    assert default.content.text == "Review note n1, kindly."


async def test_get_prompt_with_embedded_resource_and_image(client: Client) -> None:
    with anyio.fail_after(5):
        embedded = await client.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
        )
        image = await client.get_prompt("test_prompt_with_image")
    resource = embedded.messages[0].content
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.TextResourceContents)
    assert resource.resource.uri == "test://example-resource"
    assert resource.resource.text == "Embedded resource content for testing."
    picture = image.messages[0].content
    assert isinstance(picture, types.ImageContent)
    assert picture.mime_type == "image/png"
    assert base64.b64decode(picture.data) == PNG_1X1_RED


async def test_missing_prompt_argument_is_invalid_params(client: Client) -> None:
    error = await _error(client.get_prompt("test_prompt_with_arguments", {"arg1": "only"}))
    assert error.code == types.INVALID_PARAMS
    assert "arg2" in error.message
    assert error.data == {"name": "test_prompt_with_arguments", "missing": ["arg2"]}


@pytest.mark.parametrize("name", ["no_such_prompt", "audit_all"])
async def test_unknown_or_hidden_prompt_is_invalid_params(client: Client, name: str) -> None:
    error = await _error(client.get_prompt(name))
    assert error.code == types.INVALID_PARAMS
    assert error.message == f"Prompt not found: {name}"


async def test_completion_offers_known_values_by_prefix(client: Client) -> None:
    with anyio.fail_after(5):
        fixture = await client.complete(
            types.PromptReference(name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"},
        )
        tone = await client.complete(
            types.PromptReference(name="review"), {"name": "tone", "value": "b"}
        )
        note = await client.complete(
            types.ResourceTemplateReference(uri="notes://{note_id}"),
            {"name": "note_id", "value": ""},
        )
        free = await client.complete(
            types.PromptReference(name="review"), {"name": "note_id", "value": "n"}
        )
    assert fixture.completion.values == ["paris", "park", "party"]
    assert (fixture.completion.total, fixture.completion.has_more) == (3, False)
    assert tone.completion.values == ["blunt", "brief"]
    assert note.completion.values == ["n1", "n2"]
    assert free.completion.values == []


async def test_completion_of_an_unknown_reference_is_invalid_params(client: Client) -> None:
    error = await _error(
        client.complete(types.PromptReference(name="nope"), {"name": "x", "value": ""})
    )
    assert error.code == types.INVALID_PARAMS


async def test_legacy_logging_level_and_subscriptions_are_accepted(gate: Gate) -> None:
    with anyio.fail_after(5):
        async with Client(build_server(gate, principal=ALICE), mode="legacy") as client:
            caps = client.server_capabilities
            with pytest.warns(MCPDeprecationWarning):
                level = await client.set_logging_level("warning")
            with pytest.warns(MCPDeprecationWarning):
                subscribed = await client.subscribe_resource("test://watched-resource")
            with pytest.warns(MCPDeprecationWarning):
                unsubscribed = await client.unsubscribe_resource("test://watched-resource")
    assert level == subscribed == unsubscribed == types.EmptyResult()
    assert caps.logging is not None
    assert caps.resources is not None and caps.resources.subscribe is True


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_without_context_advertises_none(mode: str) -> None:
    async with Gate([build_toolbox()], store="memory://") as gate:
        with anyio.fail_after(5):
            async with Client(build_server(gate, principal=ALICE), mode=mode) as client:
                caps = await _capabilities(client)
                error = await _error(client.list_resources())
    assert (caps.resources, caps.prompts, caps.completions) == (None, None, None)
    assert error.code == types.METHOD_NOT_FOUND


async def test_two_toolboxes_serving_one_uri_are_refused() -> None:
    one, two = Toolbox("one"), Toolbox("two")
    for box in (one, two):
        box.resource("test://same")(lambda: "x")
    async with Gate([one, two], store="memory://") as gate:
        with pytest.raises(ValueError, match="test://same"):
            build_server(gate, principal=ALICE)


def test_toolbox_refuses_duplicates_and_mismatched_template_parameters() -> None:
    box = Toolbox("docs")
    box.resource("docs://{slug}")(lambda slug: slug)
    with pytest.raises(DuplicateResource):
        box.resource("docs://{slug}")(lambda slug: slug)
    with pytest.raises(TypeError, match="variables"):
        box.resource("docs://{slug}/raw")(lambda name: name)
    box.prompt("hello")(lambda: "hi")
    with pytest.raises(DuplicatePrompt):
        box.prompt("hello")(lambda: "hi again")
    with pytest.raises(TypeError, match="unknown argument"):
        box.prompt("greet", completions={"nobody": ["x"]})(lambda who: who)
    with pytest.raises(TypeError, match="must be a str"):

        @box.prompt()
        def page(number: int) -> str:
            return f"page {number}"

    assert [spec.uri for spec in box.resources] == ["docs://{slug}"]
    assert [spec.name for spec in box.prompts] == ["hello"]


async def test_a_prompt_returning_something_else_fails_loudly() -> None:
    box = Toolbox("bad")
    box.prompt("numbers")(lambda: 42)
    (spec,) = box.prompts
    with pytest.raises(TypeError, match="not str or messages"):
        await spec.render({})
