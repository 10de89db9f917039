"""Where the time of a governed call goes: per stage, per function, per primitive.

    python benchmarks/profile_chain.py [--calls 3000] [--no-postgres] [--top 25] [--tool sync]

Three views of sequential calls of the trivial async tool (``bench.echo``; with
``--tool sync``, of ``bench.echo_sync``, which runs in a worker thread):

1. stages: wall time of each stage of ``callgate.runtime.pipeline`` and of the
   audit write, per store. The pipeline's stage tuple and record step are
   wrapped with timers in this process only (``pipeline.STAGES`` and
   ``pipeline.record`` are looked up on every call, so nothing else changes).
2. cProfile of the SQLite path: the functions with the most own time, and own
   time summed by library. cProfile sees the event loop's thread only; time
   other threads spend (the store's audit writer, aiosqlite's worker) shows up
   as the loop waiting in ``select``.
3. primitives: the building blocks of a call (uuid, datetime, pydantic models,
   hashing, validation, a SQLite round trip, ...) timed alone on this machine.

``whatif_audit.py`` then measures other ways to write the audit batch.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import pstats
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from _harness import PRINCIPAL, TOOLS, governed, machine, open_gates, postgres_unreachable
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from callgate.contract import ToolContext
from callgate.runtime import pipeline
from callgate.runtime.call import hash_json
from callgate.runtime.envelope import Decision, Envelope, Status, Timing
from callgate.runtime.policy import Policy, activation
from callgate.runtime.stages import record as record_stage
from callgate.runtime.validation import ArgumentValidator
from callgate.runtime.workers import workers
from callgate.store import AuditRecord, GroupCommitter, SQLStore
from callgate.store.sql import create_engine, normalize_url

TOOL = TOOLS["async"][0]  # --tool sync sets TOOLS["sync"][0]
WAITING = "select/epoll: the loop idle, waiting for I/O or a worker thread"
clock = time.perf_counter_ns


class Timers:
    """Wall-time samples (ns) by label."""

    def __init__(self) -> None:
        self.samples: dict[str, list[int]] = defaultdict(list)

    def wrap_async(self, label: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.samples[label].append(clock() - t0)

        return timed

    def wrap_sync(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.samples[label].append(clock() - t0)

        return timed

    def median_us(self, label: str) -> float:
        data = self.samples.get(label)
        return statistics.median(data) / 1000 if data else float("nan")

    def clear(self) -> None:
        self.samples.clear()


def instrument(timers: Timers) -> Callable[[], None]:
    """Put timers around the stages and the record step; returns the undo."""
    saved = (pipeline.STAGES, pipeline.record, record_stage.audit_record, GroupCommitter.append)
    pipeline.STAGES = tuple(
        timers.wrap_async(f"{i}. {s.__name__}", s) for i, s in enumerate(saved[0], start=1)
    )
    pipeline.record = timers.wrap_async("10. record (all)", saved[1])
    record_stage.audit_record = timers.wrap_sync("10a. build AuditRecord", saved[2])
    GroupCommitter.append = timers.wrap_async("10b. wait until durable", saved[3])  # type: ignore[method-assign]

    def undo() -> None:
        (
            pipeline.STAGES,
            pipeline.record,
            record_stage.audit_record,
            GroupCommitter.append,
        ) = saved

    return undo


async def stages_view(kinds: list[str], calls: int) -> list[str]:
    timers = {kind: Timers() for kind in kinds}
    cpu_us: dict[str, float] = {}
    async with open_gates(kinds) as subjects:
        for kind, subject in subjects.items():
            store = subject.gate.store
            store.append_audit = timers[kind].wrap_async(  # type: ignore[method-assign]
                "    store.append_audit (writer task)", store.append_audit
            )
        for subject in subjects.values():
            for i in range(200):  # warm-up, not instrumented
                await governed(subject.gate, TOOL, i)
        for kind, subject in subjects.items():
            timers[kind].clear()
            undo = instrument(timers[kind])
            cpu0 = time.process_time_ns()
            try:
                for i in range(calls):
                    t0 = clock()
                    await governed(subject.gate, TOOL, i)
                    timers[kind].samples["gate.call (total)"].append(clock() - t0)
            finally:
                undo()
            cpu_us[kind] = (time.process_time_ns() - cpu0) / calls / 1000
    labels = sorted(
        {label for t in timers.values() for label in t.samples if label[0].isdigit()},
        key=lambda s: (int(s.split(".")[0].rstrip("ab")), s),
    )
    labels += ["    store.append_audit (writer task)", "gate.call (total)"]
    header = "| step | " + " | ".join(f"{k} median µs" for k in kinds) + " |"
    rows = [header, "|" + "---|" * (len(kinds) + 1)]
    for label in labels:
        cells = " | ".join(f"{timers[k].median_us(label):,.1f}" for k in kinds)
        rows.append(f"| {label} | {cells} |")
    top_level = [lb for lb in labels if lb.split(" ")[0].rstrip(".").isdigit()]
    stage_sum = " | ".join(
        f"{sum(timers[k].median_us(lb) for lb in top_level):,.1f}" for k in kinds
    )
    rows.append(f"| sum of stages 1-10 (medians) | {stage_sum} |")
    cpu = " | ".join(f"{cpu_us[k]:,.1f}" for k in kinds)
    rows.append(f"| process CPU time per call (mean, all threads) | {cpu} |")
    return [
        f"### Per stage: wall time, {calls:,} sequential calls of {TOOL} per store",
        "",
        *rows,
        "",
        "gate.call minus the stages is the gate's own preamble (open check, Call with",
        "two uuid4 and datetime.now) plus the stage timers' own cost (~1 µs each).",
    ]


def library(filename: str) -> str:
    for marker, name in (
        ("callgate", "callgate"),
        ("sqlalchemy", "sqlalchemy"),
        ("aiosqlite", "aiosqlite"),
        ("pydantic", "pydantic"),
        ("asyncio", "asyncio"),
        ("anyio", "anyio"),
        ("jsonschema_rs", "jsonschema_rs"),
        ("json", "json"),
        ("uuid", "uuid"),
        ("threading", "threading"),
        ("selectors", "selectors"),
    ):
        if marker in filename:
            return name
    return "other"


async def cprofile_view(kind: str, calls: int, top: int) -> list[str]:
    async with open_gates([kind]) as subjects:
        gate = subjects[kind].gate
        for i in range(200):
            await governed(gate, TOOL, i)
        profiler = cProfile.Profile()
        t0 = clock()
        profiler.enable()
        for i in range(calls):
            await governed(gate, TOOL, i)
        profiler.disable()
        wall = (clock() - t0) / calls / 1000
    stats = pstats.Stats(profiler)
    by_lib: dict[str, float] = defaultdict(float)
    rows = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~":
            lib = WAITING if "poll" in func else "builtins and C methods"
        else:
            lib = library(filename)
        by_lib[lib] += tottime
        short = filename.split("site-packages/")[-1].split("/src/")[-1]
        rows.append((tottime, ncalls, cumtime, f"{short}:{line}({func})"))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    out = [
        f"### cProfile, {kind} store: {calls:,} calls, {wall:,.0f} µs per call under the profiler",
        "",
        "Own time by library (per call, under cProfile, which inflates Python-heavy code):",
        "",
        "| library | µs per call | share |",
        "|---|---:|---:|",
    ]
    for lib, seconds in sorted(by_lib.items(), key=lambda kv: -kv[1]):
        out.append(f"| {lib} | {seconds / calls * 1e6:,.1f} | {seconds / total:.0%} |")
    out += [
        "",
        f"Top {top} functions by own time:",
        "",
        "| own µs/call | calls/call | cum µs/call | function |",
        "|---:|---:|---:|---|",
    ]
    for tottime, ncalls, cumtime, label in rows[:top]:
        out.append(
            f"| {tottime / calls * 1e6:,.1f} | {ncalls / calls:,.1f} | "
            f"{cumtime / calls * 1e6:,.1f} | `{label}` |"
        )
    return out


def timeit_us(fn: Callable[[], Any], n: int = 20000) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t0) / n / 1000)
    return best


async def atimeit_us(fn: Callable[[], Awaitable[Any]], n: int = 2000) -> float:
    samples = []
    for _ in range(n):
        t0 = clock()
        await fn()
        samples.append(clock() - t0)
    return statistics.median(samples) / 1000


async def primitives_view(kinds: list[str]) -> list[str]:
    now = datetime.now(UTC)
    timing = Timing(started_at=now, duration_ms=0.1, attempts=1)
    decision = Decision(effect="allow")
    rows: list[tuple[str, float]] = []

    def add(label: str, us: float) -> None:
        rows.append((label, us))

    async with open_gates(["memory"]) as subjects:
        gate = subjects["memory"].gate
        spec = gate.registry.get(TOOL)
        assert spec is not None
        validator = ArgumentValidator(spec.input_schema)
        add("uuid.uuid4().hex", timeit_us(lambda: uuid.uuid4().hex))
        add(
            "os.urandom(16).hex() (same entropy, no UUID object)",
            timeit_us(lambda: os.urandom(16).hex()),
        )
        add("datetime.now(UTC)", timeit_us(lambda: datetime.now(UTC)))
        add(
            "Timing(...) + Decision(...) (pydantic)",
            timeit_us(
                lambda: (
                    Timing(started_at=now, duration_ms=0.1, attempts=1),
                    Decision(effect="allow"),
                )
            ),
        )
        add(
            "Envelope(...) from ready parts (pydantic)",
            timeit_us(
                lambda: Envelope(
                    tool=TOOL,
                    tool_version="1",
                    call_id="call_x",
                    trace_id="t",
                    status=Status.OK,
                    payload=1,
                    timing=timing,
                    decision=decision,
                )
            ),
        )
        add(
            "AuditRecord(...) (dataclass)",
            timeit_us(
                lambda: AuditRecord(call_id="c", phase="final", at=now, trace_id="t", tool=TOOL)
            ),
        )
        add("hash_json({'x': 1}) (json + sha256)", timeit_us(lambda: hash_json({"x": 1})))
        add("ArgumentValidator.errors({'x': 1})", timeit_us(lambda: validator.errors({"x": 1})))
        add(
            "spec.handler.prepare({'x': 1}) (pydantic)",
            timeit_us(lambda: spec.handler.prepare({"x": 1})),
        )
        add(
            "Policy().decide, no rules (variables never built)",
            timeit_us(
                lambda: Policy().decide(spec, lambda: activation(spec, {"x": 1}, PRINCIPAL, None))
            ),
        )
        add(
            "ToolContext(...) with deadline",
            timeit_us(
                lambda: ToolContext(
                    call_id="c",
                    trace_id="t",
                    tool=TOOL,
                    principal=PRINCIPAL,
                    session_id=None,
                    idempotency_key=None,
                    deadline=datetime.now(UTC) + timedelta(seconds=30),
                    attempt=1,
                )
            ),
        )

        async def timeout_block() -> None:
            # Entering and leaving is the cost measured (the execute stage pays it).
            async with asyncio.timeout(30):  # noqa: ASYNC100
                pass

        add("async with asyncio.timeout(30)", await atimeit_us(timeout_block))

        async def noop() -> None:
            return None

        add("await noop() (a coroutine call)", await atimeit_us(noop))
        add(
            "await asyncio.shield(noop()) (wraps the coroutine in a Task)",
            await atimeit_us(lambda: asyncio.shield(noop())),
        )

        async def future_roundtrip() -> None:
            fut = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(fut.set_result, None)
            await fut

        add(
            "create + await a future set by call_soon (one loop turn)",
            await atimeit_us(future_roundtrip),
        )
        limiter = anyio.CapacityLimiter(40)
        add(
            "anyio.to_thread.run_sync(no-op, limiter) (sync tools before issue 10)",
            await atimeit_us(lambda: anyio.to_thread.run_sync(int, limiter=limiter)),
        )
        add(
            "asyncio.to_thread(no-op) (a thread hop and back)",
            await atimeit_us(lambda: asyncio.to_thread(int)),
        )

        async def pool_hop() -> None:
            loop = asyncio.get_running_loop()
            done = loop.create_future()

            def job(_worker: Any) -> bool:
                loop.call_soon_threadsafe(done.set_result, None)
                return True

            workers().submit(job)
            await done

        add(
            "a hop to the loop's worker pool and back (sync tools, issue 10)",
            await atimeit_us(pool_hop),
        )
        add(
            "gate.call(bench.echo), MemoryStore (whole chain)",
            await atimeit_us(lambda: governed(gate, TOOL, 1)),
        )

    for kind in kinds:
        if kind == "memory":
            continue
        async with open_gates([kind]) as subjects:
            store = subjects[kind].gate.store
            assert isinstance(store, SQLStore)
            record = AuditRecord(call_id="c", phase="final", at=now, trace_id="t", tool=TOOL)
            add(
                f"{kind}: store.append_audit([one record]) (a write transaction)",
                await atimeit_us(lambda store=store, record=record: store.append_audit([record])),
            )
            add(
                f"{kind}: store.append_audit([50 records])",
                await atimeit_us(
                    lambda store=store, record=record: store.append_audit([record] * 50), n=300
                ),
            )
            # Engines like the store's (callgate's create_engine), and one whose pool
            # skips the rollback it issues when a connection is returned.
            engine = create_engine(store.url)
            no_reset = create_async_engine(normalize_url(store.url), pool_reset_on_return=None)
            try:
                async with engine.connect() as conn:
                    add(
                        f"{kind}: SELECT 1 on an open SQLAlchemy connection (one round trip)",
                        await atimeit_us(lambda conn=conn: conn.execute(text("SELECT 1"))),
                    )
                    if kind == "sqlite":

                        async def raw_roundtrip(conn: Any = conn) -> None:
                            raw = await conn.get_raw_connection()
                            cur = await raw.driver_connection.execute("SELECT 1")
                            await cur.close()

                        add(
                            f"{kind}: aiosqlite execute('SELECT 1') + close (2 thread hops)",
                            await atimeit_us(raw_roundtrip),
                        )
                for label, eng in (("rollback on return", engine), ("no reset", no_reset)):

                    async def checkout(eng: Any = eng) -> None:
                        async with eng.connect():
                            pass

                    add(
                        f"{kind}: engine.connect() checkout + return ({label})",
                        await atimeit_us(checkout),
                    )
            finally:
                await engine.dispose()
                await no_reset.dispose()
    width = max(len(label) for label, _ in rows)
    return [
        "### Primitives, timed alone (best of 5 loops; async ones: median)",
        "",
        "| primitive | µs |",
        "|---|---:|",
        *(f"| {label.ljust(width)} | {us:,.2f} |" for label, us in rows),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--tool", choices=["async", "sync"], default="async")
    parser.add_argument(
        "--view", choices=["stages", "cprofile", "primitives", "all"], default="all"
    )
    args = parser.parse_args()
    global TOOL
    TOOL = TOOLS[args.tool][0]
    kinds = ["memory", "sqlite"]
    if not args.no_postgres and await postgres_unreachable() is None:
        kinds.append("postgres")
    print(f"## Profile of the governed chain ({machine()})\n")
    if args.view in ("stages", "all"):
        print("\n".join(await stages_view(kinds, args.calls)), end="\n\n")
    if args.view in ("cprofile", "all"):
        print("\n".join(await cprofile_view("sqlite", args.calls, args.top)), end="\n\n")
    if args.view in ("primitives", "all"):
        print("\n".join(await primitives_view(kinds)))


if __name__ == "__main__":
    asyncio.run(main())
