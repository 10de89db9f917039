"""A resource function may answer one read with several contents (a sequence of
``ResourceContents``), each with its own URI and MIME type; the SDK client in memory
sees them in order, at both protocol generations."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate, Principal, Toolbox
from callgate.contract.resources import ResourceContents
from callgate.mcp import build_server

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
ALICE = Principal("alice", tenant="acme")
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
FILES = {"readme.md": "# Photos\n", "cat.png": PNG}


def album_toolbox() -> Toolbox:
    """A directory read as a user would write one: every file in one answer."""
    box = Toolbox("album")

    @box.resource("album://{name}", mime_type="text/markdown")
    def album(name: str) -> list[ResourceContents]:
        """Every file of one album."""
        if name == "empty":
            return []
        return [
            ResourceContents(
                uri=f"album://{name}/readme.md", mime_type="text/markdown", text="# Photos\n"
            ),
            ResourceContents(uri=f"album://{name}/cat.png", mime_type="image/png", blob=PNG),
            ResourceContents(uri=f"album://{name}/notes", text="no type stated"),
        ]

    @box.resource("album://{name}/{file}")
    async def one_file(name: str, file: str) -> str | bytes:
        """One file of an album (the URIs the album read names)."""
        return FILES[file]

    @box.resource("broken://album")
    def broken() -> list[Any]:
        return [ResourceContents(uri="broken://album/a", text="a"), "b"]

    return box


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with Gate([album_toolbox()], store="memory://") as gate:
        yield gate


async def read(gate: Gate, uri: str, mode: str) -> types.ReadResourceResult:
    async with Client(build_server(gate, principal=ALICE), mode=mode) as client:
        with anyio.fail_after(5):
            return await client.read_resource(uri)


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_answers_with_each_content_in_order(gate: Gate, mode: str) -> None:
    readme, picture, notes = (await read(gate, "album://holiday", mode)).contents

    assert isinstance(readme, types.TextResourceContents)
    assert (readme.uri, readme.mime_type, readme.text) == (
        "album://holiday/readme.md",
        "text/markdown",
        "# Photos\n",
    )
    assert isinstance(picture, types.BlobResourceContents)
    assert (picture.uri, picture.mime_type) == ("album://holiday/cat.png", "image/png")
    assert base64.b64decode(picture.blob) == PNG
    # A content that states no MIME type is sent without one, not as the resource's.
    assert isinstance(notes, types.TextResourceContents)
    assert (notes.uri, notes.mime_type) == ("album://holiday/notes", None)


@pytest.mark.parametrize("mode", MODES)
async def test_a_content_can_be_read_again_by_its_uri(gate: Gate, mode: str) -> None:
    _, picture, _ = (await read(gate, "album://holiday", mode)).contents
    (again,) = (await read(gate, picture.uri, mode)).contents

    assert isinstance(again, types.BlobResourceContents)
    assert base64.b64decode(again.blob) == PNG


async def test_an_empty_sequence_is_a_read_with_no_contents(gate: Gate) -> None:
    result = await read(gate, "album://empty", "legacy")
    records = [r for r in await gate.audit() if r.tool == "resource:album://empty"]

    assert result.contents == []
    assert [r.outcome for r in records] == ["ok"]


async def test_a_sequence_of_anything_else_is_the_functions_failure(gate: Gate) -> None:
    async with Client(build_server(gate, principal=ALICE), mode="2026-07-28") as client:
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await client.read_resource("broken://album")
    (record,) = [r for r in await gate.audit() if r.tool == "resource:broken://album"]

    assert caught.value.code == types.INTERNAL_ERROR
    assert record.call_id in caught.value.message
    assert record.outcome == "unrecoverable"
    assert "not str, bytes or a sequence of ResourceContents" in record.detail["internal_error"]
