"""A proxied resource read answers with every content the upstream gave, as an SDK
client sees it through the gateway: each at its ``upstream+uri``, with its own MIME
type, text and blob alike, in order (tests/gateway/stub_server.py's ``stub://bundle``
and ``stub://empty``; server-everything's resources in the slow test)."""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from callgate import Gate, Principal
from callgate.config import load_config
from callgate.gateway import upstream_toolboxes
from callgate.gateway.proxy import UpstreamToolbox
from callgate.mcp import build_server
from callgate.store import SQLStore

from .upstreams import Servers, everything, servers_fixture, write_config  # noqa: F401

STUB = Path(__file__).with_name("stub_server.py")
ALICE = Principal("alice", tenant="acme")
README = "# The bundle\n\nTwo files.\n"
LOGO = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
"""What the stub's bundle holds (tests/gateway/stub_server.py)."""

pytestmark = pytest.mark.anyio

GateOf = Callable[..., Any]


@pytest.fixture
def gate_of(tmp_path: Path) -> GateOf:
    @asynccontextmanager
    async def make(extra: str = "", environ: dict[str, str] | None = None) -> AsyncIterator[Gate]:
        path = tmp_path / f"gw-{uuid.uuid4().hex[:6]}.toml"
        path.write_text(
            f'[[upstreams]]\nname = "stub"\ncommand = "{sys.executable}"\n'
            f'args = ["{STUB}"]\nstartup_wait = 20\n{extra}\n',
            encoding="utf-8",
        )
        cfg = load_config(path)
        boxes = upstream_toolboxes(cfg.upstreams, cfg.label, environ=environ)
        async with Gate(boxes, store=SQLStore(f"sqlite:///{tmp_path / 'gw.db'}")) as gate:
            yield gate

    return make


async def read(gate: Gate, uri: str, mode: str = "legacy") -> types.ReadResourceResult:
    async with Client(build_server(gate, principal=ALICE), mode=mode) as client:
        with anyio.fail_after(10):
            return await client.read_resource(uri)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])  # the gateway's client
@pytest.mark.parametrize(
    ("protocol", "upstream_at"),  # the gateway to the upstream
    [("2025-11-25", "2025-11-25"), ("auto", "2026-07-28")],
)
async def test_a_read_answers_with_every_content_each_at_its_gateway_uri(
    gate_of: GateOf, protocol: str, upstream_at: str, mode: str
) -> None:
    async with gate_of(f'protocol = "{protocol}"') as gate:
        (stub,) = gate.upstreams()
        assert isinstance(stub, UpstreamToolbox)
        assert stub.connection.stats.protocol == upstream_at
        result = await read(gate, "stub+stub://bundle", mode)
        records = [r for r in await gate.audit() if r.tool == "resource:stub+stub://bundle"]

    text, blob = result.contents
    assert isinstance(text, types.TextResourceContents)
    assert (text.uri, text.mime_type) == ("stub+stub://bundle/readme.md", "text/markdown")
    assert text.text == README + "Signed: nobody\n"
    assert isinstance(blob, types.BlobResourceContents)
    assert (blob.uri, blob.mime_type) == ("stub+stub://bundle/logo.png", "image/png")
    assert base64.b64decode(blob.blob) == LOGO
    # One read, audited as one, whatever it held.
    assert [r.outcome for r in records] == ["ok"]


async def test_each_content_can_be_read_again_through_the_gateway(gate_of: GateOf) -> None:
    async with gate_of() as gate:
        (bundle_text, bundle_blob) = (await read(gate, "stub+stub://bundle")).contents
        (text,) = (await read(gate, bundle_text.uri)).contents
        (blob,) = (await read(gate, bundle_blob.uri)).contents

    assert isinstance(text, types.TextResourceContents) and text.text == README
    assert text.uri == "stub+stub://bundle/readme.md"
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob) == LOGO


async def test_a_read_with_no_contents_stays_empty(gate_of: GateOf) -> None:
    async with gate_of() as gate:
        result = await read(gate, "stub+stub://empty")
        records = [r for r in await gate.audit() if r.tool == "resource:stub+stub://empty"]

    assert result.contents == []
    assert [r.outcome for r in records] == ["ok"]


async def test_a_secret_in_a_content_is_scrubbed_and_the_others_are_kept(
    gate_of: GateOf,
) -> None:
    extra = 'env = { STUB_SIGNATURE = { env = "GW_SIGNATURE" } }'
    async with gate_of(extra, environ={"GW_SIGNATURE": "sig-7f3a-private"}) as gate:
        text, blob = (await read(gate, "stub+stub://bundle")).contents

    assert isinstance(text, types.TextResourceContents)
    assert text.text == README + "Signed: [secret]\n"
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob) == LOGO


@pytest.mark.slow
async def test_a_real_upstreams_text_and_blob_resources(servers: Servers, tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, everything(servers)))
    async with config.build_gate(f"sqlite:///{tmp_path / 'gateway.db'}") as gate:
        doc = "everything+demo://resource/static/document/architecture.md"
        (text,) = (await read(gate, doc)).contents
        (blob,) = (
            await read(gate, "everything+demo://resource/dynamic/blob/7", "2026-07-28")
        ).contents

    assert isinstance(text, types.TextResourceContents)
    assert (text.uri, text.mime_type) == (doc, "text/markdown")
    assert text.text == (Path(servers.everything).parent / "docs" / "architecture.md").read_text()
    assert isinstance(blob, types.BlobResourceContents)
    assert blob.uri == "everything+demo://resource/dynamic/blob/7"
    assert base64.b64decode(blob.blob).startswith(b"Resource 7: This is a base64 blob")
