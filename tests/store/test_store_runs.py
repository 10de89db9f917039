"""Agent runs in the store: saved, replaced by the next save, read back whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from callgate.store import Store
from callgate.store.base import RunRecord

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_a_run_is_saved_replaced_and_read_back(store: Store) -> None:
    first = RunRecord(
        id="run-1",
        user="alice",
        tenant="acme",
        status="running",
        created_at=NOW,
        updated_at=NOW,
        state={"messages": [{"role": "user", "content": "hi"}], "turns": 0},
        trace=[{"type": "model_request", "turn": 1}],
    )
    await store.save_run(first)
    later = RunRecord(
        id="run-1",
        user="alice",
        tenant="acme",
        status="waiting_approval",
        created_at=NOW + timedelta(hours=1),  # never changes once saved
        updated_at=NOW + timedelta(seconds=5),
        state={"messages": [], "pending": ["call_1"], "nested": {"x": [1, None, "ü"]}},
        trace=[{"type": "model_request"}, {"type": "tool_call", "call_id": "call_1"}],
    )
    await store.save_run(later)

    got = await store.get_run("run-1")

    assert got is not None
    assert got.status == "waiting_approval" and got.created_at == NOW
    assert got.updated_at == NOW + timedelta(seconds=5)
    assert got.state == later.state and got.trace == later.trace
    assert await store.get_run("run-2") is None
