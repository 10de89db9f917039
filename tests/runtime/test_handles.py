"""Handles through the gate: state across calls, bound to its caller, gone once expired."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from callgate import ErrorKind, Principal, Status, Toolbox, ToolContext
from callgate.contract import HandleKind

from .conftest import ALICE, GateFactory

pytestmark = pytest.mark.anyio

DRAFT = HandleKind(
    name="draft", prefix="drf", ttl=timedelta(minutes=30), created_by="pad.draft_create"
)
BOB = Principal(user="bob", tenant="acme", scopes={"r", "w"})
ALICE_OF_GLOBEX = Principal(user="alice", tenant="globex", scopes={"r", "w"})


def pad() -> Toolbox:
    box = Toolbox("pad")

    @box.tool(scopes={"w"}, open_world=False, idempotent=False)
    async def draft_create(text: str, ctx: ToolContext) -> dict[str, Any]:
        """Start a draft. Drafts live 30 minutes after their last change.

        Args:
            text: The first line.
        """
        handle = await ctx.handles.create(DRAFT, {"lines": [text]})
        return {"draft": handle.id, "expires_at": handle.expires_at.isoformat()}

    @box.tool(scopes={"w"}, open_world=False, idempotent=False)
    async def draft_append(draft: str, text: str, ctx: ToolContext) -> dict[str, Any]:
        """Add a line to a draft.

        Args:
            draft: The id from pad.draft_create.
            text: The line.
        """
        handle = await ctx.handles.get(DRAFT, draft)
        updated = await ctx.handles.update(DRAFT, handle, {"lines": [*handle.data["lines"], text]})
        return {"draft": updated.id, "lines": len(updated.data["lines"])}

    @box.tool(scopes={"r"}, read_only=True, open_world=False)
    def draft_read(draft: str, ctx: ToolContext) -> dict[str, Any]:
        """Read a draft (a sync tool: it uses the _sync variants).

        Args:
            draft: The id from pad.draft_create.
        """
        handle = ctx.handles.get_sync(DRAFT, draft)
        return {"text": "\n".join(handle.data["lines"]), "version": handle.version}

    @box.tool(scopes={"w"}, open_world=False, idempotent=False)
    def draft_discard(draft: str, ctx: ToolContext) -> dict[str, Any]:
        """Throw a draft away.

        Args:
            draft: The id from pad.draft_create.
        """
        closed = ctx.handles.close_sync(DRAFT, draft)
        return {"discarded": closed.id, "lines": len(closed.data["lines"])}

    return box


async def test_a_draft_keeps_its_state_across_calls(make_gate: GateFactory) -> None:
    async with make_gate([pad()]) as gate:
        created = await gate.call("pad.draft_create", {"text": "Hello"}, principal=ALICE)
        assert created.status is Status.OK, created.error
        draft = created.payload["draft"]
        appended = await gate.call(
            "pad.draft_append", {"draft": draft, "text": "World"}, principal=ALICE
        )
        read = await gate.call("pad.draft_read", {"draft": draft}, principal=ALICE)

    assert re.fullmatch(r"drf_[A-Za-z0-9]{24}", draft)
    expires = datetime.fromisoformat(created.payload["expires_at"])
    assert timedelta(minutes=29) < expires - datetime.now(UTC) <= timedelta(minutes=30)
    assert appended.payload == {"draft": draft, "lines": 2}
    assert read.payload == {"text": "Hello\nWorld", "version": 2}


async def test_another_callers_draft_looks_exactly_like_an_unknown_one(
    make_gate: GateFactory,
) -> None:
    async with make_gate([pad()]) as gate:
        created = await gate.call("pad.draft_create", {"text": "secret plan"}, principal=ALICE)
        draft = created.payload["draft"]
        made_up = "drf_" + "x" * 24
        unknown = await gate.call("pad.draft_read", {"draft": made_up}, principal=BOB)
        answers = [
            await gate.call(tool, args, principal=who)
            for who in (BOB, ALICE_OF_GLOBEX)
            for tool, args in (
                ("pad.draft_read", {"draft": draft}),
                ("pad.draft_append", {"draft": draft, "text": "mine now"}),
                ("pad.draft_discard", {"draft": draft}),
            )
        ]
        still = await gate.call("pad.draft_read", {"draft": draft}, principal=ALICE)

    assert unknown.error is not None
    for env in answers:
        assert env.status is Status.ERROR
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert env.error.message_for_model == unknown.error.message_for_model.replace(
            made_up, draft
        )
        assert "secret plan" not in str(env.payload)
    # Nobody else's attempt changed or discarded it.
    assert still.payload == {"text": "secret plan", "version": 1}


async def test_an_expired_draft_tells_the_model_to_create_a_new_one(
    make_gate: GateFactory,
) -> None:
    async with make_gate([pad()]) as gate:
        created = await gate.call("pad.draft_create", {"text": "Hello"}, principal=ALICE)
        draft = created.payload["draft"]
        # Thirty minutes pass: the store sees the handle's expiry behind it.
        record = await gate.store.get_handle(draft)
        assert record is not None
        past = datetime.now(UTC) - timedelta(seconds=1)
        assert await gate.store.update_handle(
            draft, version=record.version, data=record.data, at=past, expires_at=past
        )
        read = await gate.call("pad.draft_read", {"draft": draft}, principal=ALICE)
        append = await gate.call(
            "pad.draft_append", {"draft": draft, "text": "late"}, principal=ALICE
        )

    for env in (read, append):
        assert env.status is Status.ERROR
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert env.error.message_for_model == (
            f"draft '{draft}' is unknown or expired. "
            "Drafts live 30 minutes after their last change."
        )
        assert env.error.next_step is not None
        assert "Create a new one with pad.draft_create" in env.error.next_step
        assert not env.error.retryable


async def test_a_discarded_draft_is_gone(make_gate: GateFactory) -> None:
    async with make_gate([pad()]) as gate:
        created = await gate.call("pad.draft_create", {"text": "Hello"}, principal=ALICE)
        draft = created.payload["draft"]
        discarded = await gate.call("pad.draft_discard", {"draft": draft}, principal=ALICE)
        again = await gate.call("pad.draft_discard", {"draft": draft}, principal=ALICE)

    assert discarded.payload == {"discarded": draft, "lines": 1}
    assert again.error is not None and again.error.kind is ErrorKind.CONSTRUCTION
    assert "unknown or expired" in again.error.message_for_model


async def test_every_use_rechecks_the_callers_scopes(make_gate: GateFactory) -> None:
    reader = Principal(user="alice", tenant="acme", scopes={"r"})
    async with make_gate([pad()]) as gate:
        created = await gate.call("pad.draft_create", {"text": "Hello"}, principal=ALICE)
        draft = created.payload["draft"]
        # The same user, now without the write scope: holding the id grants nothing.
        append = await gate.call(
            "pad.draft_append", {"draft": draft, "text": "x"}, principal=reader
        )
        read = await gate.call("pad.draft_read", {"draft": draft}, principal=reader)

    assert append.error is not None and append.error.kind is ErrorKind.PERMISSION
    assert read.payload == {"text": "Hello", "version": 1}
