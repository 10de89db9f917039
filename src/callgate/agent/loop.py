"""The agent loop: the model proposes, the governed chain disposes, until it is done.

One :class:`Agent` runs conversations of one principal with one model over the
gate's tools. A turn: the model gets the messages and the tool definitions; if
it answers in text, the run is complete; if it proposes tool calls, every one of
them goes through :meth:`Gate.call` (validated, authorized, decided by policy,
executed, audited), and all their results go back in one message, each paired
with its call's id, in the model's order.

- Scheduling by risk: consecutive read-only calls of a turn run concurrently;
  any other call runs alone, in the order the model gave (``RunLimits.concurrent_reads``
  turns concurrency off).
- Limits (:class:`RunLimits`): turns, tool calls, model tokens and active wall
  time. Hitting one stops the run with a reason; nothing loops forever.
- A call that needs a human's approval pauses the run: the calls after it in the
  turn wait too, and the run's state (messages, the turn's results so far, the
  calls still to make) is saved in the gate's store (``waiting_approval``).
  :meth:`Agent.resume` continues it, in any process, once the approval is
  decided. Only the calls without a result are made then, and every write carries
  an idempotency key made of the run, the turn and the call's id, so even two
  processes resuming the same run cannot make a write twice.
- A forced tool (``tool_choice=ForcedTool(...)``, e.g. a ``record_invoice`` tool
  for structured extraction) ends the run after that tool's call: the result is
  in :attr:`RunResult.calls`.
- Every run keeps a trace in the store: each model request (what was sent), each
  response (the provider's JSON), each call with its Envelope.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import anyio

from callgate import access
from callgate.agent.messages import (
    AssistantMessage,
    ForcedTool,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolChoice,
    ToolDef,
    ToolResults,
    UserMessage,
    call_ids,
    message_to_json,
    unique_call_ids,
)
from callgate.agent.model import Model, ModelError
from callgate.agent.names import NameRule, ProviderNames
from callgate.agent.offer import code_mode_defs, definition_json, described, usable_builtins
from callgate.agent.runs import (
    CallOutcome,
    EventKind,
    RunEvent,
    RunLimits,
    RunResult,
    RunState,
    RunUsage,
    add_count,
    call_json,
    cut_refused,
)
from callgate.agent.tools import estimate_tokens, result_for, tool_defs
from callgate.codemode.tool import RUN_CODE
from callgate.contract import FULL_NAMES, Principal, RiskTier, ToolNames
from callgate.discovery.meta import meta_tools
from callgate.discovery.settings import DiscoveryMode
from callgate.errors import ErrorKind
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.gate import Gate
from callgate.runtime.suggest import did_you_mean
from callgate.store.base import RunRecord, RunStatus
from callgate.tracing.agent import RunSpan, agent_run, model_turn

__all__ = ["Agent", "CallOutcome", "RunEvent", "RunLimits", "RunResult", "RunUsage"]


class _Stop(Exception):
    def __init__(self, status: RunStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _ending(response: ModelResponse, limits: RunLimits) -> tuple[RunStatus, str]:
    """How a run ends on an answer without tool calls: only a text answer the
    model finished is a success; an empty, cut-off or refused one is not."""
    stop = response.stop_reason
    if stop == "max_tokens":
        return "stopped", (
            f"the answer was cut off at the output token limit ({limits.max_tokens_per_request} "
            "tokens a request): raise it (RunLimits.max_tokens_per_request, "
            "callgate run --max-output-tokens)"
        )
    if stop == "refusal":
        return "failed", "the model refused to answer"
    if stop == "tool_use":
        return "failed", "the model stopped to call a tool but sent no call callgate can make"
    if not response.message.text.strip():
        return "failed", f"the model's answer was empty (stop reason: {stop})"
    if stop != "end_turn":
        return "failed", f"the model stopped for a reason callgate does not know ({stop})"
    return "completed", "the model answered"


class Agent:
    """Runs conversations of ``principal`` with ``model`` over ``gate``'s tools.

    Args:
        gate: every call goes through it; runs are kept in its store.
        model: the model (a provider adapter, or a :class:`ScriptedModel`).
        principal: on whose behalf the calls are made.
        system: the system prompt.
        tools: the tool names to offer (default: every tool the principal may
            call); the model may then call only these (and callgate's own it
            is offered): any other name is an unknown tool to it.
        tool_choice: passed to the model on every request (a :class:`ForcedTool`
            ends the run after that tool's call).
        limits: see :class:`RunLimits`.
        strict: ask providers to constrain arguments to the schemas.
        temperature: the sampling temperature sent with every request (None: the
            provider's default). 0 makes a small local model far less erratic.
        on_event: called with each :class:`RunEvent` as the run goes.
        discovery: ``direct`` offers every tool, ``search`` the meta-tools
            (``callgate.search_tools``, ``describe_tools``, ``call_tool``; see
            :mod:`callgate.discovery`), ``auto`` (the gate's ``[discovery]``
            setting, by default) picks by the number of tools and the share of
            ``context_window`` their definitions would take. With ``tools``
            given, those are offered directly.
        context_window: the model's context window in tokens (None: the gate's
            ``[discovery] context_window``).
        code_mode: offer ``callgate.run_code`` (with the functions a program may
            call) instead of the tools: the model writes a program, every call
            in it governed (see :mod:`callgate.codemode`). The gate must run
            programs (``Gate(code_mode=...)``).

    Raises:
        ValueError: a name in ``tools`` is not a tool the principal may call, or
            ``code_mode`` with a gate that does not run programs.
    """

    def __init__(
        self,
        gate: Gate,
        model: Model,
        *,
        principal: Principal,
        system: str | None = None,
        tools: Iterable[str] | None = None,
        tool_choice: ToolChoice = "auto",
        limits: RunLimits | None = None,
        strict: bool = False,
        temperature: float | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        discovery: DiscoveryMode | None = None,
        context_window: int | None = None,
        code_mode: bool = False,
    ) -> None:
        if code_mode and gate.sandbox is None:
            code_mode_defs(gate, principal, builtins=[])  # raises, saying what to do
        self.gate = gate
        self.model = model
        self.principal = principal
        self.system = system
        self.tool_choice = tool_choice
        self.limits = limits or RunLimits()
        self._tool_names = list(tools) if tools is not None else None
        self._strict = strict
        self.temperature = temperature
        self._on_event = on_event
        self._discovery = discovery
        self._context_window = context_window
        self._code_mode = code_mode

    def _tools(self, run: RunState) -> tuple[ToolDef, ...]:
        # Recomputed per request: toolboxes may change, scopes are checked anyway.
        shown = self._names(run)
        if self._code_mode:
            return code_mode_defs(
                self.gate,
                self.principal,
                strict=self._strict,
                shown=shown,
                builtins=usable_builtins(run),
            )
        direct = tool_defs(
            self.gate,
            self.principal,
            names=self._tool_names,
            strict=self._strict,
            shown=shown,
            builtins=usable_builtins(run),
        )
        if self._tool_names is not None or self.disclosure(direct) == "direct":
            return direct
        discovery = self.gate.discovery
        named = [spec.name for spec in discovery.pinned(self.principal)]
        if discovery.settings.expose_described:
            named += [shown.full(n) or n for n in described(run)]
        offered = {spec.name for spec in self.gate.tools(self.principal, builtin=False)}
        return tool_defs(
            self.gate,
            self.principal,
            names=list(dict.fromkeys(name for name in named if name in offered)),
            strict=self._strict,
            shown=shown,
            builtins=[*meta_tools(discovery), *usable_builtins(run)],
        )

    def disclosure(self, definitions: Sequence[ToolDef]) -> Literal["direct", "search"]:
        """Whether the model is offered ``definitions`` (every tool) or the meta-tools."""
        return self.gate.discovery.settings.choose(
            tools=len(definitions),
            tokens=estimate_tokens([definition_json(d) for d in definitions]),
            requested=self._discovery,
            context_window=self._context_window,
        )

    def _names(self, run: RunState) -> ToolNames:
        """How the model names the tools (its adapter's ``name_rule``: a hint must say
        ``ops__deploy_status`` to a model that knows only that) and, with ``tools``, all it may call."""
        rule = getattr(self.model, "name_rule", None)
        rule = rule if isinstance(rule, NameRule) else None
        if rule is None and self._tool_names is None:
            return FULL_NAMES
        offered = self._tool_names
        if offered is None:
            offered = [spec.name for spec in self.gate.tools(self.principal, builtin=False)]
        names = [*offered, *usable_builtins(run), RUN_CODE]
        return ProviderNames(names, rule, only=self._tool_names is not None)

    def _emit(self, run: RunState, kind: EventKind, text: str = "", **data: Any) -> None:
        if self._on_event is not None:
            self._on_event(RunEvent(kind=kind, run_id=run.id, text=text, data=data))

    async def run(self, prompt: str, *, history: Sequence[Message] = ()) -> RunResult:
        """Run a new conversation that starts with ``history`` and ``prompt``.

        Raises:
            ValueError: the forced tool (``tool_choice``) is not one the run offers.
        """
        await self.gate.open()
        if isinstance(self.tool_choice, ForcedTool):
            offered = [spec.name for spec in self.gate.tools(self.principal, builtin=False)]
            if self._tool_names is not None:
                offered = [name for name in offered if name in self._tool_names]
            if self._code_mode:
                offered = [RUN_CODE]
            if self.tool_choice.name not in offered:
                raise ValueError(
                    f"the forced tool {self.tool_choice.name!r} is not a tool "
                    f"{self.principal.user} may call here."
                    + did_you_mean(self.tool_choice.name, offered)
                    + (
                        f" In code mode the model is offered {RUN_CODE} alone."
                        if self._code_mode
                        else ""
                    )
                )
        run = RunState(
            id="run_" + secrets.token_urlsafe(12),
            created_at=self.gate.clock.now(),
            messages=[*history, UserMessage(content=prompt)],
            usage=RunUsage(),
        )
        return await self._go(run)

    async def resume(self, run_id: str) -> RunResult:
        """Continue a run that waited for an approval (or report how it ended).

        Raises:
            LookupError: no run ``run_id`` of this principal.
        """
        await self.gate.open()
        record = await (await self.gate.runs()).get_run(run_id)
        if record is None or not access.check(self.principal, access.Action.READ_OWN, record):
            raise LookupError(f"no agent run {run_id!r} of {self.principal.user}")
        run = RunState.load(record)
        if record.status != "waiting_approval":
            return self._result(run, record.status, "the run has ended already")
        return await self._go(run)

    # -- the loop -------------------------------------------------------------
    async def _go(self, run: RunState) -> RunResult:
        resumed = run.turn > 0
        self._emit(run, "start", self.model.name, resumed=resumed)
        # callgate.tracing: the run's span (a no-op when tracing is off).
        with agent_run(self.model.name, run.id, self.principal, resumed=resumed) as span:
            return await self._go_traced(run, span)

    async def _go_traced(self, run: RunState, span: RunSpan) -> RunResult:
        started = time.monotonic()
        spent_before = run.usage.seconds
        try:
            with anyio.fail_after(self._time_left(spent_before)):
                status, reason = await self._loop(run)
        except TimeoutError:
            status, reason = "stopped", f"wall time limit ({self.limits.wall_time:g} s) reached"
        except _Stop as stop:
            status, reason = stop.status, stop.reason
        span.ended(status, reason, run)
        run.usage.seconds = spent_before + (time.monotonic() - started)
        kinds: dict[str, EventKind] = {
            "completed": "done",
            "waiting_approval": "waiting",
            "stopped": "stopped",
            "failed": "failed",
            "running": "stopped",
        }
        kind = kinds[status]
        self._emit(run, kind, reason, approvals=list(run.pending))
        await self._save(run, status)
        return self._result(run, status, reason)

    def _time_left(self, spent: float) -> float | None:
        if self.limits.wall_time is None:
            return None
        return max(self.limits.wall_time - spent, 0.001)

    async def _loop(self, run: RunState) -> tuple[RunStatus, str]:
        if run.remaining or run.pending:
            outcome = await self._finish_turn(run)
            if outcome is not None:
                return outcome
            if isinstance(self.tool_choice, ForcedTool):
                # The forced call was made on this resume: asking again would force
                # another (a second delete, waiting for a second approval).
                return self._forced_done()
        while True:
            self._check_limits(run)
            response = await self._ask(run)
            message = unique_call_ids(response.message, call_ids(run.messages))
            run.messages.append(message)
            if message.text:
                self._emit(run, "text", message.text)
            calls = message.tool_calls
            if not calls:
                return _ending(response, self.limits)
            if run.usage.tool_calls + len(calls) > self.limits.max_tool_calls:
                raise _Stop(
                    "stopped",
                    f"tool call limit ({self.limits.max_tool_calls}) reached: the model "
                    f"proposed {len(calls)} more",
                )
            run.turn_calls = [c.id for c in calls]
            run.remaining = list(calls)
            run.results = {}
            outcome = await self._finish_turn(run)
            if outcome is not None:
                return outcome
            if isinstance(self.tool_choice, ForcedTool):
                return self._forced_done()

    def _forced_done(self) -> tuple[RunStatus, str]:
        assert isinstance(self.tool_choice, ForcedTool)
        return "completed", f"the forced tool {self.tool_choice.name} was called"

    def _check_limits(self, run: RunState) -> None:
        limits = self.limits
        if run.turn >= limits.max_turns:
            raise _Stop("stopped", f"turn limit ({limits.max_turns}) reached")
        spent = run.usage.input_tokens + run.usage.output_tokens
        if limits.max_tokens is not None and spent >= limits.max_tokens:
            raise _Stop("stopped", f"token limit ({limits.max_tokens}) reached: {spent} spent")

    async def _ask(self, run: RunState) -> ModelResponse:
        tools = self._tools(run)
        request = ModelRequest(
            messages=tuple(run.messages),
            tools=tools,
            system=self.system,
            tool_choice=self.tool_choice,
            parallel_tool_calls=self.limits.concurrent_reads,
            max_tokens=self.limits.max_tokens_per_request,
            temperature=self.temperature,
        )
        run.turn += 1
        run.usage.requests += 1
        definitions = [definition_json(t) for t in tools]
        definition_tokens = estimate_tokens(definitions)
        run.trace.append(
            {
                "type": "model_request",
                "turn": run.turn,
                "at": self.gate.clock.now().isoformat(),
                "model": self.model.name,
                "messages": len(request.messages),
                "tools": [t.name for t in tools],
                "tool_choice": self.tool_choice
                if isinstance(self.tool_choice, str)
                else {"tool": self.tool_choice.name},
            }
        )
        try:
            with model_turn(self.model.name, request, run.turn) as turn:  # callgate.tracing
                response = turn.answered(await self.model.request(request))
        except ModelError as exc:
            run.trace.append({"type": "model_error", "turn": run.turn, "error": str(exc)})
            if exc.cut_off:  # like an answer cut off at the output limit: a limit, not a fault
                raise _Stop("stopped", f"the run ran out of context: {exc}") from None
            raise _Stop("failed", f"the model request failed: {exc}") from None
        run.usage.input_tokens += response.usage.input_tokens
        run.usage.output_tokens += response.usage.output_tokens
        if response.usage.input_tokens:
            # The server's count bounds the estimate: the definitions are part of it.
            definition_tokens = min(definition_tokens, response.usage.input_tokens)
        run.usage.tool_definition_tokens += definition_tokens
        run.trace.append(
            {
                "type": "model_response",
                "turn": run.turn,
                "at": self.gate.clock.now().isoformat(),
                "stop_reason": response.stop_reason,
                "usage": {
                    "input_tokens": response.usage.input_tokens,
                    "output_tokens": response.usage.output_tokens,
                },
                "message": message_to_json(response.message),
                "raw": dict(response.raw) if response.raw is not None else None,
            }
        )
        return response

    async def _finish_turn(self, run: RunState) -> tuple[RunStatus, str] | None:
        """Make the turn's remaining calls; None once all have results (sent back)."""
        run.pending = []
        while run.remaining:
            batch = self._next_batch(run.remaining)
            envelopes: list[Envelope | None] = [None] * len(batch)

            async def make(
                index: int, call: ToolCall, into: list[Envelope | None] = envelopes
            ) -> None:
                into[index] = await self._call(run, call)

            async with anyio.create_task_group() as group:
                for index, call in enumerate(batch):
                    group.start_soon(make, index, call)
            for call, envelope in zip(batch, envelopes, strict=True):
                assert envelope is not None
                self._count(run, call, envelope)
                if envelope.status is Status.PENDING_APPROVAL and envelope.approval is not None:
                    run.pending.append(envelope.approval.approval_id)
                    continue
                run.results[call.id] = result_for(call, envelope)
                run.remaining.remove(call)
                if envelope.error is not None and envelope.error.kind is ErrorKind.CONSTRUCTION:
                    cut_refused(run, call)
            if run.pending:
                # Later calls of the turn may depend on the parked one: they wait too.
                return "waiting_approval", (
                    f"waiting for approval {', '.join(run.pending)}; resume with "
                    f"callgate run --resume {run.id}"
                )
        ordered = tuple(run.results[call_id] for call_id in run.turn_calls)
        run.messages.append(ToolResults(results=ordered))
        run.results = {}
        run.turn_calls = []
        return None

    def _next_batch(self, remaining: Sequence[ToolCall]) -> list[ToolCall]:
        first = remaining[0]
        if not (self.limits.concurrent_reads and self._is_read(first)):
            return [first]
        batch = []
        for call in remaining:
            if not self._is_read(call):
                break
            batch.append(call)
        return batch

    def _is_read(self, call: ToolCall) -> bool:
        spec = self.gate.tool(call.name)
        return spec is not None and spec.risk is RiskTier.READ

    async def _call(self, run: RunState, call: ToolCall) -> Envelope:
        self._emit(
            run,
            "call",
            call.name,
            call_id=call.id,
            arguments=dict(call.arguments),
            raw_arguments=call.raw_arguments,
        )
        arguments: Mapping[str, Any] | str = (
            call.raw_arguments if call.raw_arguments is not None else call.arguments
        )
        envelope = await self.gate.call(
            call.name,
            arguments,
            principal=self.principal,
            session_id=f"agent:{run.id}",
            names=self._names(run),
            # One key per write of the run: even two processes resuming the same run
            # cannot make a write twice. Reads are safe to repeat and skip the cost.
            idempotency_key=None if self._is_read(call) else f"{run.id}:{run.turn}:{call.id}",
        )
        run.trace.append(
            {
                "type": "tool_call",
                "turn": run.turn,
                "call": call_json(call),
                "envelope": envelope.model_dump(mode="json"),
            }
        )
        self._emit(
            run,
            "result",
            result_for(call, envelope).content,
            call_id=call.id,
            name=call.name,
            status=envelope.status.value,
        )
        return envelope

    def _count(self, run: RunState, call: ToolCall, envelope: Envelope) -> None:
        """Count ``call`` once in the run's usage, however often a resume makes it:
        a call parked for approval counts as a call and an approval when it parks,
        and its outcome is replaced by the final one when it ends."""
        usage = run.usage
        pending = envelope.status is Status.PENDING_APPROVAL
        if call.id in run.parked:
            if pending:
                return  # still waiting: counted already
            run.parked.remove(call.id)
            add_count(usage.outcomes, "pending_approval", -1)
        else:
            usage.tool_calls += 1
            spec = self.gate.tool(call.name)
            add_count(usage.calls_by_risk, spec.risk.value if spec is not None else "unknown", 1)
        if pending:
            run.parked.append(call.id)
            usage.approvals += 1
            add_count(usage.outcomes, "pending_approval", 1)
            return
        if envelope.error is not None:
            usage.errors += 1
        add_count(
            usage.outcomes,
            envelope.error.kind.value if envelope.error else envelope.status.value,
            1,
        )
        run.calls.append(
            CallOutcome(
                call_id=call.id,
                name=call.name,
                arguments=dict(call.arguments),
                status=envelope.status.value,
                payload=envelope.payload if envelope.status is Status.OK else None,
                error_kind=envelope.error.kind.value if envelope.error else None,
            )
        )

    # -- results ----------------------------------------------------------------
    async def _save(self, run: RunState, status: RunStatus) -> None:
        await (await self.gate.runs()).save_run(
            RunRecord(
                id=run.id,
                user=self.principal.user,
                tenant=self.principal.tenant,
                status=status,
                created_at=run.created_at,
                updated_at=self.gate.clock.now(),
                state=run.state(
                    self.model.name,
                    base_url=getattr(self.model, "base_url", None),
                    temperature=self.temperature,
                    forced_tool=self.tool_choice.name
                    if isinstance(self.tool_choice, ForcedTool)
                    else None,
                    principal=self.principal,
                ),
                trace=run.trace,
            )
        )

    def _result(self, run: RunState, status: RunStatus, reason: str) -> RunResult:
        output = ""
        for message in reversed(run.messages):
            if isinstance(message, AssistantMessage) and message.text:
                output = message.text
                break
        return RunResult(
            run_id=run.id,
            status=status,
            reason=reason,
            output=output,
            messages=tuple(run.messages),
            usage=replace(run.usage),
            calls=tuple(run.calls),
            pending_approvals=tuple(run.pending) if status == "waiting_approval" else (),
        )
