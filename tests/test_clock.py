"""One clock for whatever expires: a gate, its store and what they hand out read it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from callgate import Gate, Principal, Toolbox
from callgate.clock import SYSTEM_CLOCK, ManualClock
from callgate.contract import HandleKind, ToolContext
from callgate.store import MemoryStore, SQLStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
START = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
NOTE = HandleKind(name="note", prefix="note", ttl=timedelta(minutes=5), created_by="pad.open")


def test_a_manual_clock_moves_only_forward_and_only_when_told() -> None:
    clock = ManualClock(START)

    assert clock.now() == clock.now() == START
    assert clock.advance(minutes=5) == START + timedelta(minutes=5)
    assert clock.advance(timedelta(seconds=1)) == START + timedelta(minutes=5, seconds=1)
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(seconds=-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2026, 12, 2))


def test_a_gate_and_its_store_share_one_clock(tmp_path: Path) -> None:
    clock = ManualClock(START)
    given = MemoryStore()
    from_url = Gate(store=f"sqlite:///{tmp_path / 'c.db'}", clock=clock)

    assert Gate(store=given, clock=clock).clock is clock and given.clock is clock
    assert isinstance(from_url.store, SQLStore) and from_url.store.clock is clock
    assert Gate(store=MemoryStore()).clock is SYSTEM_CLOCK


def _pad() -> Toolbox:
    box = Toolbox("pad")

    @box.tool(destructive=False, idempotent=True, open_world=False)
    async def open(ctx: ToolContext) -> str:
        """Open a note."""
        return (await ctx.handles.create(NOTE, {"text": ""})).id

    @box.tool(read_only=True, open_world=False)
    async def read(note: str, ctx: ToolContext) -> str:
        """Read a note.

        Args:
            note: The note's id.
        """
        return str((await ctx.handles.get(NOTE, note)).data["text"])

    return box


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_handles_expire_on_the_gates_clock(kind: str, tmp_path: Path) -> None:
    clock = ManualClock(START)
    store = MemoryStore() if kind == "memory" else SQLStore(f"sqlite:///{tmp_path / 'h.db'}")
    async with Gate([_pad()], store=store, clock=clock) as gate:
        opened = await gate.call("pad.open", {}, principal=ALICE)
        clock.advance(minutes=4, seconds=59)
        fresh = await gate.call("pad.read", {"note": opened.payload}, principal=ALICE)
        clock.advance(seconds=2)
        stale = await gate.call("pad.read", {"note": opened.payload}, principal=ALICE)
        [record] = [r for r in await gate.audit(call_id=stale.call_id) if r.phase == "final"]

    assert fresh.ok and fresh.payload == ""
    assert stale.error is not None and "note" in stale.error.message_for_model
    # The audit is on the same clock.
    assert record.at == START + timedelta(minutes=5, seconds=1)
