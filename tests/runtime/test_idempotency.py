"""Idempotency keys: one effect, one Envelope, whoever asks and however often."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from callgate import Envelope, ErrorKind, Gate, Principal, Status, Toolbox
from callgate.store import MemoryStore, SQLStore
from tests.pg import POSTGRES_URL, drop_schema

from .conftest import ALICE, GateFactory, durable_stores
from .tools import Counters, build

pytestmark = pytest.mark.anyio


async def test_fifty_concurrent_calls_with_one_key_run_once(make_gate: GateFactory) -> None:
    counters = Counters()
    results = []
    async with make_gate([build(counters)]) as gate:

        async def one() -> None:
            results.append(
                await gate.call(
                    "t.transfer", {"amount": 5, "to": "bob"}, principal=ALICE, idempotency_key="k1"
                )
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one)
        records = await gate.audit()
    assert counters.runs["transfer"] == 1
    assert len(results) == 50
    assert {r.status for r in results} == {Status.OK}
    assert {r.call_id for r in results} == {results[0].call_id}  # the same Envelope
    assert {r.model_dump_json(exclude={"replayed"}) for r in results} == {
        results[0].model_dump_json(exclude={"replayed"})
    }
    assert sum(not r.replayed for r in results) == 1
    finals = [r for r in records if r.phase == "final"]
    assert len(finals) == 50  # every caller is audited
    assert sum(1 for r in records if r.phase == "intent") == 1


async def test_same_key_later_returns_the_stored_envelope(make_gate: GateFactory) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        first = await gate.call(
            "t.transfer", {"amount": 5, "to": "bob"}, principal=ALICE, idempotency_key="k"
        )
        again = await gate.call(
            "t.transfer", {"to": "bob", "amount": 5}, principal=ALICE, idempotency_key="k"
        )
    assert counters.runs["transfer"] == 1
    assert again.replayed and again.call_id == first.call_id and again.payload == first.payload


async def test_same_key_with_other_arguments_is_refused(make_gate: GateFactory) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        await gate.call(
            "t.transfer", {"amount": 5, "to": "bob"}, principal=ALICE, idempotency_key="k"
        )
        other = await gate.call(
            "t.transfer", {"amount": 500, "to": "bob"}, principal=ALICE, idempotency_key="k"
        )
    assert other.error is not None and other.error.kind is ErrorKind.CONSTRUCTION
    assert "different request" in other.error.message_for_model
    assert counters.runs["transfer"] == 1


async def test_other_arguments_under_a_key_still_running_are_refused() -> None:
    started, release = anyio.Event(), anyio.Event()
    paid: list[int] = []
    box = Toolbox("h")

    @box.tool(scopes={"w"}, idempotent=False)
    async def pay(amount: int) -> int:
        """Pay, and hold until released."""
        paid.append(amount)
        started.set()
        await release.wait()
        return amount

    async with Gate([box], store=MemoryStore()) as gate:
        first: list[Envelope] = []

        async def pay_five() -> None:
            first.append(
                await gate.call("h.pay", {"amount": 5}, principal=ALICE, idempotency_key="k")
            )

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(pay_five)
                await started.wait()
                # Refused at once: never made to wait for, nor given, the other request's answer.
                other = await gate.call(
                    "h.pay", {"amount": 500}, principal=ALICE, idempotency_key="k"
                )
                release.set()
    assert other.error is not None and other.error.kind is ErrorKind.CONSTRUCTION
    assert "different request" in other.error.message_for_model
    assert paid == [5] and first[0].ok and first[0].payload == 5


async def test_keys_are_scoped_by_tenant(make_gate: GateFactory) -> None:
    counters = Counters()
    bob = Principal(user="bob", tenant="globex", scopes={"w"})
    async with make_gate([build(counters)]) as gate:
        await gate.call(
            "t.transfer", {"amount": 5, "to": "x"}, principal=ALICE, idempotency_key="k"
        )
        await gate.call("t.transfer", {"amount": 5, "to": "x"}, principal=bob, idempotency_key="k")
    assert counters.runs["transfer"] == 2


@durable_stores
async def test_key_survives_a_new_gate_on_the_same_store(
    make_gate: GateFactory, store_kind: str
) -> None:
    counters = Counters()
    gate = make_gate([build(counters)])
    async with gate:
        first = await gate.call(
            "t.transfer", {"amount": 5, "to": "bob"}, principal=ALICE, idempotency_key="k"
        )
    async with gate:  # reopened: a restart of the process would look the same
        again = await gate.call(
            "t.transfer", {"amount": 5, "to": "bob"}, principal=ALICE, idempotency_key="k"
        )
    assert counters.runs["transfer"] == 1 and again.call_id == first.call_id


async def test_a_transient_failure_releases_the_key(make_gate: GateFactory) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        first = await gate.call("t.flaky_write", {}, principal=ALICE, idempotency_key="k")
        second = await gate.call("t.flaky_write", {}, principal=ALICE, idempotency_key="k")
    assert first.error is not None and first.error.kind is ErrorKind.TRANSIENT
    assert not second.replayed  # it ran again: the first attempt had no effect
    assert counters.runs["flaky_write"] == 2


async def test_an_unknown_outcome_is_never_rerun_under_the_same_key(
    make_gate: GateFactory,
) -> None:
    counters = Counters()
    async with make_gate([build(counters)]) as gate:
        first = await gate.call("t.hang_write", {}, principal=ALICE, idempotency_key="k")
        second = await gate.call("t.hang_write", {}, principal=ALICE, idempotency_key="k")
    assert first.error is not None and first.error.kind is ErrorKind.UNKNOWN_OUTCOME
    assert second.replayed and second.error == first.error
    assert counters.runs["hang_write"] == 1


@durable_stores
async def test_two_replicas_on_one_store_run_the_key_once(store_kind: str, tmp_path: Path) -> None:
    """Two gates with their own in-process state share one database, like replicas."""
    counters = Counters()
    schema = f"test_rep_{uuid.uuid4().hex[:12]}"

    def store() -> SQLStore:
        if store_kind == "sqlite":
            return SQLStore(f"sqlite:///{tmp_path / 'shared.db'}")
        return SQLStore(POSTGRES_URL, schema=schema)

    results = []
    try:
        async with (
            Gate([build(counters)], store=store()) as a,
            Gate([build(counters)], store=store()) as b,
        ):

            async def one(gate: Gate) -> None:
                results.append(
                    await gate.call(
                        "t.transfer", {"amount": 7, "to": "x"}, principal=ALICE, idempotency_key="r"
                    )
                )

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for i in range(20):
                        tg.start_soon(one, a if i % 2 else b)
    finally:
        if store_kind == "postgres":
            await drop_schema(schema)
    assert counters.runs["transfer"] == 1
    assert len({r.call_id for r in results}) == 1 and len(results) == 20


async def test_staggered_arrivals_all_get_the_one_result(make_gate: GateFactory) -> None:
    counters = Counters()
    results = []
    async with make_gate([build(counters)]) as gate:

        async def one(delay: float) -> None:
            await anyio.sleep(delay)
            results.append(
                await gate.call(
                    "t.transfer", {"amount": 3, "to": "y"}, principal=ALICE, idempotency_key="s"
                )
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(120):
                    tg.start_soon(one, (i % 40) * 0.002)
    assert counters.runs["transfer"] == 1
    assert {r.status for r in results} == {Status.OK}
    assert len({r.call_id for r in results}) == 1


async def test_a_cancelled_waiter_does_not_change_what_others_get() -> None:
    counters = Counters()
    counters.started = anyio.Event()
    async with Gate([build(counters)], store=MemoryStore()) as gate:
        got = []

        async def call() -> None:
            got.append(
                await gate.call("t.slow_write", {"ms": 200}, principal=ALICE, idempotency_key="c")
            )

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)  # the owner
                await counters.started.wait()
                async with anyio.create_task_group() as doomed:
                    doomed.start_soon(call)  # a waiter, cancelled below
                    await anyio.sleep(0.01)
                    doomed.cancel_scope.cancel()
                tg.start_soon(call)  # another waiter
    assert counters.runs["slow_write"] == 1
    assert [r.status for r in got] == [Status.OK, Status.OK]
    assert {r.payload for r in got} == {"done"}
