"""Sessions are the server's to decide: the lethal-trifecta guard holds at both protocol
versions, and no client can choose, escape or join a session with a header."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from callgate import Gate, Principal
from callgate.demo import demo_policy, toolboxes
from callgate.mcp import build_server
from callgate.store import AuditRecord, MemoryStore
from tests.mcp.serving import LEGACY, MODERN_META, answer_of, open_session, rpc, serve_app

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
ALICE = Principal(
    "alice@acme.example",
    tenant="acme",
    scopes={"notes:read", "web:read", "email:send"},
    attributes={"domain": "acme.example"},
)
# Served unprefixed (as --unprefixed ops): the names of every version of the server.
SERVED = {"unprefixed": ["ops"]}
NOTE = ("notes_read", {"note_id": "N-2"})
PAGE = ("web_fetch", {"url": "https://competitor.example/pricing"})
OUTSIDE = {"to": ["partner@example.org"], "subject": "notes", "body": "the notes"}
INSIDE = {"to": ["bob@acme.example"], "subject": "notes", "body": "the notes"}


def demo_gate() -> Gate:
    return Gate(toolboxes(), store=MemoryStore(), policy=demo_policy())


class Requester:
    """The person at the client, who would confirm anything they are asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})


def _sends(records: list[AuditRecord]) -> list[AuditRecord]:
    return [r for r in records if r.tool == "ops.send_email" and r.phase == "final"]


@pytest.mark.parametrize("mode", MODES)
async def test_private_data_and_the_web_then_email_needs_another_person(mode: str) -> None:
    # The case: at 2025-11-25 this needed another person's approval; at
    # 2026-07-28 (no session) the requester's own confirmation sent it.
    requester = Requester()
    gate = demo_gate()
    server = build_server(gate, principal=ALICE, **SERVED)
    async with gate:
        with anyio.fail_after(10):
            async with Client(server, mode=mode, elicitation_callback=requester.elicit) as mcp:
                assert not (await mcp.call_tool(*NOTE)).is_error
                assert not (await mcp.call_tool(*PAGE)).is_error
                sent = await mcp.call_tool("send_email", OUTSIDE)
        records = await gate.audit()
    assert sent.is_error and sent.meta is not None
    assert sent.meta["callgate/status"] == "pending_approval"
    assert "private data" in str(sent.content) and "untrusted content" in str(sent.content)
    # Named as this client knows the tools.
    assert "via web_fetch" in str(sent.content)
    # Four eyes: the requester is never asked to approve it themself.
    assert requester.asked == []
    [send] = _sends(records)
    assert send.decision_reason is not None and "untrusted content" in send.decision_reason


def _modern(name: str, arguments: dict[str, Any], session: str | None) -> dict[str, Any]:
    headers = {
        **LEGACY,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    if session is not None:
        headers["mcp-session-id"] = session
    body = rpc(1, "tools/call", {"name": name, "arguments": arguments, "_meta": MODERN_META})
    return {"json": body, "headers": headers}


async def test_a_stateless_client_cannot_choose_its_session_to_escape_the_guard() -> None:
    gate = demo_gate()
    async with (
        serve_app(gate, principal=ALICE, server_options=SERVED) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            # A fresh session id per call: the taints would never meet.
            for (name, arguments), forged in [(NOTE, "a"), (PAGE, "b")]:
                answer = answer_of(await http.post(url, **_modern(name, arguments, forged)))
                assert answer["result"].get("isError") is not True, answer
            sent = answer_of(
                await http.post(url, **_modern("send_email", INSIDE, "attacker-chosen"))
            )
            records = await gate.audit()
    result = sent["result"]
    assert result["isError"] is True
    assert result["_meta"]["callgate/status"] == "pending_approval"
    sessions = {r.session_id for r in records if r.phase == "final"}
    assert len(sessions) == 1
    assert sessions.isdisjoint({"a", "b", "attacker-chosen", None})


async def test_a_stateless_request_does_not_join_a_legacy_session_by_naming_it() -> None:
    gate = demo_gate()
    async with (
        serve_app(gate, principal=ALICE, server_options=SERVED) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(10):
            legacy = await open_session(http, url)
            for id_, (name, arguments) in enumerate([NOTE, PAGE], start=20):
                call = rpc(id_, "tools/call", {"name": name, "arguments": arguments})
                answer = answer_of(await http.post(url, json=call, headers=legacy))
                assert answer["result"].get("isError") is not True, answer
            session_id = legacy["mcp-session-id"]
            await http.post(url, **_modern("send_email", INSIDE, session_id))
            records = await gate.audit()
    finals = [r for r in records if r.phase == "final"]
    legacy_sessions = {r.session_id for r in finals if r.tool != "ops.send_email"}
    [send] = _sends(records)
    assert len(legacy_sessions) == 1 and None not in legacy_sessions
    # Neither the client's header nor the legacy session's id: the server's own.
    assert send.session_id not in legacy_sessions | {session_id, None}
    assert session_id not in {r.session_id for r in finals}
