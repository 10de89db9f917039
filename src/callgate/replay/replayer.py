"""Replay a recorded agent run against the gate as it is now.

The run's turns are rebuilt from its recording; a :class:`ReplayModel` answers
each turn with the model's recorded response, and every tool call in it is
taken through the chain's checks against the current gate (its tools, their
contracts, its policy: :meth:`Gate.check`). The call is then
answered from the recording, or, with ``live``, made again through
:meth:`Gate.call` when the gate would run it without a human: that call is
real (side effects included) and audited like any other.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any, Literal

from callgate.agent.messages import Message, ModelRequest, ToolResult, ToolResults
from callgate.agent.tools import result_for
from callgate.contract import Principal
from callgate.discovery.meta import CALL_TOOL, inner_call
from callgate.replay.model import ReplayModel
from callgate.replay.recording import RecordedCall, recording_of
from callgate.replay.report import CallReplay, Difference, ReplayReport, structural_diff
from callgate.runtime.check import Check
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.gate import Gate
from callgate.store import AuditRecord

__all__ = ["replay"]

COMPARED_REFUSALS = ("refused:resolve", "refused:authorize", "refused:validate", "refused:inject")
"""Refusals a check can reach again. A call refused by the rate limit or by a
previewed change's own stages is not compared (a check runs neither)."""


async def replay(
    gate: Gate,
    run_id: str,
    *,
    principal: Principal | None = None,
    live: bool = False,
    on_call: Callable[[CallReplay, int], None] | None = None,
) -> ReplayReport:
    """Replay the recorded run ``run_id`` against ``gate`` and report what differs.

    Args:
        gate: the gate as it is now; the run is read from its store.
        run_id: the agent run (``callgate run`` prints it).
        principal: whom the calls are checked (and, live, made) for; by default
            the run's principal as recorded (user, tenant, scopes, roles and
            attributes), or for a run recorded without them, its user and tenant
            with every scope ``gate``'s tools require.
        live: make the calls the gate would run without a human again, against
            the tools as they are now (their side effects happen again), and
            compare the results; otherwise every call is answered from the recording.
        on_call: called with each call's replay as it is done and the number of
            calls in all (progress: a live call takes as long as the tool does).

    Raises:
        LookupError: no run ``run_id`` in the gate's store.
    """
    record = await (await gate.runs()).get_run(run_id)
    if record is None:
        raise LookupError(f"no agent run {run_id!r}")
    recording = recording_of(record)
    who = (
        principal
        or recording.principal
        or Principal(recording.user, recording.tenant, scopes=gate.required_scopes())
    )
    # A session of its own: the trifecta guard sees only what this replay brought in.
    session = f"replay:{run_id}:{secrets.token_hex(4)}"
    model = ReplayModel(recording)
    messages: list[Message] = list(recording.opening)
    replayed: list[CallReplay] = []
    total = sum(len(turn.calls) for turn in recording.turns)
    for _turn in recording.turns:
        response = await model.request(ModelRequest(messages=tuple(messages)))
        messages.append(response.message)
        results: list[ToolResult] = []
        for recorded in _turn.calls:
            outcome, answer = await _replay_call(
                gate, recorded, who, session, live=live, number=len(replayed) + 1
            )
            replayed.append(outcome)
            if on_call is not None:
                on_call(outcome, total)
            if answer is not None:
                results.append(result_for(recorded.call, answer))
        if results:
            messages.append(ToolResults(results=tuple(results)))
    return ReplayReport(run_id=run_id, live=live, turns=len(recording.turns), calls=tuple(replayed))


async def _replay_call(
    gate: Gate,
    recorded: RecordedCall,
    who: Principal,
    session: str,
    *,
    live: bool,
    number: int,
) -> tuple[CallReplay, Envelope | None]:
    call = recorded.call
    sent: Mapping[str, Any] | str = (
        call.raw_arguments if call.raw_arguments is not None else call.arguments
    )
    first, final = recorded.first, recorded.final
    tool, arguments = _target(call.name, sent)
    if first is not None:
        tool = first.tool  # the full name the chain resolved (a provider's may differ)
    audit = await _audit(gate, first)
    then = _then(first, audit)
    now = await gate.check(tool, arguments, principal=who, session_id=session)
    differences = _compare(then, now, audit)
    answer = final
    answered: Literal["recording", "live", "none"] = "recording" if final is not None else "none"
    if live and now.runs:
        answer = await gate.call(tool, arguments, principal=who, session_id=session)
        answered = "live"
        if final is not None:
            differences += _result_difference(final, answer)
    replay = CallReplay(
        number=number,
        turn=recorded.turn,
        call_id=call.id,
        tool=tool,
        arguments=arguments,
        then=then,
        now=now.outcome,
        answered=answered,
        differences=tuple(differences),
    )
    return replay, answer


def _target(tool: str, arguments: Any) -> tuple[str, Any]:
    """The tool and arguments a recorded call ran as: a ``callgate.call_tool`` call
    runs as the tool it names (as :meth:`Gate.call` does)."""
    if tool == CALL_TOOL:
        inner = inner_call(arguments)
        if inner is not None and inner[0] != CALL_TOOL:
            return inner
    return tool, arguments


async def _audit(gate: Gate, envelope: Envelope | None) -> AuditRecord | None:
    """The final audit record of the call's first pass (its decision and contract)."""
    if envelope is None:
        return None
    records = await gate.audit(call_id=envelope.call_id)
    finals = [r for r in records if r.phase == "final"]
    return finals[-1] if finals else None


def _then(envelope: Envelope | None, audit: AuditRecord | None) -> str | None:
    """How the chain took the call then, as the audit writes it (``missing`` for an
    unknown tool); from the Envelope when the audit has no record of it."""
    decision: str | None = audit.decision if audit is not None else None
    if decision is None and envelope is not None and envelope.decision is not None:
        decision = envelope.decision.effect
    if decision == "refused:resolve":
        return "missing"
    if decision == "approved":  # an approval was used: policy required one
        return "require_approval"
    return decision


def _compare(then: str | None, now: Check, audit: AuditRecord | None) -> list[Difference]:
    found: list[Difference] = []
    comparable = then is not None and (not then.startswith("refused:") or then in COMPARED_REFUSALS)
    if comparable and now.outcome != then:
        if now.outcome == "missing":
            found.append(Difference(kind="tool_missing", text=f"{now.tool} is not served now"))
        elif now.outcome == "refused:validate":
            found.append(Difference(kind="fails_validation", text=now.reason or ""))
        else:
            text = f"{then} -> {now.outcome}"
            if now.reason:
                text += f" ({now.reason})"
            found.append(Difference(kind="decision_changed", text=text))
    old_hash = audit.contract_hash if audit is not None else None
    if old_hash and now.contract_hash and old_hash != now.contract_hash:
        text = f"{now.tool}: {old_hash[:19]} -> {now.contract_hash[:19]}"
        if audit is not None and audit.tool_version != now.tool_version:
            text += f" (version {audit.tool_version} -> {now.tool_version})"
        found.append(Difference(kind="contract_changed", text=text))
    return found


def _kind(envelope: Envelope) -> str:
    return envelope.error.kind.value if envelope.error is not None else envelope.status.value


def _result_difference(then: Envelope, now: Envelope) -> list[Difference]:
    if then.status is not now.status or _kind(then) != _kind(now):
        text = f"{_kind(then)} -> {_kind(now)}"
        if now.status is not Status.OK:
            text += f": {now.explanation().splitlines()[0]}"
        return [Difference(kind="result_changed", text=text)]
    if now.status is not Status.OK:
        return []
    lines = structural_diff(then.payload, now.payload)
    if not lines:
        return []
    return [Difference(kind="result_changed", text="; ".join(lines))]
