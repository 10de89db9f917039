"""Code mode: the tokens and turns a program saves on multi-step tasks, and what it costs.

    cd benchmarks && ../.venv/bin/python code_mode.py [--quick] [--json FILE]
        [--campaigns 1000] [--rounds 3] [--per-turn 10] [--runs 300] [--inner-rounds 200]

1. **Tasks** (``_ads.py``, ``_ads_tasks.py``): one tenant's 1,000 ad campaigns with 30
   days of daily stats (seeded), behind an ``ads`` toolbox (accounts, campaigns and a
   performance report paged by cursor at 50 a page, one campaign's daily stats,
   pausing a campaign). Five tasks: aggregate, filter then act, join two tools, page
   to the end, summarize. Each is run in the agent loop (``Agent``, a
   ``ScriptedModel``) twice: (a) with the tools offered directly, the model
   following the plan a model would (a turn a page, independent reads side by side,
   at most ``--per-turn`` calls a turn), and (b) in code mode, the model sending one
   program to ``callgate.run_code`` and then answering. Both answers and the
   campaigns' state after are checked against the truth computed from the data.
   Per task and way: model turns, tool calls, the tokens of the tool definitions
   sent (the loop's own count: per request, times requests), of the tool results,
   their sum (what reaches the model as tools and results), what the model writes
   (calls, programs, replies), the input over the whole run (each request's
   definitions and the conversation so far: what a provider bills without
   caching), all estimated by ``callgate.agent.tools.estimate_tokens``, and the
   wall time (no model time: the scripted model answers at once). The audit is a
   SQLite file, as a deployment keeps it.
2. **Overheads** (``_code_overheads.py``), on an in-memory store (``memory://``), the
   sandbox pool warm: a ``run_code`` of the program ``1`` through ``Gate.call``
   (p50/p95, as is, nothing subtracted), and the cost of a tool call made inside a
   program over the same call made with ``gate.call`` (a program making N calls of
   a trivial read against N direct calls, interleaved; one after another and at
   once), beside the sandbox's own cost per call without a gate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _ads import TENANT, AdsData, ads_toolbox, generate
from _ads_tasks import TASKS, Answer, Planner, Task, payload
from _code_overheads import overheads
from _code_overheads import rows as overhead_rows
from _harness import load, machine, table
from agent_loop import provider_formats

from callgate import Gate, Principal
from callgate.agent import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolResults,
    UserMessage,
    call,
    reply,
)
from callgate.agent.loop import Agent, RunLimits
from callgate.agent.offer import definition_json
from callgate.agent.tools import estimate_tokens
from callgate.codemode import RUN_CODE, CodeModeSettings

PRINCIPAL = Principal("analyst@acme.example", tenant=TENANT)
MAX_TURNS = 100
"""The plans with the tools offered directly take up to 22 turns: over RunLimits'
default of 20."""
HEAVY_TOKENS = 5_000
"""A task is data-heavy when its results with the tools offered directly come to
at least this many tokens."""
TARGET_FEWER_RESULTS = 0.80
TARGET_TURNS = 3.0
TARGET_P50_MS = 5.0
TARGET_PER_CALL_US = 150.0
MODES = ("tools", "code")
LABELS = {"tools": "(a) tools", "code": "(b) run_code"}


@dataclass
class Run:
    """One task run one way, and what it cost."""

    task: str
    mode: str
    turns: int
    calls: int
    definitions: int
    results: int
    written: int
    input_total: int
    answer: Answer
    reply: str
    same: bool
    difference: str
    walls_ms: list[float] = field(default_factory=list)

    @property
    def reach(self) -> int:
        return self.definitions + self.results

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.walls_ms)


def _written(message: AssistantMessage) -> int:
    out = estimate_tokens(message.text) if message.text else 0
    return out + sum(
        estimate_tokens({"name": c.name, "arguments": dict(c.arguments)})
        for c in message.tool_calls
    )


def _tokens(message: Message) -> int:
    if isinstance(message, UserMessage):
        return estimate_tokens(message.content)
    if isinstance(message, ToolResults):
        return sum(estimate_tokens(r.content) for r in message.results)
    return _written(message)


def _request_tokens(request: ModelRequest) -> int:
    definitions = estimate_tokens([definition_json(t) for t in request.tools])
    return definitions + sum(_tokens(m) for m in request.messages)


def difference(got: Any, want: Any, where: str = "answer") -> str:
    """Where ``got`` first differs from ``want`` ("" when equal)."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want), key=str):
            found = difference(got.get(key), want.get(key), f"{where}[{key!r}]")
            if found:
                return found
        return ""
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return f"{where}: {len(got)} items, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            found = difference(g, w, f"{where}[{i}]")
            if found:
                return found
        return ""
    return "" if got == want else f"{where}: {got!r}, want {want!r}"


def code_steps(task: Task, answer: Answer, inner: list[int]) -> list[Any]:
    """The code-mode script: the program, then the reply from its result."""

    def answer_from_result(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        assert isinstance(last, ToolResults)
        [result] = last.results
        ran = payload(result.name, result.content, result.is_error)
        answer.update(ran["result"])
        inner.append(ran["calls"])
        return reply(task.text(answer))

    return [call(RUN_CODE, {"code": task.program}), answer_from_result]


async def run_task(gate: Gate, data: AdsData, task: Task, mode: str, per_turn: int) -> Run:
    """``task`` one way on a fresh copy of the data, checked against the truth."""
    data.reset()
    truth = task.truth(data)
    want_state = data.statuses()
    if task.writes:
        want_state.update(dict.fromkeys(truth["paused"], "paused"))
    answer: Answer = {}
    inner: list[int] = []
    if mode == "code":
        steps = code_steps(task, answer, inner)
    else:
        steps = [Planner(task.plain(answer, per_turn))] * MAX_TURNS
    model = ScriptedModel(steps, name=f"scripted-{mode}")
    agent = Agent(
        gate,
        model,
        principal=PRINCIPAL,
        code_mode=mode == "code",
        limits=RunLimits(max_turns=MAX_TURNS, max_tool_calls=10_000, wall_time=None),
    )
    started = time.perf_counter()
    result = await agent.run(task.prompt)
    wall_ms = (time.perf_counter() - started) * 1000
    if result.status != "completed":
        raise RuntimeError(f"{task.key} ({mode}) ended {result.status}: {result.reason}")
    offered = {t.name for t in model.requests[0].tools}
    expected = {RUN_CODE} if mode == "code" else {s.name for s in gate.tools(builtin=False)}
    assert offered == expected, f"{mode} offered {sorted(offered)}"
    found = difference(answer, truth) or difference(data.statuses(), want_state, "state")
    return Run(
        task=task.key,
        mode=mode,
        turns=result.usage.requests,
        calls=inner[0] if inner else result.usage.tool_calls,
        definitions=result.usage.tool_definition_tokens,
        results=sum(_tokens(m) for m in result.messages if isinstance(m, ToolResults)),
        written=sum(_written(m) for m in result.messages if isinstance(m, AssistantMessage)),
        input_total=sum(_request_tokens(r) for r in model.requests),
        answer=dict(answer),
        reply=result.output,
        same=not found,
        difference=found,
        walls_ms=[wall_ms],
    )


async def run_tasks(
    data: AdsData, rounds: int, per_turn: int
) -> tuple[list[Run], list[tuple[str, int, int]]]:
    """Every task both ways, ``rounds`` times (the order of the ways alternating)
    after one warm-up round; and the definition tokens a request sends per format."""
    with tempfile.TemporaryDirectory(prefix="callgate-code-bench-") as tmp:
        store = f"sqlite:///{Path(tmp) / 'bench.db'}"
        gate = Gate([ads_toolbox(data)], store=store, code_mode=CodeModeSettings(enabled=True))
        async with gate:
            runs: dict[tuple[str, str], Run] = {}
            for task in TASKS:  # warm-up: first-use costs are not the steady state
                for mode in MODES:
                    await run_task(gate, data, task, mode, per_turn)
            for round_ in range(rounds):
                for task in TASKS:
                    for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
                        run = await run_task(gate, data, task, mode, per_turn)
                        kept = runs.setdefault((task.key, mode), run)
                        if kept is not run:
                            kept.walls_ms += run.walls_ms
                            if run.same != kept.same or run.results != kept.results:
                                raise RuntimeError(f"{task.key} ({mode}) changed between rounds")
            formats = await definition_formats(gate)
    return [runs[(t.key, m)] for t in TASKS for m in MODES], formats


async def definition_formats(gate: Gate) -> list[tuple[str, int, int]]:
    """(format, tokens of the tools offered directly, of run_code with its stubs) per
    request, each provider format built by its adapter (``agent_loop.provider_formats``)."""
    offered = {}
    for mode in MODES:
        model = ScriptedModel([reply("ok")])
        await Agent(gate, model, principal=PRINCIPAL, code_mode=mode == "code").run("hi")
        offered[mode] = model.requests[0].tools
    rows = []
    for name, convert in provider_formats().items():
        try:
            rows.append(
                (
                    name,
                    estimate_tokens(convert(offered["tools"])),
                    estimate_tokens(convert(offered["code"])),
                )
            )
        except Exception as exc:  # a missing SDK: say so, keep the other rows
            rows.append((f"{name} (unavailable: {type(exc).__name__})", 0, 0))
    return rows


# -- printing -------------------------------------------------------------------------------------
def ratio(a: float, b: float) -> str:
    return f"{a / b:,.1f}x" if b else "-"


def print_tasks(
    runs: list[Run], per_turn: int, campaigns: int, rounds: int
) -> list[dict[str, Any]]:
    print(f"### Tasks: {campaigns:,} campaigns, each task both ways\n")
    rows = [
        [
            r.task,
            LABELS[r.mode],
            str(r.turns),
            str(r.calls),
            f"{r.definitions:,}",
            f"{r.results:,}",
            f"{r.reach:,}",
            f"{r.written:,}",
            f"{r.input_total:,}",
            f"{r.wall_ms:,.1f}",
            "yes" if r.same else "NO",
        ]
        for r in runs
    ]
    headers = [
        "task",
        "way",
        "model turns",
        "tool calls",
        "definitions (tokens)",
        "results (tokens)",
        "reach the model (tokens)",
        "written by the model (tokens)",
        "input over the run (tokens)",
        "wall (ms)",
        "answer and state right",
    ]
    print(table(headers, rows, numeric=frozenset(range(2, 10))))
    print(
        f"\nTokens: estimate_tokens (JSON characters / 4). definitions: the tool definitions "
        f"of every request (the loop's own count); reach the model: definitions + results; "
        f"input over the run: each request's definitions and the whole conversation so far. "
        f"(a): a turn a page, at most {per_turn} independent calls a turn; (b): the program, "
        f"then the reply (tool calls: those the program made). Wall: median of {rounds} "
        "round(s), no model time, SQLite audit."
    )
    for r in runs:
        if not r.same:
            print(f"\n{r.task} {LABELS[r.mode]}: the answer differs from the truth: {r.difference}")
    print("\n### Ratios, (a) tools / (b) run_code\n")
    out, ratio_rows = [], []
    for a, b in zip(runs[::2], runs[1::2], strict=True):
        heavy = a.results >= HEAVY_TOKENS
        fewer = 1 - b.results / a.results
        met = fewer >= TARGET_FEWER_RESULTS and a.turns / b.turns >= TARGET_TURNS
        same = a.same and b.same and not difference(a.answer, b.answer)
        out.append(
            {
                "task": a.task,
                "data_heavy": heavy,
                "results_ratio": a.results / b.results,
                "fewer_result_tokens": fewer,
                "turns_ratio": a.turns / b.turns,
                "reach_ratio": a.reach / b.reach,
                "input_ratio": a.input_total / b.input_total,
                "same_answers": same,
                "targets_met": met and same if heavy else None,
            }
        )
        ratio_rows.append(
            [
                a.task,
                "yes" if heavy else "no",
                ratio(a.results, b.results),
                f"{fewer:.1%}",
                ratio(a.turns, b.turns),
                ratio(a.reach, b.reach),
                ratio(a.input_total, b.input_total),
                "same" if same else "DIFFERENT",
                ("met" if met and same else "MISSED") if heavy else "-",
            ]
        )
    headers = [
        "task",
        "data-heavy",
        "results (a)/(b)",
        "fewer result tokens",
        "turns (a)/(b)",
        "reach (a)/(b)",
        "input over the run (a)/(b)",
        "answers",
        "targets",
    ]
    print(table(headers, ratio_rows, numeric=frozenset(range(2, 7))))
    heavy_rows = [row for row in out if row["data_heavy"]]
    verdict = "met" if heavy_rows and all(r["targets_met"] for r in heavy_rows) else "MISSED"
    print(
        f"\nTargets (issue 16), on the data-heavy tasks (results with the tools offered "
        f"directly of {HEAVY_TOKENS:,} tokens or more: {len(heavy_rows)} of {len(out)}): at "
        f"least {TARGET_FEWER_RESULTS:.0%} fewer result tokens, {TARGET_TURNS:g}x fewer model "
        f"turns, the same answers: {verdict}"
    )
    return out


def print_overheads(o: dict[str, Any]) -> None:
    print(
        f"\n### Overheads: in-memory store (memory://), the sandbox pool warm "
        f"({o['workers']} workers)\n"
    )
    print(
        table(
            ["what", "p50 (µs)", "p95 (µs)", "runs"], overhead_rows(o), numeric=frozenset({1, 2, 3})
        )
    )
    n = o["inner_calls"]
    p50_ms = o["run_code_1_us"]["p50"] / 1000
    per_call = o["per_call_sequential_us"]["p50"]
    print(
        f"\nPer inner call: (program - `1` - the same calls through gate.call) / {n}, the "
        "median of the rounds; the sandbox alone: pydantic-monty driven as code mode drives "
        "it, each call answered at once without a gate, (program - `1`) / "
        f"{n}.\n"
        f"Target: run_code p50 under {TARGET_P50_MS:g} ms: "
        f"{'met' if p50_ms < TARGET_P50_MS else 'MISSED'} ({p50_ms:.2f} ms). "
        f"Target: under {TARGET_PER_CALL_US:g} µs per inner call over gate.call: "
        f"{'met' if per_call < TARGET_PER_CALL_US else 'MISSED'} ({per_call:,.0f} µs one "
        f"after another, {o['per_call_at_once_us']['p50']:,.0f} µs at once; the sandbox "
        f"alone {o['bare_per_call_sequential_us']['p50']:,.0f} and "
        f"{o['bare_per_call_at_once_us']['p50']:,.0f} µs)."
    )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    print(f"## Code mode ({machine()})\n")
    data = generate(args.campaigns)
    settings = CodeModeSettings(enabled=True)
    print(
        f"- data: {len(data.campaigns):,} campaigns of one tenant over {len(data.accounts)} "
        f"accounts, 30 days of daily stats each (seeded); pages of 50\n"
        f"- code mode: the defaults (max_calls {settings.max_calls}, workers "
        f"{settings.workers}); RunLimits(max_turns={MAX_TURNS}): the plans of (a) may take "
        "more turns than the default 20\n"
    )
    if args.quick:
        print(
            f"--quick: {args.campaigns:,} campaigns (fewer pages, so smaller ratios) and "
            "fewer runs: a smoke test, not figures\n"
        )
    runs, formats = await run_tasks(data, args.rounds, args.per_turn)
    campaigns = len(data.campaigns)
    del data  # not on the heap the overheads' garbage collections walk
    ratios = print_tasks(runs, args.per_turn, campaigns, args.rounds)
    print("\n### Tool definitions per request, by provider format (tokens)\n")
    print(
        table(
            ["format", "(a) the 5 ads tools", "(b) run_code with their stubs", "(a)/(b)"],
            [[name, f"{a:,}", f"{b:,}", ratio(a, b)] for name, a, b in formats],
            numeric=frozenset({1, 2, 3}),
        )
    )
    o = await overheads(args.runs, args.inner_rounds, args.inner_calls)
    print_overheads(o)
    print(f"\n(benchmark took {time.perf_counter() - started:.1f} s; {load()})")
    return {
        "quick": args.quick,
        "machine": machine(),
        "campaigns": campaigns,
        "per_turn": args.per_turn,
        "rounds": args.rounds,
        "heavy_tokens": HEAVY_TOKENS,
        "tasks": [{**asdict(r), "reach": r.reach, "wall_ms": r.wall_ms} for r in runs],
        "ratios": ratios,
        "definitions": [{"format": name, "tools": a, "run_code": b} for name, a, b in formats],
        "overheads": o,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test, not figures")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--campaigns", type=int, help="campaigns (1,000; --quick 200)")
    parser.add_argument("--rounds", type=int, help="timed rounds of the tasks (3; --quick 1)")
    parser.add_argument("--per-turn", type=int, default=10, help="calls a turn at most in (a)")
    parser.add_argument("--runs", type=int, help="runs of the program `1` (300; --quick 40)")
    parser.add_argument(
        "--inner-rounds", type=int, help="rounds of N inner calls (200; --quick 10)"
    )
    parser.add_argument("--inner-calls", type=int, default=50, help="N, at most max_calls (50)")
    args = parser.parse_args()
    quick = args.quick
    args.campaigns = args.campaigns or (200 if quick else 1_000)
    args.rounds = args.rounds or (1 if quick else 3)
    args.runs = args.runs or (40 if quick else 300)
    args.inner_rounds = args.inner_rounds or (10 if quick else 200)
    report = asyncio.run(main(args))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
        print(f"Figures written to {args.json}")
