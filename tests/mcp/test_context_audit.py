"""Resource reads and prompt gets are audited, and may ask the client for input.

The SDK client in memory against ``build_server``; the audit is read back from
the gate's store (real SQLite, and PostgreSQL where the machine has it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.context import ClientRequestContext
from typer.testing import CliRunner

from callgate import Gate, Principal, Toolbox
from callgate.cli.app import app
from callgate.contract import ToolContext
from callgate.mcp import build_server
from callgate.store import AuditRecord, SQLStore
from tests.conformance.fixture import CONTEXT_QUESTION, context_toolboxes
from tests.mcp.test_resources_prompts import notes_toolbox
from tests.pg import POSTGRES_URL, drop_schema

MODES = ["legacy", "2026-07-28"]
ALICE = Principal("alice", tenant="acme")
FORM = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
FIXTURE_PROMPT = "test_input_required_result_prompt"


def asking_toolbox() -> Toolbox:
    """Prompts and a resource that ask the client, as a user would write them."""
    box = Toolbox("asking")

    @box.prompt()
    async def brainstorm(audience: str, ctx: ToolContext) -> str:
        """Brainstorm on a topic the user picks.

        Args:
            audience: Who the ideas are for.
        """
        answer = await ctx.elicit("Which topic?", FORM, key="topic")
        return f"Ideas about {(answer.content or {}).get('topic')} for {audience}."

    @box.prompt()
    def sync_brainstorm(ctx: ToolContext) -> str:
        """The same from a sync function (its worker thread)."""
        answer = ctx.elicit_sync("Which topic?", FORM, key="topic")
        return f"Ideas about {(answer.content or {}).get('topic')}."

    @box.prompt()
    def broken() -> str:
        raise RuntimeError("db password is hunter2")

    @box.resource("workspace://roots")
    async def roots(ctx: ToolContext) -> str:
        """The client's roots, one per line."""
        return "\n".join(root.uri for root in await ctx.list_roots())

    return box


class User:
    """The client's side: answers every form with ``topic``, exposes one root."""

    def __init__(self, topic: str = "tides") -> None:
        self.topic = topic
        self.asked: list[str] = []

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params.message)
        fields = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content=dict.fromkeys(fields, self.topic))

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work"}]})


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    boxes = [notes_toolbox(), asking_toolbox(), *context_toolboxes()]
    async with Gate(boxes, store="memory://") as gate:
        yield gate


def connect(gate: Gate, mode: str, user: User | None = None) -> Client:
    server = build_server(gate, principal=ALICE, session_id="conv-1")
    if user is None:
        return Client(server, mode=mode)
    return Client(
        server, mode=mode, elicitation_callback=user.elicit, list_roots_callback=user.roots
    )


async def _error(call: Awaitable[object]) -> MCPError:
    with anyio.fail_after(5), pytest.raises(MCPError) as caught:
        await call
    return caught.value


def _text(result: types.GetPromptResult) -> str:
    content = result.messages[0].content
    assert isinstance(content, types.TextContent)
    return content.text


async def _audit(gate: Gate) -> dict[str, AuditRecord]:
    return {record.tool: record for record in await gate.audit()}


# the audit trail ----------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def sql_gate(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Gate]:
    if request.param == "sqlite":
        store = SQLStore(f"sqlite:///{tmp_path / 'audit.db'}")
        async with Gate([notes_toolbox()], store=store) as gate:
            yield gate
        return
    schema = f"test_mcp_{uuid.uuid4().hex[:12]}"
    try:
        async with Gate([notes_toolbox()], store=SQLStore(POSTGRES_URL, schema=schema)) as gate:
            yield gate
    finally:
        await drop_schema(schema)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_read_and_get_is_audited_before_it_is_answered(
    sql_gate: Gate, mode: str
) -> None:
    async with connect(sql_gate, mode) as mcp:
        with anyio.fail_after(5):
            note = await mcp.read_resource("notes://n1")
            # The record is durable once the answer arrives: read it back right away.
            after_read = [r.tool for r in await sql_gate.audit()]
            review = await mcp.get_prompt("review", {"note_id": "n1", "tone": "blunt"})
            again = await mcp.get_prompt("review", {"tone": "blunt", "note_id": "n1"})
        await _error(mcp.read_resource("notes://n9"))
        await _error(mcp.get_prompt("no_such_prompt"))
    records = await sql_gate.audit()

    assert after_read == ["resource:notes://n1"]
    assert [r.tool for r in records] == [
        "resource:notes://n1",
        "prompt:review",
        "prompt:review",
        "resource:notes://n9",
        "prompt:no_such_prompt",
    ]
    read, get, get_again, missing_note, missing_prompt = records
    assert note.meta is not None and note.meta["callgate/callId"] == read.call_id
    assert review.meta is not None and review.meta["callgate/callId"] == get.call_id
    for record in records:
        assert (record.user, record.tenant, record.session_id) == ("alice", "acme", "conv-1")
        assert (record.phase, record.risk) == ("final", "read")
        assert record.duration_ms is not None and record.duration_ms >= 0
    assert (read.outcome, read.decision) == ("ok", "allow")
    assert read.detail == {"toolbox": "notes", "resource": "notes://{note_id}"}
    assert get.outcome == "ok" and get.detail == {"toolbox": "notes"}
    # The same arguments in another order: the same hash; other arguments: another.
    assert get.args_hash == get_again.args_hash != read.args_hash
    # The template matched, but the function found no such note.
    assert (missing_note.outcome, missing_note.status) == ("construction", "error")
    assert (missing_prompt.outcome, missing_prompt.decision) == ("construction", None)
    assert _text(again) == "Review note n1, bluntly."


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_refused_read_is_audited_as_refused_but_looks_missing(
    gate: Gate, mode: str
) -> None:
    async with connect(gate, mode) as mcp:
        hidden = await _error(mcp.read_resource("notes://admin/secret"))
        unknown = await _error(mcp.read_resource("notes://admin/nothing"))
        hidden_prompt = await _error(mcp.get_prompt("audit_all"))
        unknown_prompt = await _error(mcp.get_prompt("audit_none"))
    audit = await _audit(gate)

    # Nothing in the answer tells the client that the secret exists.
    assert (hidden.code, unknown.code) == (types.INVALID_PARAMS, types.INVALID_PARAMS)
    assert hidden.message == "Resource not found: notes://admin/secret"
    assert hidden.data == {"uri": "notes://admin/secret"}
    assert hidden_prompt.message == "Prompt not found: audit_all"
    assert hidden_prompt.code == unknown_prompt.code
    # The operator sees what happened.
    secret = audit["resource:notes://admin/secret"]
    assert (secret.outcome, secret.decision) == ("permission", "deny")
    assert secret.decision_reason == "not visible to this principal (scopes or tenant)"
    assert audit["prompt:audit_all"].outcome == "permission"
    assert audit["resource:notes://admin/nothing"].outcome == "construction"
    assert audit["prompt:audit_none"].outcome == "construction"


@pytest.mark.anyio
async def test_a_failing_prompt_is_audited_and_tells_the_client_no_internals(gate: Gate) -> None:
    async with connect(gate, "2026-07-28") as mcp:
        error = await _error(mcp.get_prompt("broken"))
    record = (await _audit(gate))["prompt:broken"]

    assert error.code == types.INTERNAL_ERROR
    assert "hunter2" not in error.message
    assert record.call_id in error.message
    assert record.outcome == "unrecoverable"
    assert "hunter2" in record.detail["internal_error"]  # operators only


def test_callgate_audit_shows_reads_by_uri_and_prompt_name(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"

    async def serve_some_reads() -> None:
        async with Gate([notes_toolbox()], store=store) as gate, connect(gate, "legacy") as mcp:
            await mcp.read_resource("notes://n2")
            await mcp.get_prompt("review", {"note_id": "n2"})
            await _error(mcp.read_resource("notes://admin/secret"))

    anyio.run(serve_some_reads)
    result = CliRunner().invoke(app, ["audit", "--store", store], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "alice (acme)" in line]
    assert len(rows) == 3
    assert "resource:notes://n2" in rows[0] and " ok " in rows[0]
    assert "prompt:review" in rows[1]
    assert "resource:notes://admin/secret" in rows[2]
    assert "deny" in rows[2] and "permission" in rows[2]
    refused = json.loads(CliRunner().invoke(app, ["audit", "--store", store, "--json"]).stdout)[-1]
    one = CliRunner().invoke(app, ["audit", "--store", store, "--call", refused["call_id"]])
    fields = [line.split() for line in one.stdout.splitlines()]
    assert ["tool", "resource:notes://admin/secret"] in fields
    assert "not visible to this principal (scopes or tenant)" in one.stdout


# asking the client ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prompt", ["brainstorm", "sync_brainstorm"])
async def test_a_prompt_asks_the_user_before_it_renders(gate: Gate, mode: str, prompt: str) -> None:
    user = User("tides")
    async with connect(gate, mode, user) as mcp:
        with anyio.fail_after(5):
            result = await mcp.get_prompt(prompt, {"audience": "sailors"})
    records = [r for r in await gate.audit() if r.tool == f"prompt:{prompt}"]

    assert _text(result).startswith("Ideas about tides")
    assert user.asked == ["Which topic?"]
    if mode == "legacy":  # asked within the one request
        assert [r.outcome for r in records] == ["ok"]
    else:  # one round to ask, one with the answer
        assert [r.outcome for r in records] == ["pending_input", "ok"]
        assert records[0].detail["asked"] == ["topic"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_may_ask_the_client_too(gate: Gate, mode: str) -> None:
    async with connect(gate, mode, User()) as mcp:
        with anyio.fail_after(5):
            (contents,) = (await mcp.read_resource("workspace://roots")).contents

    assert isinstance(contents, types.TextResourceContents)
    assert contents.text == "file:///work"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_without_elicitation_the_prompt_names_the_missing_capability(
    gate: Gate, mode: str
) -> None:
    async with connect(gate, mode) as mcp:
        error = await _error(mcp.get_prompt("brainstorm", {"audience": "sailors"}))

    assert error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"elicitation": {}}}
    assert (await _audit(gate))["prompt:brainstorm"].outcome == "construction"


async def _first_round(mcp: Client, **arguments: str) -> types.InputRequiredResult:
    with anyio.fail_after(5):
        result = await mcp.session.get_prompt(
            FIXTURE_PROMPT, arguments or None, allow_input_required=True
        )
    assert isinstance(result, types.InputRequiredResult)
    return result


def _answer(context: str) -> dict[str, Any]:
    return {"user_context": types.ElicitResult(action="accept", content={"context": context})}


@pytest.mark.anyio
async def test_the_conformance_prompt_asks_in_input_required_and_renders_on_retry(
    gate: Gate,
) -> None:
    async with connect(gate, "2026-07-28", User()) as mcp:
        first = await _first_round(mcp)
        with anyio.fail_after(5):
            done = await mcp.session.get_prompt(
                FIXTURE_PROMPT,
                input_responses=_answer("test context"),
                request_state=first.request_state,
                allow_input_required=True,
            )

    assert first.input_requests is not None
    request = first.input_requests["user_context"]
    assert isinstance(request, types.ElicitRequest)
    assert request.params.message == CONTEXT_QUESTION
    assert isinstance(done, types.GetPromptResult)
    assert _text(done) == "Answer with this context in mind: test context"


@pytest.mark.anyio
async def test_a_tampered_or_replayed_prompt_state_is_refused(gate: Gate) -> None:
    async with connect(gate, "2026-07-28", User()) as mcp:
        first = await _first_round(mcp)
        state = first.request_state
        assert state is not None

        async def retry(with_state: str) -> Any:
            return await mcp.session.get_prompt(
                FIXTURE_PROMPT,
                input_responses=_answer("x"),
                request_state=with_state,
                allow_input_required=True,
            )

        tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        refused = [await _error(retry(bad)) for bad in (tampered, state + "x", "v1.garbage")]
        with anyio.fail_after(5):
            assert isinstance(await retry(state), types.GetPromptResult)
        replayed = await _error(retry(state))

    assert {error.code for error in refused} == {types.INVALID_PARAMS}
    assert replayed.code == types.INVALID_PARAMS
    outcomes = [r.outcome for r in await gate.audit() if r.tool == f"prompt:{FIXTURE_PROMPT}"]
    # The SDK's boundary refuses a broken seal before the prompt is looked up; a
    # replay passes the seal and is refused (and audited) by callgate.
    assert outcomes == ["pending_input", "ok", "construction"]
