"""One pending approval per request, however many replicas file it at once."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from callgate import Gate, Policy, Principal, Rule, Status
from callgate.store import MemoryStore, SQLStore, Store
from tests.pg import POSTGRES_URL, drop_schema

from .change_tools import Bank, build

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"bank:write"})
BIG = Policy(
    [Rule("require_approval", tools=["bank.pay"], when="args.amount > 1000", reason="big payment")]
)


async def _file_at_once(gates: list[Gate], calls: int, amount: int = 5000) -> set[str]:
    """``calls`` identical calls spread over ``gates``; the approval ids they got."""
    got: list[str] = []

    async def one(gate: Gate) -> None:
        env = await gate.call("bank.pay", {"to": "bob", "amount": amount}, principal=ALICE)
        assert env.status is Status.PENDING_APPROVAL, env
        got.append(str(env.approval.approval_id))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(one, gates[i % len(gates)])
    return set(got)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_two_replicas_file_one_pending_approval(kind: str, tmp_path: Path) -> None:
    """Two gates with their own process state share one database, like two replicas."""
    schema = f"test_filing_{uuid.uuid4().hex[:12]}"

    def store() -> SQLStore:
        if kind == "sqlite":
            return SQLStore(f"sqlite:///{tmp_path / 'shared.db'}")
        return SQLStore(POSTGRES_URL, schema=schema)

    bank = Bank()
    try:
        async with (
            Gate([build(bank)], store=store(), policy=BIG) as a,
            Gate([build(bank)], store=store(), policy=BIG) as b,
        ):
            for amount in (5001, 5002, 5003):  # the race was lost 2 times in 3 before
                ids = await _file_at_once([a, b], 20, amount)
                pending = await (await a.approvals()).list(state="pending")
                assert len(ids) == 1
                assert [r.id for r in pending] == list(ids)
                # Out of the pending list before the next round (another request).
                await (await a.approvals()).deny(
                    ids.pop(), by=Principal("carol", "acme"), reason="next round"
                )
    finally:
        if kind == "postgres":
            await drop_schema(schema)
    assert bank.sent == []


async def test_the_store_files_one_pending_approval_per_request() -> None:
    store: Store = MemoryStore()
    async with (
        Gate([build(Bank())], store=store, policy=BIG) as a,
        Gate([build(Bank())], store=store, policy=BIG) as b,
    ):
        ids = await _file_at_once([a, b], 10)
        pending = await store.list_approvals(state="pending")
    assert len(ids) == 1 and [r.id for r in pending] == list(ids)
