"""The governed call chain, composed in one place.

This module holds the only code path that executes tools: every entry point
(Python API, CLI, MCP server, agent loop, code mode) calls ``run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio

from callgate.contract.change import ChangeRole
from callgate.errors import ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.stages import change
from callgate.runtime.stages.authorize import authorize
from callgate.runtime.stages.classify import classify
from callgate.runtime.stages.decide import decide
from callgate.runtime.stages.execute import execute
from callgate.runtime.stages.inject import inject
from callgate.runtime.stages.normalize import normalize
from callgate.runtime.stages.rate_limit import rate_limit
from callgate.runtime.stages.record import record, unrecorded
from callgate.runtime.stages.resolve import resolve
from callgate.runtime.stages.shape import shape
from callgate.runtime.stages.validate import validate
from callgate.store.failures import describe, is_unavailable

Stage = Callable[[Call], Awaitable[Envelope | None]]

STAGES: tuple[Stage, ...] = (
    resolve,  # 1
    # Scopes and tenants before anything else: a caller who may not use a tool
    # learns nothing about its parameters from validation errors.
    authorize,  # 2
    # Over a rate limit: refused before anything is spent on the arguments. Left
    # out (not even awaited) when the gate has no rate limits.
    rate_limit,  # 2b
    validate,  # 3
    inject,  # 4
    classify,  # 5
    decide,  # 6
    execute,  # 7
    normalize,  # 8
    shape,  # 9 (always ends the chain with the Envelope)
)
"""The chain of every tool but the three of a previewed change."""

CHANGE_STAGES: dict[ChangeRole, tuple[Stage, ...]] = {
    # The same stages, with the change's own where it differs (stages/change.py).
    "preview": (*STAGES[:5], change.repeatable, *STAGES[5:8], change.keep, *STAGES[8:]),
    "apply": (*STAGES[:5], change.bind, *STAGES[5:]),
    "status": (*STAGES[:5], change.bind, *STAGES[5:7], change.check_status, *STAGES[8:]),
}


def _after_resolve(stages: tuple[Stage, ...], *, limited: bool) -> tuple[Stage, ...]:
    return tuple(s for s in stages[1:] if limited or s is not rate_limit)


# Chosen per call by whether the gate has a rate limiter: [limited][change role or None].
_AFTER_RESOLVE: dict[bool, dict[ChangeRole | None, tuple[Stage, ...]]] = {
    limited: {
        None: _after_resolve(STAGES, limited=limited),
        **{role: _after_resolve(stages, limited=limited) for role, stages in CHANGE_STAGES.items()},
    }
    for limited in (False, True)
}


Chains = tuple[Stage, dict[bool, dict[ChangeRole | None, tuple[Stage, ...]]]]
"""Resolve, then the stages after it by [rate limited][change role or None]."""

CHAINS: Chains = (resolve, _AFTER_RESOLVE)


async def run(call: Call) -> Envelope:
    """Run ``call`` through every stage, then record it (stage 10).

    Whatever the store does, the caller gets an Envelope; it is the chain's
    own only once its audit record is durable (see ``stages/record.py`` for what
    the caller gets when the store does not answer). If the caller is cancelled,
    the call is still recorded (as an unknown outcome when a side effect may
    have started) before the cancellation propagates.
    """
    tracer = call.services.tracer
    if tracer is None:  # tracing off (the default): nothing else to pay
        return await _run(call, CHAINS)
    # callgate.tracing: the same chain in the call's span, each stage adding its event.
    return await tracer.governed(call, lambda: _run(call, tracer.chains(CHAINS)))


async def _run(call: Call, chains: Chains) -> Envelope:
    store_failed = False
    try:
        envelope = await _stages(call, chains)
    except asyncio.CancelledError:
        envelope = _cancelled(call)
        # Shielded for real (not asyncio.shield, which only detaches): the
        # record is written before the cancellation goes on.
        with anyio.CancelScope(shield=True):
            await record(call, envelope)
        raise
    except Exception as exc:
        # A failure of the gateway itself (not of the tool): still one Envelope,
        # still audited. If the tool had already run, its effect may be real.
        store_failed = is_unavailable(exc)
        if store_failed:
            # The driver's text names SQL and its parameters: a short form only.
            call.detail["store_error"] = describe(exc)
            envelope = unrecorded(call)
        else:
            call.detail["internal_error"] = f"{type(exc).__name__}: {exc}"[:2000]
            envelope = _gateway_failure(call)
    # No shield needed here: the committer writes a queued record even if this
    # caller is cancelled while waiting for it.
    return await record(call, envelope, store_failed=store_failed)


async def _stages(call: Call, chains: Chains) -> Envelope:
    first, after_resolve = chains
    envelope = await first(call)
    if envelope is not None:
        call.refused_by = first.__name__
        return envelope
    # The stages after resolve: the tool it found decides the rest of the chain.
    binding = call.spec.change if call.spec is not None else None
    after = after_resolve[call.services.rate_limiter is not None]
    for stage in after[None if binding is None else binding.role]:
        envelope = await stage(call)
        if envelope is not None:
            if call.decision is None and envelope.error is not None:
                call.refused_by = stage.__name__  # the audit says which stage refused
            return envelope
    raise RuntimeError("the shape stage must end the chain")  # pragma: no cover


def _gateway_failure(call: Call) -> Envelope:
    ran = call.attempts > 0
    if ran and call.spec is not None and not call.spec.effective_annotations.read_only:
        return call.fail(
            ErrorKind.UNKNOWN_OUTCOME,
            f"{call.shown(call.spec.name)} ran, but the gateway failed while preparing its result "
            f"(reference {call.call_id}); the change may have been made.",
            next_step="Do not retry. Check the current state before doing anything else.",
            detail_ref=call.call_id,
        )
    return call.fail(
        ErrorKind.UNRECOVERABLE,
        f"The gateway failed to process this call (reference {call.call_id}).",
        next_step="Do not retry. Tell the user the request could not be completed and give "
        f"them the reference {call.call_id}.",
        detail_ref=call.call_id,
    )


def _cancelled(call: Call) -> Envelope:
    call.detail["cancelled"] = True
    if call.intent_written:
        return call.fail(
            ErrorKind.UNKNOWN_OUTCOME,
            "The call was cancelled while the tool was running; the change may or may not "
            "have been made.",
            next_step="Do not retry. Check the current state before doing anything else.",
        )
    return call.fail(
        ErrorKind.TRANSIENT,
        "The call was cancelled before it had any effect.",
        retryable=True,
    )
