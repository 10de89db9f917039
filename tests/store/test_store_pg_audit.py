"""PostgreSQL audit appends: one statement, still ordered across replicas."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from callgate.store import AuditRecord, SQLStore
from callgate.store.engine import create_engine, lock_key
from tests.pg import POSTGRES_URL, drop_schema

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def schema(anyio_backend: str) -> AsyncIterator[str]:
    name = f"test_pga_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        await drop_schema(name)


def record(call_id: str, **detail: object) -> AuditRecord:
    return AuditRecord(
        call_id=call_id,
        phase="final",
        at=datetime.now(UTC),
        trace_id="t",
        tool="orders.find",
        user="u1",
        tenant="acme",
        duration_ms=1.5,
        attempts=1,
        dropped_fields=("tenant_id",),
        detail=dict(detail),
    )


async def test_an_append_takes_no_seq_before_it_holds_the_audit_lock(schema: str) -> None:
    # seq must follow commit order across replicas: an append that waits for the
    # lock must not have drawn its sequence value yet.
    async with SQLStore(POSTGRES_URL, schema=schema) as store:
        holder = create_engine(POSTGRES_URL, schema=schema)
        try:
            async with holder.connect() as conn, conn.begin():
                key = lock_key(f"callgate.audit/{schema}")
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")
                sequence = "SELECT last_value, is_called FROM audit_seq_seq"
                before = (await conn.exec_driver_sql(sequence)).one()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(store.append_audit, [record("c1"), record("c2")])
                    with anyio.fail_after(5):
                        # The server knows when the append waits; nothing here to signal it.
                        while not await _waiting_for(conn, key):  # noqa: ASYNC110
                            await anyio.sleep(0.01)
                    assert (await conn.exec_driver_sql(sequence)).one() == before
                    await conn.commit()  # lets the append go on
        finally:
            await holder.dispose()
        records = await store.list_audit()
    assert [(r.call_id, r.seq) for r in records] == [("c1", 1), ("c2", 2)]


async def _waiting_for(conn: AsyncConnection, key: int) -> bool:
    """Whether another session waits for the advisory lock ``key``."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    waiting = await conn.exec_driver_sql(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        f" AND classid = {unsigned >> 32} AND objid = {unsigned & 0xFFFF_FFFF}"
    )
    return bool(waiting.scalar_one())


async def test_batches_from_two_replicas_keep_every_value(schema: str) -> None:
    first, second = SQLStore(POSTGRES_URL, schema=schema), SQLStore(POSTGRES_URL, schema=schema)
    async with first, second:
        async with anyio.create_task_group() as tg:
            for n in range(20):
                store = first if n % 2 else second
                batch = [record(f"{n}-{i}", n=n, text='é ✓ "quoted"') for i in range(n % 5 + 1)]
                tg.start_soon(store.append_audit, batch)
        records = await first.list_audit()
    assert len(records) == sum(n % 5 + 1 for n in range(20))
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    for r in records:
        n = int(r.call_id.split("-")[0])
        assert r.detail == {"n": n, "text": 'é ✓ "quoted"'}
        assert r.dropped_fields == ("tenant_id",) and r.at.tzinfo is not None
        assert (r.user, r.tenant, r.duration_ms, r.attempts) == ("u1", "acme", 1.5, 1)
    # Within a batch, records keep their order.
    by_batch: dict[int, list[int]] = {}
    for r in records:
        by_batch.setdefault(int(r.call_id.split("-")[0]), []).append(int(r.call_id.split("-")[1]))
    assert all(order == sorted(order) for order in by_batch.values())
