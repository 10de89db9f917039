"""Running a suite: every task through the real agent loop, N times, a few at once.

Each run gets its own gate, built from the suite's config over a fresh
in-memory store (and, for the demo tools, freshly seeded data), so runs never
see each other's approvals, idempotency records or changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from callgate.agent.loop import Agent, RunEvent
from callgate.agent.messages import ToolResults
from callgate.agent.model import Model, ScriptExhausted
from callgate.agent.tools import estimate_tokens
from callgate.config import (
    GateConfig,
    PrincipalDefaults,
    default_config,
    load_config,
    local_principal,
)
from callgate.eval.checks import MadeCall, check_run, duplicates
from callgate.eval.metrics import RunOutcome
from callgate.eval.results import EvalResult, TaskInfo
from callgate.eval.scope import run_scope
from callgate.eval.script import scripted_model
from callgate.eval.tasks import PrincipalSpec, Suite, Task

if TYPE_CHECKING:
    from callgate.agent.runs import RunLimits, RunResult
    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

__all__ = ["ModelFactory", "run_suite", "suite_config"]

ModelFactory = Callable[[Task], Model]
"""Makes the model for one run of a task (a fresh one each run)."""

STORE = "memory://"


def scripted(task: Task) -> Model:
    """The default model: the task's own script."""
    return scripted_model(task.script)


def suite_config(suite: Suite) -> GateConfig:
    """The config the suite names, else the demo config.

    Raises:
        ConfigError: the config file cannot be used.
    """
    return load_config(suite.config) if suite.config is not None else default_config()


def _defaults(base: PrincipalDefaults, *specs: PrincipalSpec | None) -> PrincipalDefaults:
    values: dict[str, Any] = {
        "user": base.user,
        "tenant": base.tenant,
        "scopes": base.scopes,
        "roles": base.roles,
        "attributes": dict(base.attributes),
    }
    for spec in specs:
        if spec is None:
            continue
        for name in ("user", "tenant", "scopes", "roles"):
            if getattr(spec, name) is not None:
                values[name] = getattr(spec, name)
        values["attributes"].update(spec.attributes)
    return PrincipalDefaults(**values)


@dataclass
class _Calls:
    """Collects the calls of a run from its events (parked ones included)."""

    made: dict[str, MadeCall]

    def __call__(self, event: RunEvent) -> None:
        call_id = str(event.data.get("call_id", ""))
        if event.kind == "call":
            args = event.data.get("arguments", {})
            self.made[call_id] = MadeCall(
                name=event.text,
                arguments=dict(args) if isinstance(args, Mapping) else {},
                status="",
            )
        elif event.kind == "result" and call_id in self.made:
            made = self.made[call_id]
            self.made[call_id] = MadeCall(
                name=made.name, arguments=made.arguments, status=str(event.data.get("status", ""))
            )


def _result_tokens(result: RunResult) -> int:
    return sum(
        estimate_tokens(r.content)
        for m in result.messages
        if isinstance(m, ToolResults)
        for r in m.results
    )


def _offered(gate: Gate, principal: Principal, check_tools: Sequence[str]) -> list[str] | None:
    """The tools the model is offered: all the principal may call (None) but the
    suite's check tools."""
    if not check_tools:
        return None
    names = [spec.name for spec in gate.tools(principal, builtin=False)]
    return [name for name in names if name not in check_tools]


async def _check_tools_exist(suite: Suite, config: GateConfig) -> None:
    """Raise when the config serves no tool of that name for a check tool."""
    if not suite.check_tools:
        return
    from callgate.errors import InvalidArgument

    async with config.build_gate(STORE) as gate:
        principal = local_principal(gate, _defaults(config.principal, suite.principal))
        names = {spec.name for spec in gate.tools(principal, builtin=False)}
    missing = [name for name in suite.check_tools if name not in names]
    if missing:
        raise InvalidArgument(
            f"suite {suite.name!r}: check_tools names {missing[0]}, which the suite's "
            "config does not serve (check its toolboxes)"
        )


async def run_task(
    task: Task,
    suite: Suite,
    config: GateConfig,
    model: Model,
    *,
    repetition: int = 0,
    limits: RunLimits | None = None,
) -> RunOutcome:
    """One run of ``task``: the loop over a fresh gate (within ``limits``, the
    loop's defaults without), then the checks."""
    with run_scope():  # what the gate's toolboxes hold for the run is let go as it ends
        return await _run_task(task, suite, config, model, repetition, limits)


async def _run_task(
    task: Task,
    suite: Suite,
    config: GateConfig,
    model: Model,
    repetition: int,
    limits: RunLimits | None,
) -> RunOutcome:
    gate = config.build_gate(STORE)
    started = time.monotonic()
    async with gate:
        principal = local_principal(
            gate, _defaults(config.principal, suite.principal, task.principal)
        )
        calls = _Calls(made={})
        agent = Agent(
            gate,
            model,
            principal=principal,
            system=suite.system,
            tools=_offered(gate, principal, suite.check_tools),
            on_event=calls,
            limits=limits,
        )
        try:
            result = await agent.run(task.prompt)
        except ScriptExhausted:
            seconds = time.monotonic() - started
            made = list(calls.made.values())
            return RunOutcome(
                task=task.id,
                repetition=repetition,
                success=False,
                status="failed",
                failures=("the scripted model ran out of steps",),
                calls=len(made),
                seconds=seconds,
                tools_called=tuple(c.name for c in made),
            )
        seconds = time.monotonic() - started
        made = list(calls.made.values())
        failures = await check_run(
            task,
            status=result.status,
            answer=result.output,
            calls=made,
            gate=gate,
            principal=principal,
            reason=result.reason,
        )
    kinds: dict[str, int] = {}
    for outcome in result.calls:
        if outcome.error_kind is not None:
            kinds[outcome.error_kind] = kinds.get(outcome.error_kind, 0) + 1
    expected = task.expect.expected_tools
    usage = result.usage
    return RunOutcome(
        task=task.id,
        repetition=repetition,
        success=not failures,
        status=result.status,
        failures=tuple(failures),
        answer=result.output,
        calls=len(made),
        errors_by_kind=kinds,
        wrong_tool_calls=sum(c.name not in expected for c in made),
        duplicate_calls=duplicates(made),
        approval_hit=any(c.status == "pending_approval" for c in made) or usage.approvals > 0,
        human_takeover=result.status == "waiting_approval",
        definition_tokens=usage.tool_definition_tokens,
        result_tokens=_result_tokens(result),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        seconds=seconds,
        tools_called=tuple(c.name for c in made),
    )


async def run_suite(
    suite: Suite,
    *,
    model: ModelFactory = scripted,
    model_name: str = "scripted",
    repeat: int = 1,
    concurrency: int = 4,
    split: str = "all",
    limits: RunLimits | None = None,
    on_done: Callable[[RunOutcome], None] | None = None,
) -> EvalResult:
    """Run every task of ``suite`` ``repeat`` times, at most ``concurrency`` at once.

    Args:
        model: makes each run's model (default: the task's script).
        model_name: how the result names the model.
        limits: what bounds each run (turns, calls, tokens, wall time); the
            agent loop's defaults without.
        on_done: called with each run's outcome as it ends (a progress bar).

    Raises:
        ConfigError: the suite's config cannot be used.
        InvalidArgument: ``repeat`` or ``concurrency`` is below 1, or a check
            tool is not among the config's tools.
    """
    from callgate.errors import InvalidArgument

    if repeat < 1 or concurrency < 1:
        raise InvalidArgument("repeat and concurrency must be at least 1")
    config = suite_config(suite)
    await _check_tools_exist(suite, config)
    limiter = anyio.CapacityLimiter(concurrency)
    outcomes: list[RunOutcome] = []
    started = time.monotonic()

    async def one(task: Task, repetition: int) -> None:
        async with limiter:
            outcome = await run_task(
                task, suite, config, model(task), repetition=repetition, limits=limits
            )
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)

    async with anyio.create_task_group() as group:
        for repetition in range(repeat):
            for task in suite.tasks:
                group.start_soon(one, task, repetition)
    return eval_result(
        suite, outcomes, model_name=model_name, repeat=repeat, split=split,
        seconds=time.monotonic() - started,
    )  # fmt: skip


def eval_result(
    suite: Suite,
    outcomes: Sequence[RunOutcome],
    *,
    model_name: str,
    repeat: int,
    split: str,
    seconds: float,
    interrupted: bool = False,
) -> EvalResult:
    """The result of ``suite``'s runs that ended (``interrupted``: not all of them),
    in the suite's task order."""
    order = {t.id: i for i, t in enumerate(suite.tasks)}
    return EvalResult(
        suite=suite.name,
        model=model_name,
        split=split,
        repeat=repeat,
        tasks=tuple(TaskInfo(id=t.id, split=t.split, tags=t.tags) for t in suite.tasks),
        runs=tuple(sorted(outcomes, key=lambda o: (order[o.task], o.repetition))),
        seconds=seconds,
        interrupted=interrupted,
    )
