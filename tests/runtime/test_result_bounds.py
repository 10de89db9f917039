"""Results over Limits.max_result_bytes are neither kept nor shown; a write still says it ran."""

from __future__ import annotations

from typing import Any

import pytest

from callgate import ErrorKind, Gate, Limits, Principal, Status, Toolbox
from callgate.store import MemoryStore, StoredResult

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"r", "w"})
LIMITS = Limits(max_result_bytes=100_000, max_result_tokens=1_000)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.kept: list[str] = []

    async def put_result(self, result: StoredResult) -> None:
        self.kept.append(result.ref)
        await super().put_result(result)


def _box(done: list[str]) -> Toolbox:
    box = Toolbox("big")

    @box.tool(scopes={"r"}, read_only=True)
    def export(rows: int) -> list[dict[str, Any]]:
        """Export rows."""
        return [{"i": i, "text": "x" * 100} for i in range(rows)]

    @box.tool(scopes={"w"}, idempotent=False)
    def rebuild(rows: int) -> list[dict[str, Any]]:
        """Rebuild the index; returns every row it touched."""
        done.append("rebuilt")
        return [{"i": i, "text": "x" * 100} for i in range(rows)]

    return box


async def test_a_read_over_the_limit_is_refused_and_nothing_is_kept() -> None:
    store = CountingStore()
    async with Gate([_box([])], store=store, limits=LIMITS) as gate:
        env = await gate.call("big.export", {"rows": 5_000}, principal=ALICE)
        records = await gate.audit(call_id=env.call_id)
    assert env.status is Status.ERROR and env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION and not env.error.retryable
    message = env.error.message_for_model
    assert "too large" in message and "100,000" in message
    assert env.payload is None and env.raw_ref is None
    assert store.kept == []  # not spilled to the store either
    assert records[-1].detail["result_bytes"] > 100_000


async def test_a_write_over_the_limit_says_the_action_was_carried_out() -> None:
    done: list[str] = []
    async with Gate([_box(done)], store=MemoryStore(), limits=LIMITS) as gate:
        env = await gate.call("big.rebuild", {"rows": 5_000}, principal=ALICE, idempotency_key="r")
        again = await gate.call(
            "big.rebuild", {"rows": 5_000}, principal=ALICE, idempotency_key="r"
        )
    assert env.error is not None and env.error.kind is ErrorKind.UNRECOVERABLE
    assert not env.error.retryable
    assert "was carried out" in env.error.message_for_model
    assert "Do not call" in (env.error.next_step or "")
    assert done == ["rebuilt"]  # and the same key never runs it again
    assert again.replayed and again.error == env.error


async def test_results_under_the_limit_are_shaped_as_before() -> None:
    store = CountingStore()
    async with Gate([_box([])], store=store, limits=LIMITS) as gate:
        env = await gate.call("big.export", {"rows": 500}, principal=ALICE)
    assert env.ok and env.truncated is not None and env.raw_ref is not None
    assert len(store.kept) == 1


def test_the_default_limit_is_a_few_megabytes() -> None:
    assert 1_000_000 <= Limits().max_result_bytes <= 16_000_000
