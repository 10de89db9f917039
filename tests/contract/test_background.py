"""ToolContext.run_in_background: a call moves to the background only where its runner can."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from callgate import Principal
from callgate.contract import ToolContext
from callgate.contract.context import background_hook


def _context() -> ToolContext:
    return ToolContext(
        call_id="c-1",
        trace_id="t-1",
        tool="box.long",
        principal=Principal("alice"),
        session_id=None,
        idempotency_key=None,
        deadline=datetime.now(UTC),
        attempt=1,
    )


@pytest.mark.anyio
async def test_without_a_runner_that_can_the_call_stays_in_the_foreground() -> None:
    ctx = _context()
    assert await ctx.run_in_background() is False
    assert ctx.run_in_background_sync() is False


@pytest.mark.anyio
async def test_a_context_made_under_a_hook_moves_its_call_even_from_a_thread() -> None:
    moved: list[str] = []

    def hook() -> bool:
        moved.append(threading.current_thread().name)
        return True

    with background_hook(hook):
        ctx = _context()
    later = _context()  # made outside the block: no hook

    from_thread: list[bool] = []
    worker = threading.Thread(target=lambda: from_thread.append(ctx.run_in_background_sync()))
    worker.start()
    worker.join()

    assert await ctx.run_in_background() is True
    assert from_thread == [True] and len(moved) == 2
    assert await later.run_in_background() is False
