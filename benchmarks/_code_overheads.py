"""What running a program costs: per run, and per tool call inside it.

Not a benchmark itself: ``code_mode.py`` prints its table.

One gate over an in-memory store (``memory://``) with ``_harness``'s trivial
``bench.echo`` tool and code mode's default settings, the sandbox pool warm:

- ``run_code`` of the program ``1`` through ``Gate.call``, as is (nothing
  subtracted), against a direct ``gate.call`` of ``bench.echo`` for reference;
- a program making N calls of ``bench.echo`` against N direct ``gate.call`` of it
  (each in a session, as a program's calls are), one after another and all at
  once (``asyncio.gather`` on both sides), interleaved with the program ``1`` in
  each round (the order rotating): per call, (program - ``1`` - direct) / N;
- the sandbox alone: pydantic-monty driven as ``callgate.codemode.program``
  drives it (a future for each call, then its result), the host answering at once
  without a gate, from a pool of the same settings: per call,
  (program - ``1``) / N. What a call inside a program costs beyond that is
  callgate's host side.

The gate has callgate's default limits: every call of a program is in one
session, so the duplicate-call guard counts each (the in-memory store keeps
those counts as records arrive).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import PRINCIPAL, box, governed

from callgate import Gate
from callgate.codemode import RUN_CODE, CodeModeSettings
from callgate.codemode.sandbox import Sandbox, monty

Measure = Callable[[], Awaitable[float]]


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[94]


def figures(samples: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(samples), "p95": p95(samples)}


def programs(n: int) -> dict[str, tuple[str, int]]:
    """The programs timed, and what each must return."""
    return {
        "trivial": ("1", 1),
        "sequential": (
            f"t = 0\nfor i in range({n}):\n    t += await bench.echo(x=i)\nt",
            n * (n - 1) // 2,
        ),
        "at_once": (
            f"import asyncio\nsum(await asyncio.gather(*[bench.echo(x=i) for i in range({n})]))",
            n * (n - 1) // 2,
        ),
    }


async def _host_only(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover
    raise AssertionError("answered by the host")


class Bare:
    """The sandbox alone: a pool of code mode's settings, each call answered at once."""

    def __init__(self, settings: CodeModeSettings) -> None:
        self.sandbox = Sandbox(settings)
        self.m = monty()
        self.modules = {"bench": self.m.ExternalModule({"echo": _host_only})}

    async def run(self, code: str) -> Any:
        pool = await self.sandbox.pool()
        async with pool.checkout(
            external_modules=self.modules,
            limits=self.sandbox.limits(),
            script_name="program.py",
            os_policy={"sleep": "zero"},
        ) as session:
            await self._drive(await session.feed_start("import bench"))
            return await self._drive(await session.feed_start(code))

    async def _drive(self, snapshot: Any) -> Any:
        m = self.m
        answers: dict[int, dict[str, Any]] = {}
        while not isinstance(snapshot, m.MontyComplete):
            if isinstance(snapshot, m.AsyncFunctionSnapshot):
                if snapshot.is_os_function:
                    snapshot = await snapshot.resume_auto()
                    continue
                answers[snapshot.call_id] = {"return_value": snapshot.kwargs["x"]}
                snapshot = await snapshot.resume({"future": ...})
            elif isinstance(snapshot, m.AsyncFutureSnapshot):
                ids = snapshot.pending_call_ids
                snapshot = await snapshot.resume({i: answers.pop(i) for i in ids})
            else:
                snapshot = await snapshot.resume()
        return snapshot.output


async def overheads(runs: int, rounds: int, n: int) -> dict[str, Any]:
    """The figures (see the module docs), in µs."""
    settings = CodeModeSettings(enabled=True)
    codes = programs(n)
    bare = Bare(settings)
    async with Gate([box], store="memory://", code_mode=settings) as gate:

        def program(kind: str, *, alone: bool = False) -> Measure:
            code, want = codes[kind]

            async def measure() -> float:
                started = time.perf_counter_ns()
                if alone:
                    got = await bare.run(code)
                else:
                    envelope = await gate.call(RUN_CODE, {"code": code}, principal=PRINCIPAL)
                    if not envelope.ok:
                        raise RuntimeError(f"run_code failed: {envelope.for_model()}")
                    got = envelope.payload["result"]
                elapsed = (time.perf_counter_ns() - started) / 1000
                if got != want:
                    raise RuntimeError(f"the program {kind} returned {got!r}, not {want!r}")
                return elapsed

            return measure

        sessions = iter(range(10**9))

        def direct(count: int, *, at_once: bool = False) -> Measure:
            async def measure() -> float:
                session = f"direct:{next(sessions)}"
                started = time.perf_counter_ns()
                if at_once:
                    await _gather(gate, count, session)
                else:
                    for i in range(count):
                        await governed(gate, "bench.echo", i, session_id=session)
                return (time.perf_counter_ns() - started) / 1000

            return measure

        timed: dict[str, Measure] = {
            "program_sequential": program("sequential"),
            "direct_sequential": direct(n),
            "program_at_once": program("at_once"),
            "direct_at_once": direct(n, at_once=True),
            "program_1": program("trivial"),
            "bare_sequential": program("sequential", alone=True),
            "bare_at_once": program("at_once", alone=True),
            "bare_1": program("trivial", alone=True),
        }
        for _ in range(20):  # both pools started and warm
            for measure in timed.values():
                await measure()
        one: list[float] = []
        reference: list[float] = []
        for i in range(runs):
            pair = [(one, timed["program_1"]), (reference, direct(1))]
            for bucket, measure in pair if i % 2 else pair[::-1]:
                bucket.append(await measure())
        samples: dict[str, list[float]] = {key: [] for key in timed}
        names = list(timed)
        for round_ in range(rounds):
            shift = round_ % len(names)
            for key in names[shift:] + names[:shift]:
                samples[key].append(await timed[key]())
    await bare.sandbox.aclose()

    def per_call(program: str, direct: str | None, trivial: str) -> list[float]:
        return [
            (p - t - (samples[direct][i] if direct else 0.0)) / n
            for i, (p, t) in enumerate(zip(samples[program], samples[trivial], strict=True))
        ]

    return {
        "store": "memory://",
        "workers": settings.workers,
        "runs": runs,
        "rounds": rounds,
        "inner_calls": n,
        "run_code_1_us": figures(one),
        "direct_call_us": figures(reference),
        **{f"{key}_us": figures(values) for key, values in samples.items()},
        "per_call_sequential_us": figures(
            per_call("program_sequential", "direct_sequential", "program_1")
        ),
        "per_call_at_once_us": figures(per_call("program_at_once", "direct_at_once", "program_1")),
        "bare_per_call_sequential_us": figures(per_call("bare_sequential", None, "bare_1")),
        "bare_per_call_at_once_us": figures(per_call("bare_at_once", None, "bare_1")),
    }


async def _gather(gate: Gate, count: int, session: str) -> None:
    await asyncio.gather(
        *[governed(gate, "bench.echo", i, session_id=session) for i in range(count)]
    )


def rows(o: dict[str, Any]) -> list[list[str]]:
    """The table's rows: what, p50 (µs), p95 (µs), runs."""
    n = o["inner_calls"]

    def row(label: str, key: str, runs: int) -> list[str]:
        f = o[key]
        return [label, f"{f['p50']:,.0f}", f"{f['p95']:,.0f}", str(runs)]

    runs, rounds = o["runs"], o["rounds"]
    return [
        row("run_code of the program `1` (Gate.call, as is)", "run_code_1_us", runs),
        row("gate.call of bench.echo (for reference)", "direct_call_us", runs),
        row(
            f"run_code: {n} calls of bench.echo, one after another", "program_sequential_us", rounds
        ),
        row(f"{n} gate.call of bench.echo, one after another", "direct_sequential_us", rounds),
        row(f"run_code: {n} calls at once (asyncio.gather)", "program_at_once_us", rounds),
        row(f"{n} gate.call at once (asyncio.gather)", "direct_at_once_us", rounds),
        row("run_code of `1`, in the same rounds", "program_1_us", rounds),
        row("per inner call over gate.call, one after another", "per_call_sequential_us", rounds),
        row("per inner call over gate.call, at once", "per_call_at_once_us", rounds),
        row(
            "the sandbox alone, per call, one after another", "bare_per_call_sequential_us", rounds
        ),
        row("the sandbox alone, per call, at once", "bare_per_call_at_once_us", rounds),
        row("the sandbox alone, the program `1`", "bare_1_us", rounds),
    ]
